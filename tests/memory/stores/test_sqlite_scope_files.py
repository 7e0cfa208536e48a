"""The SQLite store's scopes are its files (memory/stores/sqlite/schema.py `scope_keys_in`): a file it
cannot read is reported — a `memory.store.unreadable_scope` warning naming it, and `unreadable_scopes`
for the lists a person reads — never passed over in silence. The tests may run as root, where a file
without read permission still reads: a file that is no database and a directory stand for it."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from commands.cli import CLI_READER
from commands.consolidate import run_consolidate
from commands.reindex import run_reindex
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.memory.records import fact

SCOPE = "org:acme"
CORRUPT = "org_damaged-0123456789abcdef0123456789abcdef.sqlite3"
NOT_A_FILE = "channel_slack_c0gone-0123456789abcdef0123456789abcdef.sqlite3"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    opened = SqliteMemoryStore(tmp_path)
    try:
        await opened.write(SCOPE, [fact("deploy on tuesdays")])
        yield opened
    finally:
        await opened.aclose()


def _unreadable(logs: Sequence[MutableMapping[str, Any]]) -> list[Any]:
    return [e["file"] for e in logs if e["event"] == "memory.store.unreadable_scope"]


async def test_a_file_that_is_no_database_is_reported_not_skipped(
    store: SqliteMemoryStore, tmp_path: Path
) -> None:
    (tmp_path / CORRUPT).write_bytes(b"this was a scope database once, before a disk went bad" * 100)
    with capture_logs() as logs:
        assert await store.scope_keys() == [SCOPE]
    assert _unreadable(logs) == [CORRUPT]
    assert [e["log_level"] for e in logs if e["event"] == "memory.store.unreadable_scope"] == ["warning"]
    assert await store.unreadable_scopes() == [CORRUPT]


async def test_a_directory_in_place_of_a_scope_file_is_reported(
    store: SqliteMemoryStore, tmp_path: Path
) -> None:
    (tmp_path / NOT_A_FILE).mkdir()
    with capture_logs() as logs:
        assert await store.scope_keys() == [SCOPE]
    assert _unreadable(logs) == [NOT_A_FILE]
    assert await store.unreadable_scopes() == [NOT_A_FILE]


async def test_the_ledger_and_a_file_still_being_made_are_not_unreadable(
    store: SqliteMemoryStore, tmp_path: Path
) -> None:
    assert await store.claim_event("an-event", 60.0)  # the ledger's own file, beside the scopes'
    (tmp_path / "org_new-0123456789abcdef0123456789abcdef.sqlite3").touch()  # no schema yet
    with capture_logs() as logs:
        assert await store.scope_keys() == [SCOPE]
    assert _unreadable(logs) == []
    assert await store.unreadable_scopes() == []


async def test_reindex_names_the_scope_files_it_could_not_read_and_fails(
    store: SqliteMemoryStore, tmp_path: Path
) -> None:
    (tmp_path / CORRUPT).write_bytes(b"not sqlite" * 100)
    out, err = io.StringIO(), io.StringIO()
    assert await run_reindex(store, out=out, err=err) == 1
    assert "reindexed 0 record(s)" in out.getvalue()
    assert f"skipped 1 scope file(s) the store cannot read: {CORRUPT}" in err.getvalue()


async def test_consolidate_all_names_the_scope_files_it_could_not_read_and_fails(
    store: SqliteMemoryStore, tmp_path: Path
) -> None:
    (tmp_path / NOT_A_FILE).mkdir()
    out, err = io.StringIO(), io.StringIO()
    assert await run_consolidate(store, ["--scope", "all"], reader=CLI_READER, out=out, err=err) == 1
    assert "nothing to merge in 1 scope" in out.getvalue()
    assert f"cannot read: {NOT_A_FILE}" in err.getvalue()
    one = io.StringIO()
    assert (
        await run_consolidate(store, ["--scope", SCOPE], reader=CLI_READER, out=io.StringIO(), err=one) == 0
    )
    assert one.getvalue() == ""  # one scope named: nothing else was walked
