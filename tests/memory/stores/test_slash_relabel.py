"""Notes saved with the `/memory` slash command in a channel before such a note for the typist's own
scope was labelled `dm` carry the channel's label: each durable store relabels them once, in place
(`typed_alone`, memory/rules/visibility.py). The rows are made as the old code path left them: written,
then labelled and unmarked with SQL."""

from __future__ import annotations

import sqlite3
from collections.abc import MutableMapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from memory.stores.contract import MemoryStore
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.schema import database_filename
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate, Origin
from tests.memory.postgres_support import TempSchema, schema_rows, unique_application_name
from tests.memory.records import fact

USER = "user:slack:U0A"
CHANNEL = "channel:slack:C0PUB"
SLASH = "slack:C0PUB:slash"

# (scope, text, source thread, label as the old code saved it) → the label after the relabelling.
OLD_NOTES: dict[tuple[str, str, str, Origin], Origin] = {
    (USER, "my deploy token rotates mondays", SLASH, "public"): "dm",
    (USER, "my on call week is the second", "slack:C0PRIV:slash", "private"): "dm",
    (USER, "my badge is blue", "slack:C0EXT:slash", "external"): "external",  # said_in keeps it
    (USER, "deploys go out on tuesdays", "slack:C0PUB:1700000000.000100", "public"): "public",  # a run's
    (CHANNEL, "this channel deploys from main", SLASH, "public"): "public",  # a shared scope's note
}


def _note(text: str, thread: str) -> MemoryCandidate:
    return replace(fact(text), source_thread_key=thread)


def _relabelled(logs: Sequence[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == "memory.store.relabelled"]


async def _write_old_notes(store: MemoryStore) -> None:
    for scope, text, thread, _ in OLD_NOTES:
        await store.write(scope, [_note(text, thread)])


async def _labels(store: MemoryStore) -> dict[str, Origin]:
    return {r.text: r.origin for scope in (USER, CHANNEL) for r in await store.list(scope, 10)}


EXPECTED = {text: label for (_, text, _, _), label in OLD_NOTES.items()}


# -- SQLite ------------------------------------------------------------------------------------------


def _sqlite(path: Path, sql: str, params: Sequence[object] = ()) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute(sql, params)
    finally:
        connection.close()


async def test_sqlite_relabels_the_slash_notes_of_a_user_scope_once(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await _write_old_notes(store)
    finally:
        await store.aclose()
    for (scope, text, _, label), _ in OLD_NOTES.items():
        path = tmp_path / database_filename(scope)
        _sqlite(path, "UPDATE records SET origin = ? WHERE text = ?", (label, text))
        _sqlite(path, "DELETE FROM meta WHERE key = 'slash_notes'")  # as the old code left it

    with capture_logs() as logs:
        migrated = SqliteMemoryStore(tmp_path)
        try:
            assert await _labels(migrated) == EXPECTED
        finally:
            await migrated.aclose()
    assert [(e["scope_key"], e["records"]) for e in _relabelled(logs)] == [(USER, 2)]

    # Once: a note labelled `public` by hand afterwards stays so, and a second open says nothing.
    _sqlite(
        tmp_path / database_filename(USER),
        "UPDATE records SET origin = 'public' WHERE text = ?",
        ("my badge is blue",),
    )
    with capture_logs() as again:
        reopened = SqliteMemoryStore(tmp_path)
        try:
            assert (await _labels(reopened))["my badge is blue"] == "public"
        finally:
            await reopened.aclose()
    assert _relabelled(again) == []


# -- PostgreSQL --------------------------------------------------------------------------------------


async def _connect(schema: TempSchema) -> PostgresMemoryStore:
    return await PostgresMemoryStore.connect(schema.dsn, application_name=unique_application_name())


async def test_postgres_relabels_the_slash_notes_of_user_scopes_once(schema: TempSchema) -> None:
    store = await _connect(schema)
    try:
        await _write_old_notes(store)
    finally:
        await store.aclose()
    for (scope, text, _, label), _ in OLD_NOTES.items():
        await schema_rows(
            schema,
            "UPDATE memory_records SET origin = %s WHERE scope_key = %s AND text = %s",
            (label, scope, text),
        )
    await schema_rows(schema, "DELETE FROM memory_meta WHERE key = 'slash_notes'")  # as the old code left it

    with capture_logs() as logs:
        migrated = await _connect(schema)
    try:
        assert await _labels(migrated) == EXPECTED
    finally:
        await migrated.aclose()
    assert [e["records"] for e in _relabelled(logs)] == [2]

    await schema_rows(schema, "UPDATE memory_records SET origin = 'public' WHERE text = 'my badge is blue'")
    with capture_logs() as again:
        reopened = await _connect(schema)
    try:
        assert (await _labels(reopened))["my badge is blue"] == "public"
    finally:
        await reopened.aclose()
    assert _relabelled(again) == []
