"""A scope's writes: a batch in one transaction (dedup, supersede, insert, evict over the cap), and the
vectors stored beside its records (on write, on use, by `reindex`).

Every decision comes from `memory.rules.engine`; this module only persists it.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Callable, Sequence

from memory.ranking.embedder import Embedder, Matrix
from memory.rules.curation import entry, run_actor
from memory.rules.engine import (
    fold_into,
    mint_record,
    plan_write,
)
from memory.rules.engine import record_id as make_record_id
from memory.rules.restate import meaning_key
from memory.stores.sql_common import stored_values
from memory.stores.sqlite import curation_log
from memory.stores.sqlite.erasure import erase_rows
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
from memory.types import (
    CurationEntry,
    MemoryCandidate,
    MemoryRecord,
    WriteResult,
)


def write_batch(
    connection: sqlite3.Connection,
    scope_key: str,
    batch: Sequence[MemoryCandidate],
    cap: int,
    embedder: Embedder | None,
    clock: Callable[[], float],
    expired_before: float | None = None,
    log_cutoff: float | None = None,
) -> tuple[WriteResult, int]:
    """The batch in one transaction, its folds and corrections in the curation log (entries older
    than `log_cutoff` dropped); returns what it did and how many expired records it erased."""
    inserted = deduped = superseded = expired = 0
    entries: builtins.list[CurationEntry] = []
    # Before the transaction: the write lock is not held for it.
    vectors = None if embedder is None else embedder.embed([c.text for c in batch])
    with transaction(connection):
        now = clock()
        if expired_before is not None:  # the scope is being written: its expired records go now
            expired = erase_rows(connection, "created_at < ?", (expired_before,), "expired", now)
        seq = int(connection.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0])
        for index, candidate in enumerate(batch):
            pool = write_pool(connection, candidate)
            plan = plan_write(scope_key, candidate, pool)
            actor = run_actor(candidate.source_run_id)
            if plan.action == "dedup":
                target = next(r for r in pool if r.id == plan.dedup_id)
                fold(connection, target, candidate, now)
                entries.append(entry(target, "folded", actor, now))
                deduped += 1
                continue
            seq += 1
            if plan.supersede_id is not None:
                superseded += supersede(connection, plan.supersede_id)
                entries.append(
                    CurationEntry(
                        plan.supersede_id, scope_key, "superseded", actor, now, make_record_id(scope_key, seq)
                    )
                )
            insert_record(connection, seq, mint_record(scope_key, seq, candidate, now, plan.supersede_id))
            if vectors is not None and embedder is not None:
                store_vector(connection, seq, vectors[index], embedder.name)
            inserted += 1
        evicted = evict_over_cap(connection, scope_key, cap)
        curation_log.append(connection, entries, log_cutoff)
    result = WriteResult(inserted=inserted, deduped=deduped, superseded=superseded, evicted=evicted)
    return result, expired


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


def write_pool(
    connection: sqlite3.Connection, candidate: MemoryCandidate, *, pending: bool = False
) -> builtins.list[MemoryRecord]:
    """Exactly what plan_write reads (with `pending`, plan_pending): same-norm actives (and pendings)
    in seq order (an indexed hit on records_status_norm) and, when the candidate names one, the active
    row it supersedes."""
    statuses = "'active', 'pending'" if pending else "'active'"
    rows = connection.execute(
        f"SELECT {COLUMNS} FROM records WHERE status IN ({statuses}) AND norm = ? ORDER BY seq",
        (meaning_key(candidate.text),),
    ).fetchall()
    pool = [row_record(row) for row in rows]
    if candidate.supersedes:  # the same truthiness test as plan_write: "" names nothing
        target = connection.execute(
            f"SELECT {COLUMNS} FROM records WHERE id = ? AND status = 'active'", (candidate.supersedes,)
        ).fetchone()
        if target is not None:
            pool.append(row_record(target))
    return pool


def supersede(connection: sqlite3.Connection, record_id: str) -> int:
    """An active record retired by its correction: out of the indexes; how many (0 or 1)."""
    flipped = connection.execute(
        "UPDATE records SET status = 'superseded' WHERE id = ? AND status = 'active' RETURNING seq",
        (record_id,),
    ).fetchall()
    delete_fts(connection, [int(row[0]) for row in flipped])
    return len(flipped)


def fold(
    connection: sqlite3.Connection, record: MemoryRecord, candidate: MemoryCandidate, now: float
) -> None:
    """The restated record confirmed as the engine says (`fold_into`). The count is incremented in
    place, not set, so a usage bump buffered for the same row still adds to it; a moved date is a
    change the scope index must see (`stamp`), a moved count is not."""
    folded = fold_into(record, candidate, now)
    rows = connection.execute(  # the later use wins, as a usage bump's does
        "UPDATE records SET use_count = use_count + 1, last_used_at = MAX(COALESCE(last_used_at, ?1), ?1),"
        " observed_at = ?2 WHERE id = ?3 RETURNING seq",
        (folded.last_used_at, folded.observed_at, record.id),
    ).fetchall()
    if folded.observed_at != record.observed_at:
        stamp(connection, [int(row[0]) for row in rows])


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
