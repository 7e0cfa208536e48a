"""A database of today's schema (records without `observed_at`) migrates in place: every existing row
takes its `created_at`, once, and new writes keep their own time."""

from __future__ import annotations

import sqlite3
from collections.abc import MutableMapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.schema import database_filename
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.memory.postgres_support import TempSchema, schema_rows, unique_application_name
from tests.memory.records import DAY, NOW, fact

SCOPE = "org:acme"


class StepClock:
    """Each write lands a day after the last: rows with distinct `created_at`."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _migrated(logs: Sequence[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == "memory.store.observed_migrated"]


# -- SQLite ------------------------------------------------------------------------------------------


def _columns(path: Path) -> set[str]:
    with sqlite3.connect(path) as connection:
        return {str(row[1]) for row in connection.execute("PRAGMA table_info(records)")}


def _sqlite(path: Path, sql: str) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


async def _todays_sqlite_database(data_dir: Path, clock: StepClock) -> Path:
    """Rows written at NOW and NOW + 1 day, then the column dropped: the schema as it is on main."""
    store = SqliteMemoryStore(data_dir, clock=clock)
    try:
        await store.write(SCOPE, [fact("deploy with make")])
        clock.now += DAY
        await store.write(SCOPE, [fact("deploy from main")])
    finally:
        await store.aclose()
    path = data_dir / database_filename(SCOPE)
    _sqlite(path, "ALTER TABLE records DROP COLUMN observed_at")
    assert "observed_at" not in _columns(path)
    return path


async def test_a_sqlite_database_of_todays_schema_dates_its_rows_by_created_at(tmp_path: Path) -> None:
    clock = StepClock()
    path = await _todays_sqlite_database(tmp_path / "memory", clock)
    clock.now += DAY
    with capture_logs() as logs:
        store = SqliteMemoryStore(tmp_path / "memory", clock=clock)
        try:
            listed = await store.list(SCOPE, 5)
            assert {r.text: r.observed_at for r in listed} == {
                "deploy with make": NOW,
                "deploy from main": NOW + DAY,
            }
            await store.write(SCOPE, [replace(fact("deploy by hand"), observed_at=NOW - 9 * DAY)])
        finally:
            await store.aclose()
    assert [entry["records"] for entry in _migrated(logs)] == [2]
    # In the file itself, not only as read: the column exists and holds each row's time.
    assert _sqlite(path, "SELECT observed_at, created_at FROM records ORDER BY seq") == [
        (NOW, NOW),
        (NOW + DAY, NOW + DAY),
        (NOW - 9 * DAY, NOW + 2 * DAY),
    ]
    with capture_logs() as again:
        reopened = SqliteMemoryStore(tmp_path / "memory", clock=clock)
        try:
            assert len(await reopened.list(SCOPE, 5)) == 3
        finally:
            await reopened.aclose()
    assert _migrated(again) == []  # once: a later open relabels nothing


# -- PostgreSQL --------------------------------------------------------------------------------------


async def _connect(schema: TempSchema, clock: StepClock) -> PostgresMemoryStore:
    return await PostgresMemoryStore.connect(
        schema.dsn, clock=clock, application_name=unique_application_name()
    )


async def test_a_postgres_table_of_todays_schema_dates_its_rows_by_created_at(schema: TempSchema) -> None:
    clock = StepClock()
    store = await _connect(schema, clock)
    try:
        await store.write(SCOPE, [fact("deploy with make")])
        clock.now += DAY
        await store.write(SCOPE, [fact("deploy from main")])
    finally:
        await store.aclose()
    # Today's schema: no column, no marker.
    await schema_rows(schema, "ALTER TABLE memory_records DROP COLUMN observed_at")
    await schema_rows(schema, "DELETE FROM memory_meta WHERE key = 'observed_at'")

    clock.now += DAY
    with capture_logs() as logs:
        migrated = await _connect(schema, clock)
    try:
        assert {r.text: r.observed_at for r in await migrated.list(SCOPE, 5)} == {
            "deploy with make": NOW,
            "deploy from main": NOW + DAY,
        }
        await migrated.write(SCOPE, [replace(fact("deploy by hand"), observed_at=NOW - 9 * DAY)])
    finally:
        await migrated.aclose()
    assert [entry["records"] for entry in _migrated(logs)] == [2]
    assert await schema_rows(schema, "SELECT observed_at, created_at FROM memory_records ORDER BY seq") == [
        (NOW, NOW),
        (NOW + DAY, NOW + DAY),
        (NOW - 9 * DAY, NOW + 2 * DAY),
    ]
    # A row an older replica writes later has none: it reads as observed when it was written, and a
    # second open does not scan the table again.
    await schema_rows(
        schema,
        "INSERT INTO memory_records (scope_key, seq, id, kind, text, norm, tokens, source_thread_key,"
        " created_at, origin) VALUES (%s, 4, %s, 'fact', 'old replica', 'old replica',"
        " ARRAY['old', 'replica'], 'slack:C1:1.0', %s, 'public')",
        (SCOPE, f"mem:{SCOPE}:4", NOW + 3 * DAY),
    )
    with capture_logs() as again:
        reopened = await _connect(schema, clock)
    try:
        (old,) = await reopened.fetch(SCOPE, [f"mem:{SCOPE}:4"])
        assert old.observed_at == NOW + 3 * DAY
    finally:
        await reopened.aclose()
    assert _migrated(again) == []
    assert await schema_rows(schema, "SELECT observed_at FROM memory_records WHERE seq = 4") == [(None,)]
