"""The review queue on PostgreSQL: pending records written, listed, approved, rejected and expired.

A pending row is a row like any other but for its status: every read (`status = 'active'`), the
active-only full-text and stem indexes, the document frequencies and every replica's scope index
(index.py) leave it out until `approve` flips it and counts its stems in one transaction: the
flip is an UPDATE the change feed stamps (changes.py), so every replica's next read catches it up.
Each action appends its curation entries in the transaction of the change it records. What folds,
what expires over the cap and what an approval writes: memory/rules (curation, engine) decide; an
approval is planned (memory/stores/writing.py) as a write is.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable
from typing import Final

from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.rules.retention import Retention
from memory.stores.postgres.curation_log import append_entries
from memory.stores.postgres.erasure import ScrubList, erased_rows
from memory.stores.postgres.rows import Connection, fetch_rows, own_seq
from memory.stores.postgres.sql import (
    _COLUMNS,
    _LOCK_ROWS,
    _LOCK_SCOPE,
    _RECORDS,
    _SELECT_ONE_ACTIVE,
    newest_first,
)
from memory.stores.postgres.versions import walk
from memory.stores.postgres.writes import Applied, apply_steps, write_pool
from memory.stores.writing import Approval, approval_pool_candidate, plan_approval
from memory.types import CurationEntry, MemoryRecord

_SELECT_PENDING: Final = newest_first("pending")


_SELECT_ONE_PENDING: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND seq = %s AND id = %s AND status = 'pending'
"""


_PENDING_SEQS: Final = "scope_key = %s AND status = 'pending' AND seq = ANY(%s)"

Clock = Callable[[], float]


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
    retention: Retention,
    scrub: ScrubList,
) -> Approval | None:
    """One transaction under the scope's lock: the pending record planned as its write would be
    (memory/stores/writing.py) — folded into an active record of the same meaning (and erased, reason
    `merged`), or made active and counted (its stems, its vector), superseding what it corrects, the
    scope evicted over its cap — and applied. None when it is not pending."""
    vectors = None
    if embedder is not None:  # off the loop, before the scope's lock is taken
        async with pool.connection() as conn:
            waiting = await fetch_rows(conn, _SELECT_ONE_PENDING, (scope_key, seq, record_id))
        if not waiting:
            return None
        vectors = await asyncio.to_thread(embedder.embed, [waiting[0][1].text])
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await fetch_rows(conn, _SELECT_ONE_PENDING + _LOCK_ROWS, (scope_key, seq, record_id))
        if not found:
            return None
        record, now = found[0][1], clock()
        chain = await walk(conn, record, {})
        pool_rows = await write_pool(conn, scope_key, approval_pool_candidate(record, chain))
        change = plan_approval(record, chain, pool_rows, now, actor, cap)
        how = Applied(now, retention.audit_cutoff(now), scrub, vectors, embedder)
        evicted = await apply_steps(conn, scope_key, change.steps, how)
        survivor = change.record
        if change.folded:  # as stored: its count was incremented in place
            where = (scope_key, own_seq(scope_key, survivor.id), survivor.id)
            [(_, survivor)] = await fetch_rows(conn, _SELECT_ONE_ACTIVE, where)
    return Approval(survivor, folded=change.folded, superseded=change.superseded, evicted=evicted)


async def reject(
    pool: AsyncConnectionPool[Connection],
    scrub: ScrubList,
    scope_key: str,
    seq: int,
    record_id: str,
    actor: str,
    now: float,
    log_cutoff: float,
) -> bool:
    """One transaction: the pending record erased (reason `rejected`) and the rejection logged."""
    async with pool.connection() as conn, conn.transaction():
        where = "scope_key = %s AND seq = %s AND id = %s AND status = 'pending'"
        erased = await erased_rows(
            conn, await scrub.of(conn), where, (scope_key, seq, record_id), "rejected", now
        )
        rejected = [CurationEntry(record_id, scope_key, "rejected", actor, now) for _ in erased]
        await append_entries(conn, rejected, log_cutoff)
    return bool(erased)


async def expire_pending(
    pool: AsyncConnectionPool[Connection],
    scrub: ScrubList,
    older_than: float,
    actor: str,
    now: float,
    log_cutoff: float,
) -> int:
    """One transaction over every scope: each pending record created before `older_than` erased
    (reason `expired`), each expiry logged."""
    async with pool.connection() as conn, conn.transaction():
        where = "status = 'pending' AND created_at < %s"
        erased = await erased_rows(conn, await scrub.of(conn), where, (older_than,), "expired", now)
        expired = [CurationEntry(record_id, scope, "expired", actor, now) for scope, record_id in erased]
        await append_entries(conn, expired, log_cutoff)
    return len(erased)
