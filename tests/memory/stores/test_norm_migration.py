"""A database written under the old dedup key (trimmed, lowercased, whitespace collapsed) has its stored
`norm` recomputed with `meaning_key` once, on open, so a restatement of an old row folds into it."""

from __future__ import annotations

import sqlite3
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from memory.rules.restate import meaning_key
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.schema import database_filename
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import WriteResult
from tests.memory.postgres_support import TempSchema, schema_rows, unique_application_name
from tests.memory.records import NOW, fact

SCOPE = "org:acme"
DEPLOYS = "Deploys go through make ship from the main branch."
NEAR_MISS = "Releases go through make ship from the main branch."
RESTATED = "Deploys go through `make ship` from the main branch!"


def _old_norm(text: str) -> str:
    """The dedup key as it was before restatements folded (what an older database holds)."""
    return " ".join(text.strip().lower().split())


def _migrated(logs: Sequence[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == "memory.store.norm_migrated"]


def _clock() -> float:
    return NOW


# -- SQLite ------------------------------------------------------------------------------------------


def _sqlite(path: Path, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


async def _old_sqlite_database(data_dir: Path) -> Path:
    store = SqliteMemoryStore(data_dir, clock=_clock)
    try:
        await store.write(SCOPE, [fact(DEPLOYS), fact(NEAR_MISS)])
    finally:
        await store.aclose()
    path = data_dir / database_filename(SCOPE)
    for (text,) in _sqlite(path, "SELECT text FROM records"):
        _sqlite(path, "UPDATE records SET norm = ? WHERE text = ?", (_old_norm(text), text))
    _sqlite(path, "DELETE FROM meta WHERE key = 'norm_key'")
    return path


async def test_a_sqlite_database_of_the_old_key_folds_restatements_after_its_migration(
    tmp_path: Path,
) -> None:
    path = await _old_sqlite_database(tmp_path / "memory")
    with capture_logs() as logs:
        store = SqliteMemoryStore(tmp_path / "memory", clock=_clock)
        try:
            assert await store.write(SCOPE, [fact(RESTATED)]) == WriteResult(deduped=1)
            assert {r.text: r.use_count for r in await store.list(SCOPE, 5)} == {DEPLOYS: 1, NEAR_MISS: 0}
        finally:
            await store.aclose()
    assert [entry["records"] for entry in _migrated(logs)] == [2]
    assert _sqlite(path, "SELECT norm FROM records ORDER BY seq") == [
        (meaning_key(DEPLOYS),),
        (meaning_key(NEAR_MISS),),
    ]
    with capture_logs() as again:
        reopened = SqliteMemoryStore(tmp_path / "memory", clock=_clock)
        try:
            assert len(await reopened.list(SCOPE, 5)) == 2
        finally:
            await reopened.aclose()
    assert _migrated(again) == []  # once: the marker stops a second scan


# -- PostgreSQL --------------------------------------------------------------------------------------


async def _connect(schema: TempSchema) -> PostgresMemoryStore:
    return await PostgresMemoryStore.connect(
        schema.dsn, clock=_clock, application_name=unique_application_name()
    )


async def test_a_postgres_table_of_the_old_key_folds_restatements_after_its_migration(
    schema: TempSchema,
) -> None:
    store = await _connect(schema)
    try:
        await store.write(SCOPE, [fact(DEPLOYS), fact(NEAR_MISS)])
    finally:
        await store.aclose()
    for (text,) in await schema_rows(schema, "SELECT text FROM memory_records"):
        await schema_rows(
            schema, "UPDATE memory_records SET norm = %s WHERE text = %s", (_old_norm(text), text)
        )
    await schema_rows(schema, "DELETE FROM memory_meta WHERE key = 'norm_key'")

    with capture_logs() as logs:
        migrated = await _connect(schema)
    try:
        assert await migrated.write(SCOPE, [fact(RESTATED)]) == WriteResult(deduped=1)
        assert {r.text: r.use_count for r in await migrated.list(SCOPE, 5)} == {DEPLOYS: 1, NEAR_MISS: 0}
    finally:
        await migrated.aclose()
    assert [entry["records"] for entry in _migrated(logs)] == [2]
    assert await schema_rows(schema, "SELECT norm FROM memory_records ORDER BY seq") == [
        (meaning_key(DEPLOYS),),
        (meaning_key(NEAR_MISS),),
    ]
    with capture_logs() as again:
        reopened = await _connect(schema)
    await reopened.aclose()
    assert _migrated(again) == []
