"""A scope's review queue: pending writes, approval, rejection and expiry, each with its curation
entries in one transaction. A pending row stays out of the FTS and stem indexes, the scope index and
the vectors until it is approved; a rejected or expired one is erased like a forgotten one.

What folds, what expires over the cap and what an approval writes: memory/rules (curation, engine)
decide; an approval is planned (memory/stores/writing.py) exactly as a write is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from memory.ranking.embedder import Embedder
from memory.rules.curation import entry
from memory.stores.sqlite import curation_log
from memory.stores.sqlite.erasure import erase_rows, scrub_files
from memory.stores.sqlite.sql import COLUMNS, chunks, placeholders, row_record, transaction
from memory.stores.sqlite.versions import find, walk
from memory.stores.sqlite.writes import apply_steps, write_batch, write_pool
from memory.stores.writing import Approval, approval_pool_candidate, plan_approval
from memory.types import EraseReason, MemoryCandidate, WriteResult


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
    return write_batch(
        connection, scope_key, batch, cap, None, clock, expired_before, log_cutoff, pending=True
    )


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
    """The pending record planned as its write would be (memory/stores/writing.py) and applied in one
    transaction: made active, superseding what it corrects, the scope evicted over the cap; or folded
    into an active record of the same meaning (and erased, reason `merged`). None when it is not
    pending."""
    waiting = find(connection, record_id, "pending")
    if waiting is None:
        return None
    vectors = None if embedder is None else embedder.embed([waiting.text])  # before the write lock
    with transaction(connection):
        record = find(connection, record_id, "pending")
        if record is None:
            return None
        now = clock()
        chain, _ = walk(connection, record)
        pool = write_pool(connection, approval_pool_candidate(record, chain))
        change = plan_approval(record, chain, pool, now, actor, cap)
        evicted = apply_steps(connection, scope_key, now, log_cutoff, vectors, embedder, change.steps)
    if change.folded:
        scrub_files(connection)
    return Approval(change.record, folded=change.folded, superseded=change.superseded, evicted=evicted)


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
