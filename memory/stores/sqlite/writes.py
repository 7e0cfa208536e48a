"""A scope's writes: a batch (a reflection's, a pending one), an approval, an edit or a merge in one
transaction, planned by memory/stores/writing.py and applied here step by step, and the vectors
stored beside its records (on write, on use, by `reindex`). This module only persists what the plan
decides.
"""

from __future__ import annotations

import builtins
import functools
import json
import sqlite3
from collections.abc import Callable, Sequence

from memory.ranking.embedder import Embedder, Matrix
from memory.rules.restate import meaning_key
from memory.stores import writing
from memory.stores.sql_common import stored_values
from memory.stores.sqlite import curation_log
from memory.stores.sqlite.erasure import erase_rows
from memory.stores.sqlite.reads import status_records
from memory.stores.sqlite.sql import (
    COLUMNS,
    DOCUMENTS,
    chunks,
    count_terms,
    delete_fts,
    fts_keywords,
    fts_text,
    placeholders,
    row_record,
    stamp,
    stems_text,
    store_vector,
    transaction,
)
from memory.types import MemoryCandidate, MemoryRecord, WriteResult


def write_batch(
    connection: sqlite3.Connection,
    scope_key: str,
    batch: Sequence[MemoryCandidate],
    cap: int,
    embedder: Embedder | None,
    clock: Callable[[], float],
    expired_before: float | None = None,
    log_cutoff: float | None = None,
    *,
    pending: bool = False,
) -> tuple[WriteResult, int]:
    """The batch planned (memory/stores/writing.py) and applied in one transaction, after the scope's
    expired records are erased; returns what it did and how many rows it erased in all (the
    retention's, and with `pending` the waiting ones expired over the cap)."""
    # Before the transaction: the write lock is not held for it (a pending row gets its vector when
    # it is approved).
    vectors = None if embedder is None or pending else embedder.embed([c.text for c in batch])
    with transaction(connection):
        now = clock()
        expired = 0
        if expired_before is not None:  # the scope is being written: its expired records go now
            expired = erase_rows(connection, "created_at < ?", (expired_before,), "expired", now)
        seq = int(connection.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0])
        plan = writing.BatchPlan(scope_key, seq, now, pending=pending)
        apply = functools.partial(apply_steps, connection, scope_key, now, log_cutoff, vectors, embedder)
        for index, candidate in enumerate(batch):
            apply(plan.add(index, candidate, write_pool(connection, candidate, pending=pending)))
        waiting = status_records(connection, "pending", None, newest_first=False) if pending else []
        last = plan.finish(cap, waiting)
        evicted = apply(last)
    erased = sum(len(step.record_ids) for step in last if isinstance(step, writing.Erase))
    return plan.result(evicted), expired + erased


def write_pool(
    connection: sqlite3.Connection, candidate: MemoryCandidate, *, pending: bool = False
) -> builtins.list[MemoryRecord]:
    """Exactly what a candidate's plan reads (with `pending`, a pending batch's): same-norm actives
    (and pendings) in seq order (an indexed hit on records_status_norm) and, when the candidate names
    one, the active row it supersedes."""
    statuses = "'active', 'pending'" if pending else "'active'"
    rows = connection.execute(
        f"SELECT {COLUMNS} FROM records WHERE status IN ({statuses}) AND norm = ? ORDER BY seq",
        (meaning_key(candidate.text),),
    ).fetchall()
    pool = [row_record(row) for row in rows]
    if candidate.supersedes:  # the same truthiness test as the plan's: "" names nothing
        target = connection.execute(
            f"SELECT {COLUMNS} FROM records WHERE id = ? AND status = 'active'", (candidate.supersedes,)
        ).fetchone()
        if target is not None:
            pool.append(row_record(target))
    return pool


def apply_steps(
    connection: sqlite3.Connection,
    scope_key: str,
    now: float,
    log_cutoff: float | None,
    vectors: Matrix | None,
    embedder: Embedder | None,
    steps: Sequence[writing.Step],
) -> int:
    """Inside the plan's transaction: its steps in their order; returns how many were evicted."""
    evicted = 0
    for step in steps:
        if isinstance(step, writing.Fold):
            fold(connection, step.target, step.folded)
        elif isinstance(step, writing.Supersede):
            supersede(connection, step.record_id)
        elif isinstance(step, writing.Withdraw):
            supersede(connection, step.record_id, pending=True)
        elif isinstance(step, writing.Insert):
            insert_record(connection, step.seq, step.record)
            if vectors is not None and embedder is not None and step.vector is not None:
                store_vector(connection, step.seq, vectors[step.vector], embedder.name)
        elif isinstance(step, writing.Activate):
            seq = activate(connection, step.record)
            if vectors is not None and embedder is not None and step.vector is not None:
                store_vector(connection, seq, vectors[step.vector], embedder.name)
        elif isinstance(step, writing.Erase):
            for chunk in chunks(step.record_ids):
                erase_rows(connection, f"id IN ({placeholders(len(chunk))})", chunk, step.reason, now)
        elif isinstance(step, writing.Absorb):
            absorb(connection, step.merged)
        elif isinstance(step, writing.Evict):
            evicted = evict_over_cap(connection, scope_key, step.cap)
        else:
            curation_log.append(connection, step.entries, log_cutoff)
    return evicted


def store_vectors(connection: sqlite3.Connection, fresh: Sequence[tuple[int, Matrix]], model: str) -> None:
    """Vectors made on use, in one transaction (each only into a row still active and not erased)."""
    with transaction(connection):
        for seq, vector in fresh:
            store_vector(connection, seq, vector, model)


def reindex_batch(connection: sqlite3.Connection, embedder: Embedder, batch: int) -> tuple[int, int]:
    """Vectors for up to `batch` active records that have none of this embedder's, in one transaction;
    returns how many were made and how many are still missing."""
    missing = "status = 'active' AND (embedding IS NULL OR embedding_model IS NOT ?)"
    rows = connection.execute(
        f"SELECT seq, text FROM records WHERE {missing} ORDER BY seq LIMIT ?", (embedder.name, batch)
    ).fetchall()
    if rows:
        vectors = embedder.embed([str(text) for _, text in rows])
        store_vectors(
            connection, [(int(seq), v) for (seq, _), v in zip(rows, vectors, strict=True)], embedder.name
        )
    left = connection.execute(f"SELECT COUNT(*) FROM records WHERE {missing}", (embedder.name,)).fetchone()
    return len(rows), int(left[0])


def foreign_vectors(connection: sqlite3.Connection, model: str) -> int:
    """Active records of this scope whose vector another model made."""
    row = connection.execute(
        "SELECT COUNT(*) FROM records WHERE status = 'active' AND embedding_model IS NOT ?"
        " AND embedding IS NOT NULL",
        (model,),
    ).fetchone()
    return int(row[0])


def supersede(connection: sqlite3.Connection, record_id: str, *, pending: bool = False) -> int:
    """A record retired by its new version: an active one out of the indexes; a pending one (an
    edit's) never entered them, so it is only stamped; how many (0 or 1)."""
    flipped = connection.execute(
        "UPDATE records SET status = 'superseded' WHERE id = ? AND status = ? RETURNING seq",
        (record_id, "pending" if pending else "active"),
    ).fetchall()
    seqs = [int(row[0]) for row in flipped]
    (stamp if pending else delete_fts)(connection, seqs)
    return len(seqs)


def absorb(connection: sqlite3.Connection, merged: MemoryRecord) -> None:
    """A merge's survivor with its duplicates' uses (`merged_survivor`), stamped."""
    kept = connection.execute(
        "UPDATE records SET use_count = ?, last_used_at = ?, observed_at = ? WHERE id = ? RETURNING seq",
        (merged.use_count, merged.last_used_at, merged.observed_at, merged.id),
    ).fetchall()
    stamp(connection, [int(row[0]) for row in kept])


def fold(connection: sqlite3.Connection, record: MemoryRecord, folded: MemoryRecord) -> None:
    """The restated record confirmed as the engine says (`fold_into`). The count is incremented in
    place, not set, so a usage bump buffered for the same row still adds to it; a moved date is a
    change the scope index must see (`stamp`), a moved count is not."""
    rows = connection.execute(  # the later use wins, as a usage bump's does
        "UPDATE records SET use_count = use_count + 1, last_used_at = MAX(COALESCE(last_used_at, ?1), ?1),"
        " observed_at = ?2 WHERE id = ?3 RETURNING seq",
        (folded.last_used_at, folded.observed_at, record.id),
    ).fetchall()
    if folded.observed_at != record.observed_at:
        stamp(connection, [int(row[0]) for row in rows])


def activate(connection: sqlite3.Connection, record: MemoryRecord) -> int:
    """A pending row made active as the approval says, into the indexes; its seq."""
    (seq,) = connection.execute(
        "UPDATE records SET status = 'active', supersedes = ?, last_used_at = ? WHERE id = ? RETURNING seq",
        (record.supersedes, record.last_used_at, record.id),
    ).fetchone()
    index_record(connection, int(seq), record)
    return int(seq)


def insert_record(connection: sqlite3.Connection, seq: int, record: MemoryRecord) -> None:
    """A new row; an active one enters the indexes (a pending one waits outside them)."""
    connection.execute(
        "INSERT INTO records (seq, id, scope_key, kind, text, norm, keywords, source_thread_key, "
        "source_run_id, created_at, last_used_at, use_count, confidence, supersedes, status, origin, "
        "origin_conversation, observed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            seq,
            record.id,
            record.scope_key,
            record.kind,
            record.text,
            meaning_key(record.text),
            json.dumps(builtins.list(record.keywords)),
            *stored_values(record),
            record.origin,
            record.origin_conversation,
            record.observed_at,
        ),
    )
    if record.status == "active":
        index_record(connection, seq, record)
    else:
        stamp(connection, [seq])


def index_record(connection: sqlite3.Connection, seq: int, record: MemoryRecord) -> None:
    """An active row into the FTS and stem indexes and their counts, stamped for the scope index."""
    connection.execute(
        "INSERT INTO records_fts (rowid, text, keywords) VALUES (?, ?, ?)",
        (seq, fts_text(record.text), fts_keywords(record.keywords)),
    )
    stamp(connection, [seq])
    stems = stems_text(record.text, record.keywords)
    connection.execute("INSERT INTO records_stems (rowid, stems) VALUES (?, ?)", (seq, stems))
    count_terms(connection, set(stems.split()), 1)


def evict_over_cap(connection: sqlite3.Connection, scope_key: str, cap: int) -> int:
    """Inside the batch's transaction: the scope's active records past the cap evicted in
    `plan_eviction`'s order, read off the eviction index (`EVICTION_ORDER`); how many. (`scope_key`:
    the database is the scope's own, so no statement names it.) The active count is term_df's
    `DOCUMENTS` row, kept in the transaction of every change to the active set and reconciled on
    open: counting the active rows would read a whole index of the scope at every write."""
    counted = connection.execute("SELECT df FROM term_df WHERE term = ?", (DOCUMENTS,)).fetchone()
    count = 0 if counted is None else int(counted[0])
    if count <= cap:
        return 0
    doomed = [int(row[0]) for row in connection.execute(EVICTION_ORDER, (count - cap,)).fetchall()]
    for chunk in chunks(doomed):
        connection.execute(
            f"UPDATE records SET status = 'evicted' WHERE seq IN ({placeholders(len(chunk))})", chunk
        )
    delete_fts(connection, doomed)
    return len(doomed)


# The first `?` active rows in the eviction order (`memory.rules.engine.eviction_key`: least recently
# used, else the older creation; full ties by seq, as `plan_eviction` breaks them over seq-ordered
# records). INDEXED BY makes a plan that would scan the active set an error rather than a slow write.
EVICTION_ORDER = (
    "SELECT seq FROM records INDEXED BY records_eviction WHERE status = 'active'"
    " ORDER BY COALESCE(last_used_at, created_at), created_at, seq LIMIT ?"
)
