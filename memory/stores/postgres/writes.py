"""A scope's write: one transaction per batch (a reflection's, a pending one), approval, edit or merge
under the scope's advisory lock, planned by memory/stores/writing.py and applied here step by step (or
nothing). This module only persists what the plan decides."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder, Matrix
from memory.ranking.lexical import record_stems
from memory.ranking.vectors import to_blob
from memory.rules.restate import meaning_key
from memory.rules.retention import Retention
from memory.rules.scorer import record_tokens
from memory.stores import writing
from memory.stores.postgres.curation_log import append_entries
from memory.stores.postgres.erasure import ScrubList, erase_rows
from memory.stores.postgres.rows import MAX_LEXEME, Connection, fetch_rows, one, own_seq
from memory.stores.postgres.sql import (
    _ACTIVATE,
    _ADD_MERGED_USAGE_ROW,
    _ADD_TERMS,
    _BUMP_DEDUP,
    _BUMP_DEDUP_USAGE,
    _COUNT_ACTIVE,
    _COUNT_UNVECTORED,
    _EVICT_LEAST_USED,
    _INSERT,
    _LOCK_SCOPE,
    _MAX_SEQ_OF_SCOPE,
    _SELECT_ALL_PENDING,
    _SELECT_ONE_ACTIVE,
    _SELECT_SAME_NORM,
    _SELECT_SAME_NORM_LIVE,
    _SEQS,
    _SET_MERGED_USAGE,
    _SET_VECTOR,
    _SUPERSEDE,
    _UNVECTORED,
    _WITHDRAW,
)
from memory.stores.postgres.terms import uncount
from memory.stores.sql_common import stored_values
from memory.types import MemoryCandidate, MemoryRecord, WriteResult


async def write_pool(
    conn: Connection, scope_key: str, candidate: MemoryCandidate, *, pending: bool = False
) -> builtins.list[MemoryRecord]:
    """Exactly the rows the candidate's plan reads (memory/stores/writing.py). A write: the
    supersede target, else the same-norm actives. A pending write: the live rows with the
    candidate's meaning key and the active row it names to supersede."""
    norm = meaning_key(candidate.text)
    seq = None if not candidate.supersedes else own_seq(scope_key, candidate.supersedes)
    if not pending:
        if candidate.supersedes:
            if seq is None:
                return []
            rows = await fetch_rows(conn, _SELECT_ONE_ACTIVE, (scope_key, seq, candidate.supersedes))
        else:
            rows = await fetch_rows(conn, _SELECT_SAME_NORM, (scope_key, norm, norm))
        return [record for _, record in rows]
    rows = await fetch_rows(conn, _SELECT_SAME_NORM_LIVE, (scope_key, norm, norm))
    if seq is not None and all(record.id != candidate.supersedes for _, record in rows):
        rows += await fetch_rows(conn, _SELECT_ONE_ACTIVE, (scope_key, seq, candidate.supersedes))
    return [record for _, record in rows]


async def _fold(conn: Connection, record: MemoryRecord, folded: MemoryRecord) -> None:
    """The restated record confirmed as the engine says (`fold_into`): the count incremented in
    place, the last use and the date set."""
    seq = _seq(record.scope_key, record.id)
    await conn.execute(_BUMP_DEDUP, (folded.last_used_at, folded.observed_at, record.scope_key, seq))
    await conn.execute(_BUMP_DEDUP_USAGE, (folded.last_used_at, record.scope_key, seq))


async def _absorb(conn: Connection, survivor: MemoryRecord, merged: MemoryRecord) -> None:
    """A merge's survivor with its duplicates' uses: its columns set, its usage row added to."""
    seq = _seq(survivor.scope_key, survivor.id)
    usage = (merged.use_count, merged.last_used_at, merged.observed_at, survivor.scope_key, seq)
    await conn.execute(_SET_MERGED_USAGE, usage)
    added = merged.use_count - survivor.use_count
    await conn.execute(_ADD_MERGED_USAGE_ROW, (added, merged.last_used_at, survivor.scope_key, seq))


def _seq(scope_key: str, record_id: str) -> int:
    seq = own_seq(scope_key, record_id)
    if seq is None:  # the plan names only rows it loaded from this scope
        raise ValueError(f"{record_id} is not a record of {scope_key}")
    return seq


async def _insert(conn: Connection, seq: int, record: MemoryRecord) -> None:
    stems = sorted(stem for stem in record_stems(record) if len(stem) <= MAX_LEXEME)
    await conn.execute(
        _INSERT,
        (
            record.scope_key,
            seq,
            record.id,
            record.kind,
            record.text,
            meaning_key(record.text),
            builtins.list(record.keywords),
            sorted(token for token in record_tokens(record) if len(token) <= MAX_LEXEME),
            *stored_values(record),
            stems,
            record.origin,
            record.origin_conversation,
            record.observed_at,
        ),
    )
    if record.status == "active":  # a pending record is counted when it is approved
        await conn.execute(_ADD_TERMS, (record.scope_key, ["", *stems]))


async def evict_over_cap(conn: Connection, scope_key: str, cap: int) -> int:
    """Inside the scope's transaction: the least recently used active records past the cap evicted
    (in `plan_eviction`'s order, read off the eviction index: never the whole active set), and taken
    out of the document frequencies; how many. The active count is the scope's term '' (`_COUNT_ACTIVE`)."""
    cursor = await conn.execute(_COUNT_ACTIVE, (scope_key,))
    excess = int(one(await cursor.fetchone())) - cap
    if excess <= 0:
        return 0
    cursor = await conn.execute(_EVICT_LEAST_USED, {"scope": scope_key, "n": excess})
    retired = await cursor.fetchall()
    await uncount(conn, scope_key, retired)
    return len(retired)


async def write_batch(
    pool: AsyncConnectionPool[Connection],
    scope_key: str,
    batch: Sequence[MemoryCandidate],
    cap: int,
    embedder: Embedder | None,
    clock: Callable[[], float],
    retention: Retention,
    scrub: ScrubList,
    *,
    pending: bool = False,
) -> WriteResult:
    """The batch planned (memory/stores/writing.py) and applied in one transaction holding the
    scope's advisory lock, after the scope's expired records are erased."""
    vectors = None
    if embedder is not None and not pending:  # off the loop, before the scope's lock is taken
        vectors = await asyncio.to_thread(embedder.embed, [c.text for c in batch])
    async with pool.connection() as conn, conn.transaction():
        # The scope's single writer: held until COMMIT/ROLLBACK, so seq and lookups cannot race.
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        cursor = await conn.execute(_MAX_SEQ_OF_SCOPE, {"scope": scope_key})
        seq = int(one(await cursor.fetchone()))
        now = clock()
        cutoff = retention.cutoff(scope_key, now)
        if cutoff is not None:  # the scope is being written: its expired records go now
            where = "scope_key = %s AND created_at < %s"
            await erase_rows(conn, await scrub.of(conn), where, (scope_key, cutoff), "expired", now)
        plan = writing.BatchPlan(scope_key, seq, now, pending=pending)
        how = Applied(now, retention.audit_cutoff(now), scrub, vectors, embedder)
        for index, candidate in enumerate(batch):
            pool_rows = await write_pool(conn, scope_key, candidate, pending=pending)
            await apply_steps(conn, scope_key, plan.add(index, candidate, pool_rows), how)
        waiting = await fetch_rows(conn, _SELECT_ALL_PENDING, (scope_key,)) if pending else []
        evicted = await apply_steps(conn, scope_key, plan.finish(cap, [r for _, r in waiting]), how)
    return plan.result(evicted)


@dataclass(frozen=True, slots=True)
class Applied:
    """What a change is applied with: its time, the log's cutoff, the erase's SET list, the vectors
    the backend made (and by which embedder)."""

    now: float
    log_cutoff: float
    scrub: ScrubList
    vectors: Matrix | None = None
    embedder: Embedder | None = None

    async def vector(self, conn: Connection, scope_key: str, seq: int, index: int | None) -> None:
        if self.vectors is not None and self.embedder is not None and index is not None:
            blob = to_blob(self.vectors[index])
            await conn.execute(_SET_VECTOR, (blob, self.embedder.name, scope_key, seq))


async def apply_steps(conn: Connection, scope_key: str, steps: Sequence[writing.Step], how: Applied) -> int:
    """Inside the plan's transaction: its steps in their order; returns how many were evicted."""
    evicted = 0
    for step in steps:
        if isinstance(step, writing.Fold):
            await _fold(conn, step.target, step.folded)
        elif isinstance(step, writing.Supersede):
            cursor = await conn.execute(_SUPERSEDE, (scope_key, _seq(scope_key, step.record_id)))
            await uncount(conn, scope_key, await cursor.fetchall())
        elif isinstance(step, writing.Withdraw):
            await conn.execute(_WITHDRAW, (scope_key, _seq(scope_key, step.record_id)))
        elif isinstance(step, writing.Insert):
            await _insert(conn, step.seq, step.record)
            await how.vector(conn, scope_key, step.seq, step.vector)
        elif isinstance(step, writing.Activate):
            seq = _seq(scope_key, step.record.id)
            activation = (step.record.supersedes, step.record.last_used_at, scope_key, seq)
            cursor = await conn.execute(_ACTIVATE, activation)
            await conn.execute(_ADD_TERMS, (scope_key, ["", *(one(await cursor.fetchone()) or ())]))
            await how.vector(conn, scope_key, seq, step.vector)
        elif isinstance(step, writing.Erase):
            seqs = [_seq(scope_key, record_id) for record_id in step.record_ids]
            sets = await how.scrub.of(conn)
            await erase_rows(conn, sets, _SEQS, (scope_key, seqs), step.reason, how.now)
        elif isinstance(step, writing.Absorb):
            await _absorb(conn, step.survivor, step.merged)
        elif isinstance(step, writing.Evict):
            evicted = await evict_over_cap(conn, scope_key, step.cap)
        else:
            await append_entries(conn, step.entries, how.log_cutoff)
    return evicted


async def reindex_batch(
    pool: AsyncConnectionPool[Connection], embedder: Embedder, scope_key: str, batch: int
) -> tuple[int, int]:
    """Vectors for up to `batch` of the scope's active records that have none of this embedder's, in
    one transaction; how many were made and how many still lack one."""
    async with pool.connection() as conn:
        cursor = await conn.execute(_UNVECTORED, (scope_key, embedder.name, batch))
        rows = await cursor.fetchall()
        if rows:
            vectors = await asyncio.to_thread(embedder.embed, [str(text) for _, text in rows])
            async with conn.transaction():
                for (seq, _), vector in zip(rows, vectors, strict=True):
                    await conn.execute(_SET_VECTOR, (to_blob(vector), embedder.name, scope_key, seq))
        cursor = await conn.execute(_COUNT_UNVECTORED, (scope_key, embedder.name))
        return len(rows), int(one(await cursor.fetchone()))
