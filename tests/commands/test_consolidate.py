"""`switchboard memory consolidate` (commands/consolidate.py): end to end on a real SQLite store, and
on the in-process store for what the terminal must refuse, hide or log."""

from __future__ import annotations

import asyncio
import io
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from commands.cli import CLI_READER
from commands.consolidate import CONSOLIDATE_USAGE, run_consolidate
from memory.stores.contract import CuratingStore, MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.stores.sqlite.schema import database_filename
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate, MemoryRecord, Origin, RecordVersion
from tests.commands.test_cli import run_switchboard
from tests.memory.rules.fold_corpus import RESTYLED_TRIPLE

SCOPE = "org:acme"


async def consolidate(store: MemoryStore, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run_consolidate(store, list(argv), reader=CLI_READER, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def legacy_restatements(data_dir: Path, scope: str, texts: Sequence[str]) -> None:
    """Rows as an older version left them: restatements stored as separate records under the old,
    stricter dedup key. The write path would fold them now, so each is written under a distinct text
    and then given its own text and old key in SQL; the next open re-keys them and every one stays."""

    async def write() -> None:
        store = SqliteMemoryStore(data_dir)
        try:
            for index, text in enumerate(texts):
                candidate = MemoryCandidate(
                    "fact", f"{text} {index}", "slack:C1:1700000000.000100", origin="public"
                )
                await store.write(scope, [candidate])
        finally:
            await store.aclose()

    asyncio.run(write())
    path = data_dir / database_filename(scope)
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        for seq, text in enumerate(texts, start=1):
            old_key = " ".join(text.strip().lower().split())
            connection.execute("UPDATE records SET text = ?, norm = ? WHERE seq = ?", (text, old_key, seq))
        connection.execute("DELETE FROM records_fts")  # the next open restores it from the rows
        connection.execute("DELETE FROM meta WHERE key = 'norm_key'")
    finally:
        connection.close()


async def test_consolidate_refuses_a_store_that_cannot_merge_in_one_line() -> None:
    assert not isinstance(NullMemoryStore(), CuratingStore)  # the premise: it keeps no curation history
    code, out, err = await consolidate(NullMemoryStore())
    assert (code, out) == (1, "")
    assert err.strip() == (
        "switchboard memory consolidate: the configured store cannot merge records "
        "(it keeps no curation history)"
    )


@pytest.mark.parametrize("argv", [["--scope"], ["--scope", "org acme"], ["--force"], ["org:acme"]])
async def test_a_malformed_command_is_a_usage_error_with_the_usage_line(argv: list[str]) -> None:
    code, out, err = await consolidate(NullMemoryStore(), *argv)
    assert code == 2 and out == ""
    assert CONSOLIDATE_USAGE in err


def test_consolidate_with_memory_off_is_a_one_line_refusal(tmp_path: Path) -> None:
    off = run_switchboard(["consolidate", "--apply"], tmp_path, SWITCHBOARD_DATA_DIR=str(tmp_path / "data"))
    assert off.returncode == 2 and off.stdout == ""
    assert off.stderr.strip() == "switchboard memory consolidate: memory is off (memory.enabled = false)"


async def edited_restatements(
    store: InProcessMemoryStore, scope: str, texts: Sequence[str], origin: Origin = "public"
) -> list[str]:
    """Restatements stored side by side: an edit is not a write and folds into nothing, so editing
    placeholders into restyled copies leaves one record per copy. Returns the active ids in order."""
    await store.write(scope, [MemoryCandidate("fact", texts[0], "slack:C1:1", origin=origin)])
    for index, text in enumerate(texts[1:]):
        await store.write(
            scope, [MemoryCandidate("fact", f"placeholder {index}", "slack:C1:1", origin=origin)]
        )
        placeholder = next(r for r in await store.active_records(scope) if r.text.startswith("placeholder"))
        await store.edit(scope, placeholder.id, text, actor="machine")
    return [r.id for r in await store.active_records(scope)]


async def test_apply_merges_each_cluster_into_its_survivor_as_the_machine() -> None:
    store = InProcessMemoryStore()
    ids = await edited_restatements(store, SCOPE, RESTYLED_TRIPLE)
    await edited_restatements(
        store, "repo:acme/api", ["Releases go through make ship", "releases go through make ship!"]
    )
    code, out, _ = await consolidate(store, "--scope", SCOPE, "--apply")
    assert code == 0, out
    assert [r.id for r in await store.active_records(SCOPE)] == ids[:1]
    assert len(await store.active_records("repo:acme/api")) == 2  # only the scope asked for
    entries = await store.curation_log(SCOPE, ids[0], 10)
    assert sorted((e.record_id, e.action, e.actor) for e in entries if e.action == "merged") == [
        (ids[1], "merged", "machine"),
        (ids[2], "merged", "machine"),
    ]


async def test_all_scopes_needs_a_store_that_lists_them() -> None:
    code, out, err = await consolidate(InProcessMemoryStore())
    assert (code, out) == (1, "")
    assert "name one with --scope <scope key>" in err


ENV = {"SWITCHBOARD_MEMORY__ENABLED": "true", "SWITCHBOARD_ORGANIZATION": "acme"}


def test_a_dry_run_prints_each_cluster_and_changes_nothing(tmp_path: Path) -> None:
    legacy_restatements(tmp_path / "data" / "memory", SCOPE, RESTYLED_TRIPLE)
    dry = run_switchboard(["consolidate"], tmp_path, SWITCHBOARD_DATA_DIR=str(tmp_path / "data"), **ENV)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        'org:acme: keep mem:org:acme:1 (used 0) "Deploys go through make ship"',
        '  merge mem:org:acme:2 (used 0) "**Deploys** go through `make ship`!"',
        '  merge mem:org:acme:3 (used 0) "deploys go through make ship."',
        "would merge 2 record(s) into their survivors: 1 cluster in 1 scope (--apply merges them)",
    ]
    assert len(asyncio.run(active(tmp_path, SCOPE))) == 3


def test_apply_leaves_one_active_record_and_the_history_shows_the_merge(tmp_path: Path) -> None:
    legacy_restatements(tmp_path / "data" / "memory", SCOPE, RESTYLED_TRIPLE)
    env = {"SWITCHBOARD_DATA_DIR": str(tmp_path / "data"), **ENV}
    applied = run_switchboard(["consolidate", "--scope", SCOPE, "--apply"], tmp_path, **env)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines()[-1] == "merged 2 record(s) into their survivors: 1 cluster in 1 scope"
    assert [r.id for r in asyncio.run(active(tmp_path, SCOPE))] == ["mem:org:acme:1"]
    [merged] = asyncio.run(history_of(tmp_path, SCOPE, "mem:org:acme:2"))
    assert (merged.status, merged.text, merged.erased_reason) == ("forgotten", None, "merged")
    assert [(e.action, e.actor, e.related_id) for e in merged.entries] == [
        ("merged", "machine", "mem:org:acme:1")
    ]
    again = run_switchboard(["consolidate", "--apply"], tmp_path, **env)
    assert again.stdout.strip() == "nothing to merge in 1 scope"


async def test_text_the_terminal_may_not_see_is_not_printed() -> None:
    store = InProcessMemoryStore()
    ids = await edited_restatements(store, "user:slack:U1", RESTYLED_TRIPLE[:2], origin="dm")
    code, out, _ = await consolidate(store, "--scope", "user:slack:U1")
    assert code == 0 and "make ship" not in out
    assert f"keep {ids[0]} (used 0) (text not shown here" in out


async def active(tmp_path: Path, scope: str) -> list[MemoryRecord]:
    store = SqliteMemoryStore(tmp_path / "data" / "memory")
    try:
        return await store.active_records(scope)
    finally:
        await store.aclose()


async def history_of(tmp_path: Path, scope: str, record_id: str) -> list[RecordVersion]:
    store = SqliteMemoryStore(tmp_path / "data" / "memory")
    try:
        return await store.history(scope, record_id)
    finally:
        await store.aclose()


async def test_a_run_logs_one_event_with_counts_and_no_text() -> None:
    store = InProcessMemoryStore()
    await edited_restatements(store, SCOPE, RESTYLED_TRIPLE)
    with capture_logs() as logs:
        await consolidate(store, "--scope", SCOPE)
    [event] = [entry for entry in logs if entry["event"] == "memory.consolidate"]
    assert {k: event[k] for k in ("scopes", "clusters", "duplicates", "merged", "applied")} == {
        "scopes": 1,
        "clusters": 1,
        "duplicates": 2,
        "merged": 0,
        "applied": False,
    }
    assert "make ship" not in repr(logs)


async def test_a_store_failure_is_one_warning_line(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory")
    await store.aclose()  # every call now fails as a store failure
    code, out, err = await consolidate(store, "--scope", SCOPE, "--apply")
    assert (code, out) == (1, "")
    assert err.strip() == (
        "⚠️ switchboard memory consolidate: the memory store failed: the sqlite memory store is closed"
    )
