"""A scope's write: one transaction per batch under the scope's advisory lock (plan, apply, evict — or
nothing). Every decision comes from `memory.rules.engine`; this module only persists it."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence

from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.ranking.lexical import record_stems
from memory.ranking.vectors import (
    Progress,
    to_blob,
)
from memory.rules.curation import entry, run_actor
from memory.rules.engine import (
    fold_into,
    mint_record,
    plan_write,
    record_id,
)
from memory.rules.restate import meaning_key
from memory.rules.retention import Retention
from memory.rules.scorer import record_tokens
from memory.stores.postgres.curation import append_entries
from memory.stores.postgres.erasure import ScrubList, erase_rows
from memory.stores.postgres.rows import MAX_LEXEME, Connection, Row, fetch_rows, one, own_seq
from memory.stores.postgres.sql import (
    _ADD_TERMS,
    _BUMP_DEDUP,
    _BUMP_DEDUP_USAGE,
    _COUNT_ACTIVE,
    _COUNT_UNVECTORED,
    _EVICT_LEAST_USED,
    _INSERT,
    _LOCK_SCOPE,
    _MAX_SEQ_OF_SCOPE,
    _SELECT_ONE_ACTIVE,
    _SELECT_SAME_NORM,
    _SET_VECTOR,
    _SUPERSEDE,
    _UNVECTORED,
)
from memory.stores.postgres.terms import uncount
from memory.stores.sql_common import stored_values
from memory.types import (
    CurationEntry,
    MemoryCandidate,
    MemoryRecord,
    WriteResult,
)


async def _write_pool(conn: Connection, scope_key: str, candidate: MemoryCandidate) -> builtins.list[Row]:
    """Exactly the rows plan_write reads: the supersede target, else the same-norm actives."""
    if candidate.supersedes:
        seq = own_seq(scope_key, candidate.supersedes)
        if seq is None:
            return []
        return await fetch_rows(conn, _SELECT_ONE_ACTIVE, (scope_key, seq, candidate.supersedes))
    norm = meaning_key(candidate.text)
    return await fetch_rows(conn, _SELECT_SAME_NORM, (scope_key, norm, norm))


async def _fold(
    conn: Connection, seq: int, record: MemoryRecord, candidate: MemoryCandidate, now: float
) -> None:
    """The restated record confirmed as the engine says (`fold_into`): the count incremented in
    place, the last use and the date set."""
    folded = fold_into(record, candidate, now)
    await conn.execute(_BUMP_DEDUP, (folded.last_used_at, folded.observed_at, record.scope_key, seq))
    await conn.execute(_BUMP_DEDUP_USAGE, (folded.last_used_at, record.scope_key, seq))


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
) -> WriteResult:
    """Plan, apply and evict (`evict_over_cap`) the batch in one transaction holding the scope's
    advisory lock."""
    inserted = deduped = superseded = evicted = 0
    entries: builtins.list[CurationEntry] = []
    vectors = None
    if embedder is not None:  # off the loop, before the scope's lock is taken
        vectors = await asyncio.to_thread(embedder.embed, [c.text for c in batch])
    async with pool.connection() as conn, conn.transaction():
        # The scope's single writer: held until COMMIT/ROLLBACK, so seq and lookups cannot race.
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        cursor = await conn.execute(_MAX_SEQ_OF_SCOPE, {"scope": scope_key})
        seq = int(one(await cursor.fetchone()))
        now = clock()
        cutoff = retention.cutoff(scope_key, now)
        if cutoff is not None:  # the scope is being written: its expired records go now
            await erase_rows(
                conn,
                await scrub.of(conn),
                "scope_key = %s AND created_at < %s",
                (scope_key, cutoff),
                "expired",
                now,
            )
        for index, candidate in enumerate(batch):
            lookup = await _write_pool(conn, scope_key, candidate)
            plan = plan_write(scope_key, candidate, [record for _, record in lookup])
            seqs = {record.id: row_seq for row_seq, record in lookup}
            if plan.action == "dedup" and plan.dedup_id is not None:
                target = next(record for _, record in lookup if record.id == plan.dedup_id)
                await _fold(conn, seqs[plan.dedup_id], target, candidate, now)
                entries.append(entry(target, "folded", run_actor(candidate.source_run_id), now))
                deduped += 1
                continue
            if plan.supersede_id is not None:
                cursor = await conn.execute(_SUPERSEDE, (scope_key, seqs[plan.supersede_id]))
                superseded += cursor.rowcount
                await uncount(conn, scope_key, await cursor.fetchall())
            seq += 1
            await _insert(conn, seq, mint_record(scope_key, seq, candidate, now, plan.supersede_id))
            if plan.supersede_id is not None:
                new_id = record_id(scope_key, seq)
                by = run_actor(candidate.source_run_id)
                entries.append(CurationEntry(plan.supersede_id, scope_key, "superseded", by, now, new_id))
            if vectors is not None and embedder is not None:
                blob = to_blob(vectors[index])
                await conn.execute(_SET_VECTOR, (blob, embedder.name, scope_key, seq))
            inserted += 1
        await append_entries(conn, entries, retention.audit_cutoff(now))
        evicted = await evict_over_cap(conn, scope_key, cap)
    return WriteResult(inserted=inserted, deduped=deduped, superseded=superseded, evicted=evicted)


async def reindex(
    pool: AsyncConnectionPool[Connection],
    embedder: Embedder,
    scope_key: str,
    batch: int,
    progress: Progress | None,
) -> int:
    """Vectors for the scope's active records that have none of this embedder's, a batch per
    transaction: safe to interrupt and to run again. Returns how many were made."""
    done = 0
    while True:
        async with pool.connection() as conn:
            cursor = await conn.execute(_UNVECTORED, (scope_key, embedder.name, batch))
            rows = await cursor.fetchall()
            if rows:
                vectors = await asyncio.to_thread(embedder.embed, [str(text) for _, text in rows])
                async with conn.transaction():
                    for (seq, _), vector in zip(rows, vectors, strict=True):
                        await conn.execute(_SET_VECTOR, (to_blob(vector), embedder.name, scope_key, seq))
            cursor = await conn.execute(_COUNT_UNVECTORED, (scope_key, embedder.name))
            left = int(one(await cursor.fetchone()))
        done += len(rows)
        if progress is not None:
            progress(scope_key, done, done + left)
        if not rows or left == 0:
            return done
