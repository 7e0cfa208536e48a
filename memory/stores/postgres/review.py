"""The review queue on PostgreSQL: pending records written, listed, approved, rejected and expired.

A pending row is a row like any other but for its status: every read (`status = 'active'`), the
active-only full-text and stem indexes, the document frequencies and the scope's vectors leave it out
until `approve` flips it, counts its stems and moves the scope's vector generation — in one
transaction, so every replica's next read sees it. Each action appends its curation entries in the
transaction of the change it records.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.ranking.vectors import GENERATION_TERM, to_blob
from memory.rules.engine import fold_into, mint_record, plan_eviction, plan_write
from memory.rules.restate import meaning_key
from memory.stores.postgres.curation import append_entries, entry, reflection_actor
from memory.stores.postgres.erasure import ScrubList, erased_rows
from memory.stores.postgres.rows import Connection, Row, fetch_rows, one, own_seq
from memory.stores.postgres.sql import (
    _ADD_TERMS,
    _BUMP_DEDUP,
    _COLUMNS,
    _COUNT_ACTIVE,
    _EVICT,
    _LOCK_SCOPE,
    _MAX_SEQ_OF_SCOPE,
    _NEXT_GENERATION,
    _SELECT_ACTIVE,
    _SELECT_ONE_ACTIVE,
    _SET_VECTOR,
    _SUPERSEDE,
)
from memory.stores.postgres.terms import uncount
from memory.stores.postgres.writes import _insert
from memory.types import CurationEntry, MemoryCandidate, MemoryRecord, WriteResult

# A pending write folds a restatement into an active or a pending record alike.
_SELECT_SAME_NORM_LIVE: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND status IN ('active', 'pending') AND md5(norm) = md5(%s) AND norm = %s
    ORDER BY seq
"""

_SELECT_PENDING: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND status = 'pending' AND created_at >= %s
    ORDER BY seq DESC LIMIT %s
"""

_SELECT_ONE_PENDING: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND seq = %s AND id = %s AND status = 'pending'
"""

# The pending rows past the scope's cap, oldest first: they expire to make room.
_SELECT_PENDING_OVER_CAP: Final = """
    SELECT seq FROM memory_records WHERE scope_key = %s AND status = 'pending' ORDER BY seq DESC OFFSET %s
"""

_APPROVE: Final = """
    UPDATE memory_records SET status = 'active'
    WHERE scope_key = %s AND seq = %s AND status = 'pending' RETURNING stems
"""

Clock = Callable[[], float]


async def _pending_pool(conn: Connection, scope_key: str, candidate: MemoryCandidate) -> builtins.list[Row]:
    """The rows a pending candidate is planned against: the active record it corrects, else the
    active and pending records it restates."""
    if candidate.supersedes:
        seq = own_seq(scope_key, candidate.supersedes)
        if seq is None:
            return []
        return await fetch_rows(conn, _SELECT_ONE_ACTIVE, (scope_key, seq, candidate.supersedes))
    norm = meaning_key(candidate.text)
    return await fetch_rows(conn, _SELECT_SAME_NORM_LIVE, (scope_key, norm, norm))


async def write_pending(
    pool: AsyncConnectionPool[Connection],
    scope_key: str,
    batch: Sequence[MemoryCandidate],
    cap: int,
    clock: Clock,
    scrub: ScrubList,
) -> WriteResult:
    """One transaction under the scope's lock: each candidate folds into the record it restates or
    waits as a new pending record (naming the record it would correct); then the oldest pending
    beyond the cap expire."""
    inserted = deduped = 0
    entries: builtins.list[CurationEntry] = []
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        cursor = await conn.execute(_MAX_SEQ_OF_SCOPE, (scope_key,))
        seq = int(one(await cursor.fetchone()))
        now = clock()
        for candidate in batch:
            lookup = await _pending_pool(conn, scope_key, candidate)
            # A pending record is planned against like an active one: the same dedup and supersede rule.
            plan = plan_write(
                scope_key, candidate, [replace(record, status="active") for _, record in lookup]
            )
            if plan.action == "dedup" and plan.dedup_id is not None:
                target_seq, target = next(row for row in lookup if row[1].id == plan.dedup_id)
                folded = fold_into(target, candidate, now)
                await conn.execute(
                    _BUMP_DEDUP, (folded.last_used_at, folded.observed_at, scope_key, target_seq)
                )
                entries.append(
                    entry(scope_key, target.id, "folded", reflection_actor(candidate.source_run_id), now)
                )
                deduped += 1
                continue
            seq += 1
            minted = mint_record(scope_key, seq, candidate, now, plan.supersede_id)
            await _insert(conn, seq, replace(minted, status="pending"))
            inserted += 1
        cursor = await conn.execute(_SELECT_PENDING_OVER_CAP, (scope_key, cap))
        over = [int(row[0]) for row in await cursor.fetchall()]
        expired = []
        if over:
            where = "scope_key = %s AND status = 'pending' AND seq = ANY(%s)"
            expired = await erased_rows(conn, await scrub.of(conn), where, (scope_key, over), "expired", now)
            entries.extend(entry(scope, record_id, "expired", "system", now) for scope, record_id in expired)
        await append_entries(conn, entries)
    return WriteResult(inserted=inserted, deduped=deduped, evicted=len(expired))


async def pending_records(
    pool: AsyncConnectionPool[Connection], scope_key: str, limit: int, since: float
) -> builtins.list[MemoryRecord]:
    async with pool.connection() as conn:
        rows = await fetch_rows(conn, _SELECT_PENDING, (scope_key, since, limit))
    return [record for _, record in rows]


async def approve(
    pool: AsyncConnectionPool[Connection],
    scope_key: str,
    seq: int,
    record_id: str,
    actor: str,
    cap: int,
    embedder: Embedder | None,
    clock: Clock,
) -> MemoryRecord | None:
    """One transaction under the scope's lock: the pending record made active and counted (its
    stems, a new vector generation), the record it corrects superseded, the scope evicted over its
    cap — as its write would have, had it not waited."""
    vector = None
    if embedder is not None:  # off the loop, before the scope's lock is taken
        async with pool.connection() as conn:
            waiting = await fetch_rows(conn, _SELECT_ONE_PENDING, (scope_key, seq, record_id))
        if not waiting:
            return None
        [vector] = await asyncio.to_thread(embedder.embed, [waiting[0][1].text])
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await fetch_rows(conn, _SELECT_ONE_PENDING + " FOR UPDATE", (scope_key, seq, record_id))
        if not found:
            return None
        record = replace(found[0][1], status="active")
        now = clock()
        cursor = await conn.execute(_APPROVE, (scope_key, seq))
        stems = one(await cursor.fetchone())
        await conn.execute(_ADD_TERMS, (scope_key, ["", *(stems or ())]))
        if vector is not None and embedder is not None:
            await conn.execute(_SET_VECTOR, (to_blob(vector), embedder.name, scope_key, seq))
        await conn.execute(_NEXT_GENERATION, (scope_key, GENERATION_TERM))
        entries = [entry(scope_key, record_id, "approved", actor, now)]
        corrected = None if record.supersedes is None else own_seq(scope_key, record.supersedes)
        if record.supersedes is not None and corrected is not None:
            cursor = await conn.execute(_SUPERSEDE, (scope_key, corrected))
            retired = await cursor.fetchall()
            if retired:  # still active: the correction lands now
                await uncount(conn, scope_key, retired)
                by = reflection_actor(record.source_run_id)
                entries.append(entry(scope_key, record.supersedes, "superseded", by, now, record_id))
        await append_entries(conn, entries)
        await evict_over_cap(conn, scope_key, cap)
    return record


async def evict_over_cap(conn: Connection, scope_key: str, cap: int) -> int:
    """Inside the scope's transaction: the least recently used active records past the cap evicted
    (`plan_eviction`), leaving the document frequencies; how many."""
    cursor = await conn.execute(_COUNT_ACTIVE, (scope_key,))
    if int(one(await cursor.fetchone())) <= cap:
        return 0
    active = await fetch_rows(conn, _SELECT_ACTIVE, (scope_key,))
    doomed = set(plan_eviction([record for _, record in active], cap))
    doomed_seqs = [row_seq for row_seq, record in active if record.id in doomed]
    cursor = await conn.execute(_EVICT, (scope_key, doomed_seqs))
    await uncount(conn, scope_key, await cursor.fetchall())
    return len(doomed_seqs)


async def reject(
    pool: AsyncConnectionPool[Connection],
    scrub: ScrubList,
    scope_key: str,
    seq: int,
    record_id: str,
    actor: str,
    now: float,
) -> bool:
    """One transaction: the pending record erased (reason `rejected`) and the rejection logged."""
    async with pool.connection() as conn, conn.transaction():
        where = "scope_key = %s AND seq = %s AND id = %s AND status = 'pending'"
        erased = await erased_rows(
            conn, await scrub.of(conn), where, (scope_key, seq, record_id), "rejected", now
        )
        await append_entries(conn, [entry(scope_key, record_id, "rejected", actor, now) for _ in erased])
    return bool(erased)


async def expire_pending(
    pool: AsyncConnectionPool[Connection], scrub: ScrubList, older_than: float, actor: str, now: float
) -> int:
    """One transaction over every scope: each pending record created before `older_than` erased
    (reason `expired`), each expiry logged."""
    async with pool.connection() as conn, conn.transaction():
        where = "status = 'pending' AND created_at < %s"
        erased = await erased_rows(conn, await scrub.of(conn), where, (older_than,), "expired", now)
        await append_entries(
            conn, [entry(scope, record_id, "expired", actor, now) for scope, record_id in erased]
        )
    return len(erased)
