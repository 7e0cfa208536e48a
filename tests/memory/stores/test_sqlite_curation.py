"""Curation in the SQLite store, where the protocol cannot look: the bytes on disk after a reject, an
expiry, a forget of an edited record and a merge; the indexes a pending row stays out of; another
store over the same directory following an approval; the events logged; and a database of today's
schema, whose status CHECK predates `pending`, rebuilt in place."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import MutableMapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from memory.stores.sqlite.schema import database_filename
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.memory.store_contract import DAY, FakeClock
from tests.memory.stores.test_erasure import ORG, SECRET, SECRET_TEXT, candidate, disk_bytes, filler

ADMIN = "user:slack:UADMIN"


def holds(store: SqliteMemoryStore, word: str = SECRET) -> bool:
    """Whether the scope's main file or its WAL holds the word (case-blind)."""
    return word.lower().encode() in disk_bytes(store, ORG)


def rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return connection.execute(sql, params).fetchall()


def rid(seq: int) -> str:
    return f"mem:{ORG}:{seq}"


# -- no bytes left --------------------------------------------------------------------------------


async def test_a_rejected_record_leaves_no_text_in_the_files(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await store.write(ORG, filler(20))
        await store.write_pending(ORG, [candidate(SECRET_TEXT)])
        assert holds(store)  # the check can see it
        assert await store.reject(ORG, rid(21), ADMIN)
        assert not holds(store)
    finally:
        await store.aclose()


async def test_an_expired_pending_record_leaves_no_text_in_the_files(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path, clock=clock)
    try:
        await store.write(ORG, filler(20))
        await store.write_pending(ORG, [candidate(SECRET_TEXT)])
        clock.advance(15 * DAY)
        assert holds(store)
        assert await store.expire_pending(clock() - 14 * DAY) == 1
        assert not holds(store)
    finally:
        await store.aclose()


async def test_a_pending_record_expired_over_the_cap_leaves_no_text_in_the_files(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path, cap=2, clock=clock)
    try:
        await store.write_pending(ORG, [candidate(SECRET_TEXT)])
        clock.advance(1)
        await store.write_pending(ORG, filler(2))
        assert [r.id for r in await store.pending(ORG, 10)] == [rid(3), rid(2)]
        assert not holds(store)
    finally:
        await store.aclose()


async def test_forgetting_an_edited_record_leaves_neither_version_in_the_files(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await store.write(ORG, [*filler(20), candidate(SECRET_TEXT)])
        edited = await store.edit(ORG, rid(21), "The vault door code is Wombatgate two", ADMIN)
        assert edited is not None
        assert holds(store) and holds(store, "Wombatgate")
        assert await store.forget(ORG, edited.id)
        assert not holds(store)
        assert not holds(store, "Wombatgate")
    finally:
        await store.aclose()


async def test_a_merged_duplicate_leaves_no_text_in_the_files(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await store.write(
            ORG, [*filler(20), candidate("the vault door code is in the safe"), candidate(SECRET_TEXT)]
        )
        assert await store.merge(ORG, rid(21), [rid(22)], ADMIN) == 1
        assert not holds(store)
        assert holds(store, "in the safe")
    finally:
        await store.aclose()


# -- the indexes ----------------------------------------------------------------------------------


async def test_a_pending_row_stays_out_of_the_lexical_and_stem_indexes_until_approved(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await store.write(ORG, [candidate("deploys go through make ship")])
        await store.write_pending(ORG, [candidate("the staging cluster lives in frankfurt")])
        path = store.database_path(ORG)
        documents = "SELECT df FROM term_df WHERE term = ''"
        assert rows(path, "SELECT rowid FROM records_fts") == [(1,)]
        assert rows(path, "SELECT rowid FROM records_stems") == [(1,)]
        assert rows(path, documents) == [(1,)]
        assert rows(path, "SELECT df FROM term_df WHERE term = 'frankfurt'") == []

        await store.approve(ORG, rid(2), ADMIN)
        assert rows(path, "SELECT rowid FROM records_fts ORDER BY rowid") == [(1,), (2,)]
        assert rows(path, "SELECT rowid FROM records_stems ORDER BY rowid") == [(1,), (2,)]
        assert rows(path, documents) == [(2,)]
        assert rows(path, "SELECT df FROM term_df WHERE term = 'frankfurt'") == [(1,)]
    finally:
        await store.aclose()


async def test_another_store_over_the_directory_follows_an_approval_and_an_edit(tmp_path: Path) -> None:
    reader, curator = SqliteMemoryStore(tmp_path), SqliteMemoryStore(tmp_path)
    try:
        await curator.write_pending(ORG, [candidate("the staging cluster lives in frankfurt")])
        assert await reader.retrieve(ORG, "staging cluster", 5) == []  # its scope index is built now
        await curator.approve(ORG, rid(1), ADMIN)
        assert [r.id for r in await reader.retrieve(ORG, "staging cluster", 5)] == [rid(1)]
        await curator.edit(ORG, rid(1), "the staging cluster lives in dublin", ADMIN)
        assert [r.id for r in await reader.retrieve(ORG, "staging cluster", 5)] == [rid(2)]
        assert await reader.retrieve(ORG, "frankfurt", 5) == []
    finally:
        await reader.aclose()
        await curator.aclose()


# -- events ---------------------------------------------------------------------------------------


def _events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


async def test_every_curation_action_logs_its_event_with_ids_and_counts_only(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path, clock=clock)
    try:
        with capture_logs() as logs:
            await store.write_pending(ORG, [candidate(SECRET_TEXT), candidate("deploy alpha quokkaflight")])
            await store.approve(ORG, rid(1), ADMIN)
            await store.reject(ORG, rid(2), ADMIN)
            await store.edit(ORG, rid(1), f"{SECRET_TEXT} again", ADMIN)
            await store.write(ORG, [candidate("deploy beta")])
            await store.merge(ORG, rid(3), [rid(4)], ADMIN)
            await store.write_pending(ORG, [candidate("deploy gamma")])
            clock.advance(15 * DAY)
            await store.expire_pending(clock() - 14 * DAY)
    finally:
        await store.aclose()
    assert [e["id"] for e in _events(logs, "memory.approve")] == [rid(1)]
    assert [e["id"] for e in _events(logs, "memory.reject")] == [rid(2)]
    assert [(e["id"], e["new_id"]) for e in _events(logs, "memory.edit")] == [(rid(1), rid(3))]
    assert [(e["survivor"], e["merged"]) for e in _events(logs, "memory.merge")] == [(rid(3), 1)]
    assert [e["expired"] for e in _events(logs, "memory.pending_expired")] == [1]
    assert SECRET.lower() not in repr(logs).lower()


# -- the migration --------------------------------------------------------------------------------

_TODAYS_CHECK = "CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted'))"


def _statuses_migrated(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return _events(logs, "memory.store.statuses_migrated")


def _narrow_the_check(path: Path) -> None:
    """The `records` definition as today's release wrote it: its CHECK without `pending`."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        (definition,) = connection.execute("SELECT sql FROM sqlite_master WHERE name = 'records'").fetchone()
        narrow = str(definition).replace(
            "CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted', 'pending'))", _TODAYS_CHECK
        )
        assert narrow != definition
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'records'", (narrow,))
        connection.commit()
    with contextlib.closing(sqlite3.connect(path)) as connection:  # a fresh connection reads the schema
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        try:
            connection.execute("UPDATE records SET status = 'pending' WHERE seq = 1")
        except sqlite3.IntegrityError:
            pass
        else:  # pragma: no cover - the fixture itself would be wrong
            raise AssertionError("the narrowed CHECK admits pending")


def _indexes(path: Path) -> list[tuple[Any, ...]]:
    return rows(
        path,
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' ORDER BY name",
    )


async def test_a_database_of_todays_schema_is_rebuilt_to_admit_pending_keeping_every_row(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path, clock=clock)
    try:
        await store.write(
            ORG, [candidate("deploys go through make ship"), candidate("staging is in frankfurt")]
        )
        await store.write(ORG, [replace(candidate("staging is in dublin"), supersedes=rid(2))])
        await store.forget(ORG, rid(1))
        await store.write(ORG, [candidate("rollbacks use make undo")])
    finally:
        await store.aclose()
    path = tmp_path / database_filename(ORG)
    before = rows(path, "SELECT * FROM records ORDER BY seq")
    indexes = _indexes(path)
    _narrow_the_check(path)

    with capture_logs() as logs:
        migrated = SqliteMemoryStore(tmp_path, clock=clock)
        try:
            assert rows(path, "SELECT * FROM records ORDER BY seq") == before
            assert [r.id for r in await migrated.retrieve(ORG, "staging", 5)] == [
                rid(3)
            ]  # FTS rowids still true
            assert (await migrated.write_pending(ORG, [candidate("deploys freeze on fridays")])).inserted == 1
            assert [r.id for r in await migrated.pending(ORG, 5)] == [rid(5)]
        finally:
            await migrated.aclose()
    assert [e["records"] for e in _statuses_migrated(logs)] == [4]
    assert _indexes(path) == indexes
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]
    (definition,) = rows(path, "SELECT sql FROM sqlite_master WHERE name = 'records'")[0]
    assert "'pending'" in definition and "erased_reason" in definition

    with capture_logs() as again:
        reopened = SqliteMemoryStore(tmp_path, clock=clock)
        try:
            assert [r.id for r in await reopened.pending(ORG, 5)] == [rid(5)]
        finally:
            await reopened.aclose()
    assert _statuses_migrated(again) == []  # once: a later open rebuilds nothing
