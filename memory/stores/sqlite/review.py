"""A scope's review queue: pending writes, approval, rejection and expiry, each with its curation
entries in one transaction. A pending row stays out of the FTS and stem indexes, the scope index and
the vectors until it is approved; a rejected or expired one is erased like a forgotten one.

What folds, what expires over the cap and what an approval writes: memory/rules (curation, engine)
decide; an approval is planned by `plan_write` exactly as a write is.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory.ranking.embedder import Embedder
from memory.rules.curation import (
    SYSTEM_ACTOR,
    approval_candidate,
    approved_record,
    entry,
    pending_record,
    pending_to_expire,
    plan_pending,
    run_actor,
)
from memory.rules.engine import WritePlan, fold_into, plan_write
from memory.stores.sqlite import curation_log
from memory.stores.sqlite.erasure import erase_rows, scrub_files
from memory.stores.sqlite.reads import status_records
from memory.stores.sqlite.sql import COLUMNS, chunks, placeholders, row_record, store_vector, transaction
from memory.stores.sqlite.versions import find, walk
from memory.stores.sqlite.writes import (
    evict_over_cap,
    fold,
    index_record,
    insert_record,
    supersede,
    write_pool,
)
from memory.types import CurationEntry, EraseReason, MemoryCandidate, MemoryRecord, WriteResult


@dataclass(frozen=True, slots=True)
class Approval:
    """What an approval did: the active record it left (the pending one, or the one it folded into)."""

    record: MemoryRecord
    folded: bool
    superseded: str | None
    evicted: int


def write_pending(
    connection: sqlite3.Connection,
    scope_key: str,
    batch: Sequence[MemoryCandidate],
    cap: int,
    clock: Callable[[], float],
    expired_before: float | None,
    log_cutoff: float | None,
) -> tuple[WriteResult, int]:
    """The batch in one transaction: folds into live restatements, pending inserts, then the oldest
    pending over the cap expired. Returns the result (`evicted`: pending records expired over the
    cap) and how many rows were erased in all (the retention's and the cap's)."""
    inserted = deduped = expired = 0
    entries: builtins.list[CurationEntry] = []
    with transaction(connection):
        now = clock()
        if expired_before is not None:
            expired = erase_rows(connection, "created_at < ?", (expired_before,), "expired", now)
        seq = int(connection.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0])
        for candidate in batch:
            pool = write_pool(connection, candidate, pending=True)
            plan = plan_pending(scope_key, candidate, pool)
            if plan.action == "dedup":
                target = next(r for r in pool if r.id == plan.dedup_id)
                fold(connection, target, candidate, now)
                entries.append(entry(target, "folded", run_actor(candidate.source_run_id), now))
                deduped += 1
                continue
            seq += 1
            insert_record(connection, seq, pending_record(scope_key, seq, candidate, now, plan))
            inserted += 1
        waiting = status_records(connection, "pending", None, newest_first=False)
        doomed = set(pending_to_expire(waiting, cap))
        over = [r for r in waiting if r.id in doomed]
        entries.extend(entry(r, "expired", SYSTEM_ACTOR, now) for r in over)
        expired += _erase(connection, [r.id for r in over], "expired", now)
        curation_log.append(connection, entries, log_cutoff)
    return WriteResult(inserted=inserted, deduped=deduped, evicted=len(over)), expired


def approve(
    connection: sqlite3.Connection,
    scope_key: str,
    record_id: str,
    actor: str,
    cap: int,
    embedder: Embedder | None,
    clock: Callable[[], float],
    log_cutoff: float | None,
) -> Approval | None:
    """The pending record made active in one transaction, then the supersede it asked for and the
    eviction over the cap, as a write does; or folded into an active record of the same meaning
    (and erased, reason `merged`). None when it is not pending."""
    waiting = find(connection, record_id, "pending")
    if waiting is None:
        return None
    vector = None if embedder is None else embedder.embed([waiting.text])[0]  # before the write lock
    with transaction(connection):
        record = find(connection, record_id, "pending")
        if record is None:
            return None
        now = clock()
        chain, _ = walk(connection, record)
        candidate = approval_candidate(record, chain.target())
        pool = write_pool(connection, candidate)
        plan = plan_write(scope_key, candidate, pool)
        if plan.action == "dedup":
            target = next(r for r in pool if r.id == plan.dedup_id)
            fold(connection, target, candidate, now)
            _erase(connection, [record.id], "merged", now)
            entries = [
                entry(record, "approved", actor, now, target.id),
                entry(target, "folded", actor, now, record.id),
            ]
            approval = Approval(fold_into(target, candidate, now), folded=True, superseded=None, evicted=0)
        else:
            approval = _activate(connection, scope_key, record, plan, chain.versions(), now, cap)
            if vector is not None and embedder is not None:
                store_vector(connection, _seq(connection, record.id), vector, embedder.name)
            entries = [entry(record, "approved", actor, now)]
            if plan.supersede_id is not None:
                by = run_actor(record.source_run_id)
                entries.insert(
                    0, CurationEntry(plan.supersede_id, scope_key, "superseded", by, now, record.id)
                )
        curation_log.append(connection, entries, log_cutoff)
    if approval.folded:
        scrub_files(connection)
    return approval


def _activate(
    connection: sqlite3.Connection,
    scope_key: str,
    record: MemoryRecord,
    plan: WritePlan,
    versions: Sequence[MemoryRecord],
    now: float,
    cap: int,
) -> Approval:
    """Inside the approval's transaction: the target superseded, the row active and indexed, then
    the eviction over the cap."""
    approved = approved_record(record, plan, versions, now)
    if plan.supersede_id is not None:
        supersede(connection, plan.supersede_id)
    connection.execute(
        "UPDATE records SET status = 'active', supersedes = ?, last_used_at = ? WHERE id = ?",
        (approved.supersedes, approved.last_used_at, record.id),
    )
    index_record(connection, _seq(connection, record.id), approved)
    evicted = evict_over_cap(connection, scope_key, cap)
    return Approval(approved, folded=False, superseded=plan.supersede_id, evicted=evicted)


def reject(
    connection: sqlite3.Connection, record_id: str, actor: str, now: float, log_cutoff: float | None
) -> bool:
    """The pending record erased (reason `rejected`) with its entry; False when it is not pending."""
    with transaction(connection):
        record = find(connection, record_id, "pending")
        if record is None:
            return False
        _erase(connection, [record.id], "rejected", now)
        curation_log.append(connection, [entry(record, "rejected", actor, now)], log_cutoff)
    scrub_files(connection)
    return True


def expire(
    connection: sqlite3.Connection, older_than: float, actor: str, now: float, log_cutoff: float | None
) -> int:
    """Every pending record created before `older_than` erased (reason `expired`); how many."""
    with transaction(connection):
        rows = connection.execute(
            f"SELECT {COLUMNS} FROM records "
            "WHERE status = 'pending' AND erased_at IS NULL AND created_at < ?",
            (older_than,),
        ).fetchall()
        doomed = [row_record(row) for row in rows]
        erased = _erase(connection, [r.id for r in doomed], "expired", now)
        curation_log.append(connection, [entry(r, "expired", actor, now) for r in doomed], log_cutoff)
    if erased:
        scrub_files(connection)
    return erased


def _erase(connection: sqlite3.Connection, ids: Sequence[str], reason: EraseReason, now: float) -> int:
    return sum(
        erase_rows(connection, f"id IN ({placeholders(len(chunk))})", chunk, reason, now)
        for chunk in chunks(ids)
    )


def _seq(connection: sqlite3.Connection, record_id: str) -> int:
    return int(connection.execute("SELECT seq FROM records WHERE id = ?", (record_id,)).fetchone()[0])
