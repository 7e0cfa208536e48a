"""A scope's versions: the chain a record is in (walked by id and by `supersedes`), its history, the
forget that erases every version, an edit that makes a new one, and a merge of duplicates.

Which rows are one chain: memory/rules/curation.py decides; what an edit or a merge writes:
memory/stores/writing.py plans. This module reads the rows they ask for and applies the plan's
steps (writes.py), each action with its curation entries in one transaction.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Sequence
from typing import get_args

from memory.ranking.embedder import Embedder
from memory.rules.curation import FORGETTABLE, ChainWalk, history_of, merge_duplicates
from memory.stores.sqlite import curation_log
from memory.stores.sqlite.erasure import erase_rows, scrub_files
from memory.stores.sqlite.sql import (
    COLUMN_COUNT,
    COLUMNS,
    NO_CUTOFF,
    chunks,
    placeholders,
    row_record,
    transaction,
)
from memory.stores.sqlite.writes import apply_steps
from memory.stores.writing import plan_edit, plan_merge
from memory.types import (
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    RecordVersion,
)

_REASONS: dict[str, EraseReason] = {reason: reason for reason in get_args(EraseReason)}


def find(
    connection: sqlite3.Connection, record_id: str, *statuses: str, since: float | None = None
) -> MemoryRecord | None:
    """The not-erased row with this id in one of these statuses, created at `since` or later (None:
    whenever)."""
    row = connection.execute(
        f"SELECT {COLUMNS} FROM records WHERE id = ? AND erased_at IS NULL AND created_at >= ? "
        f"AND status IN ({placeholders(len(statuses))})",
        (record_id, NO_CUTOFF if since is None else since, *statuses),
    ).fetchone()
    return None if row is None else row_record(row)


def walk(
    connection: sqlite3.Connection, start: MemoryRecord
) -> tuple[ChainWalk, dict[str, EraseReason | None]]:
    """The start's chain gathered as the rules ask (by id and by superseded id), and why each row
    met on the way was erased (None: it was not)."""
    chain = ChainWalk(start)
    erased: dict[str, EraseReason | None] = {start.id: _erased_reason(connection, start.id)}
    while True:
        ids, successors = chain.wanted()
        if not ids and not successors:
            return chain, erased
        for column, values in (("id", ids), ("supersedes", successors)):
            for chunk in chunks(values):
                rows = connection.execute(
                    f"SELECT {COLUMNS}, erased_reason FROM records "
                    f"WHERE {column} IN ({placeholders(len(chunk))})",
                    chunk,
                ).fetchall()
                chain.add(row_record(row[:COLUMN_COUNT]) for row in rows)
                erased.update((str(row[0]), _REASONS.get(str(row[COLUMN_COUNT]))) for row in rows)


def history(
    connection: sqlite3.Connection, record_id: str, log_cutoff: float | None
) -> builtins.list[RecordVersion]:
    row = connection.execute(f"SELECT {COLUMNS} FROM records WHERE id = ?", (record_id,)).fetchone()
    if row is None:
        return []
    chain, erased = walk(connection, row_record(row))
    versions = chain.versions()
    entries = curation_log.of_records(connection, [v.id for v in versions], log_cutoff)
    return history_of(versions, {v.id: erased.get(v.id) for v in versions}, entries)


def forget(connection: sqlite3.Connection, record_id: str, now: float) -> bool:
    """Forgetting an active (or evicted) record erases every version of its chain: no older text stays
    behind."""
    with transaction(connection):
        record = find(connection, record_id, *FORGETTABLE)
        if record is None:
            return False
        chain, _ = walk(connection, record)
        ids = [v.id for v in chain.versions()]
        erase_rows(connection, f"id IN ({placeholders(len(ids))})", ids, "forgotten", now)
    scrub_files(connection)
    return True


def edit(
    connection: sqlite3.Connection,
    record_id: str,
    candidate: MemoryCandidate,
    embedder: Embedder | None,
    now: float,
    actor: str,
    log_cutoff: float | None,
    since: float | None,
) -> MemoryRecord | None:
    """The record's new version planned (`plan_edit`) and applied in one transaction; an expired one
    (created before `since`) is none to edit: its new version would live a whole new ttl."""
    vectors = None if embedder is None else embedder.embed([candidate.text])  # before the write lock
    with transaction(connection):
        old = find(connection, record_id, "active", "pending", since=since)
        if old is None:
            return None
        seq = int(connection.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0]) + 1
        change = plan_edit(old, seq, candidate, now, actor)
        apply_steps(connection, old.scope_key, now, log_cutoff, vectors, embedder, change.steps)
    if change.erased:
        scrub_files(connection)
    return change.record


def merge(
    connection: sqlite3.Connection,
    scope_key: str,
    survivor_id: str,
    duplicate_ids: Sequence[str],
    now: float,
    actor: str,
    log_cutoff: float | None,
) -> int:
    """The active duplicates merged into the active survivor as `plan_merge` plans it, in one
    transaction; how many."""
    wanted = [survivor_id, *duplicate_ids]
    with transaction(connection):
        rows = [
            row_record(row)
            for chunk in chunks(wanted)
            for row in connection.execute(
                f"SELECT {COLUMNS} FROM records WHERE status = 'active' AND erased_at IS NULL "
                f"AND id IN ({placeholders(len(chunk))})",
                chunk,
            ).fetchall()
        ]
        survivor, duplicates = merge_duplicates(scope_key, survivor_id, duplicate_ids, rows)
        if survivor is None or not duplicates:
            return 0
        chains = [walk(connection, d)[0] for d in duplicates]
        change = plan_merge(survivor, duplicates, chains, now, actor)
        apply_steps(connection, scope_key, now, log_cutoff, None, None, change.steps)
    scrub_files(connection)
    return change.merged


def _erased_reason(connection: sqlite3.Connection, record_id: str) -> EraseReason | None:
    row = connection.execute("SELECT erased_reason FROM records WHERE id = ?", (record_id,)).fetchone()
    return None if row is None or row[0] is None else _REASONS.get(str(row[0]))
