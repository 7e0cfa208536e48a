"""The review queue on PostgreSQL: pending records written, listed, approved, rejected and expired.

A pending row is a row like any other but for its status: every read (`status = 'active'`), the
active-only full-text and stem indexes, the document frequencies and every replica's scope index
(scope_cache.py) leave it out until `approve` flips it and counts its stems in one transaction: the
flip is an UPDATE the change feed stamps (changes.py), so every replica's next read catches it up.
Each action appends its curation entries in the transaction of the change it records. What folds,
what expires over the cap and what an approval writes: memory/rules (curation, engine) decide; an
approval is planned by `plan_write` as a write is.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.ranking.vectors import to_blob
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
from memory.rules.engine import plan_write
from memory.rules.restate import meaning_key
from memory.rules.retention import Retention
from memory.stores.postgres.curation import append_entries, walk
from memory.stores.postgres.erasure import ScrubList, erase_rows, erased_rows
from memory.stores.postgres.rows import Connection, Row, fetch_rows, one, own_seq
from memory.stores.postgres.sql import (
    _ADD_TERMS,
    _COLUMNS,
    _LOCK_ROWS,
    _LOCK_SCOPE,
    _MAX_SEQ_OF_SCOPE,
    _RECORDS,
    _SELECT_ONE_ACTIVE,
    _SET_VECTOR,
    _SUPERSEDE,
)
from memory.stores.postgres.terms import uncount
from memory.stores.postgres.writes import _fold, _insert, _write_pool, evict_over_cap
from memory.types import CurationEntry, MemoryCandidate, MemoryRecord, WriteResult

# A pending write folds a restatement into an active or a pending record alike.
_SELECT_SAME_NORM_LIVE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status IN ('active', 'pending') AND md5(norm) = md5(%s) AND norm = %s
    ORDER BY seq
"""

_SELECT_PENDING: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status = 'pending' AND created_at >= %s
    ORDER BY seq DESC LIMIT %s
"""

_SELECT_ALL_PENDING: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS} WHERE scope_key = %s AND status = 'pending' ORDER BY seq
"""

_SELECT_ONE_PENDING: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND seq = %s AND id = %s AND status = 'pending'
"""

_ACTIVATE: Final = """
    UPDATE memory_records SET status = 'active', supersedes = %s, last_used_at = %s
    WHERE scope_key = %s AND seq = %s AND status = 'pending' RETURNING stems
"""

_PENDING_SEQS: Final = "scope_key = %s AND status = 'pending' AND seq = ANY(%s)"

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Approval:
    """What an approval did: the active record it left (the pending one, or the one it folded into)."""

    record: MemoryRecord
    folded: bool
    superseded: str | None
    evicted: int


async def _pending_pool(conn: Connection, scope_key: str, candidate: MemoryCandidate) -> builtins.list[Row]:
    """Exactly the rows `plan_pending` reads: the live rows with the candidate's meaning key (seq
    order) and the active row it names to supersede."""
    norm = meaning_key(candidate.text)
    rows = await fetch_rows(conn, _SELECT_SAME_NORM_LIVE, (scope_key, norm, norm))
    seq = None if not candidate.supersedes else own_seq(scope_key, candidate.supersedes)
    if seq is not None and all(record.id != candidate.supersedes for _, record in rows):
        rows += await fetch_rows(conn, _SELECT_ONE_ACTIVE, (scope_key, seq, candidate.supersedes))
    return rows


async def write_pending(
    pool: AsyncConnectionPool[Connection],
    scope_key: str,
    batch: Sequence[MemoryCandidate],
    cap: int,
    clock: Clock,
    retention: Retention,
    scrub: ScrubList,
) -> WriteResult:
    """One transaction under the scope's lock: the scope's expired records erased (as a write does),
    each candidate folded into the live record it restates or waiting as a new pending one, then the
    oldest pending beyond the cap expired (`evicted` counts them)."""
    inserted = deduped = 0
    entries: builtins.list[CurationEntry] = []
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        cursor = await conn.execute(_MAX_SEQ_OF_SCOPE, {"scope": scope_key})
        seq = int(one(await cursor.fetchone()))
        now = clock()
        sets = await scrub.of(conn)
        cutoff = retention.cutoff(scope_key, now)
        if cutoff is not None:
            await erase_rows(
                conn, sets, "scope_key = %s AND created_at < %s", (scope_key, cutoff), "expired", now
            )
        for candidate in batch:
            lookup = await _pending_pool(conn, scope_key, candidate)
            plan = plan_pending(scope_key, candidate, [record for _, record in lookup])
            if plan.action == "dedup":
                target_seq, target = next(row for row in lookup if row[1].id == plan.dedup_id)
                await _fold(conn, target_seq, target, candidate, now)
                entries.append(entry(target, "folded", run_actor(candidate.source_run_id), now))
                deduped += 1
                continue
            seq += 1
            await _insert(conn, seq, pending_record(scope_key, seq, candidate, now, plan))
            inserted += 1
        waiting = await fetch_rows(conn, _SELECT_ALL_PENDING, (scope_key,))
        doomed = set(pending_to_expire([record for _, record in waiting], cap))
        over = [(row_seq, record) for row_seq, record in waiting if record.id in doomed]
        if over:
            await erase_rows(conn, sets, _PENDING_SEQS, (scope_key, [s for s, _ in over]), "expired", now)
            entries.extend(entry(record, "expired", SYSTEM_ACTOR, now) for _, record in over)
        await append_entries(conn, entries, retention.audit_cutoff(now))
    return WriteResult(inserted=inserted, deduped=deduped, evicted=len(over))


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
    """One transaction under the scope's lock: the pending record planned as its write would be —
    folded into an active record of the same meaning (and erased, reason `merged`), or made active
    and counted (its stems, its vector), superseding what it corrects, the scope evicted over its cap
    (`evict_over_cap`, as a write is). None when it is not pending."""
    vector = None
    if embedder is not None:  # off the loop, before the scope's lock is taken
        async with pool.connection() as conn:
            waiting = await fetch_rows(conn, _SELECT_ONE_PENDING, (scope_key, seq, record_id))
        if not waiting:
            return None
        [vector] = await asyncio.to_thread(embedder.embed, [waiting[0][1].text])
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await fetch_rows(conn, _SELECT_ONE_PENDING + _LOCK_ROWS, (scope_key, seq, record_id))
        if not found:
            return None
        record, now = found[0][1], clock()
        chain = await walk(conn, record, {})
        candidate = approval_candidate(record, chain.target())
        lookup = await _write_pool(conn, scope_key, candidate)
        plan = plan_write(scope_key, candidate, [r for _, r in lookup])
        if plan.action == "dedup":
            target_seq, target = next(row for row in lookup if row[1].id == plan.dedup_id)
            await _fold(conn, target_seq, target, candidate, now)
            await erase_rows(conn, await scrub.of(conn), _PENDING_SEQS, (scope_key, [seq]), "merged", now)
            entries = [
                entry(record, "approved", actor, now, target.id),
                entry(target, "folded", actor, now, record.id),
            ]
            await append_entries(conn, entries, retention.audit_cutoff(now))
            [(_, survivor)] = await fetch_rows(conn, _SELECT_ONE_ACTIVE, (scope_key, target_seq, target.id))
            return Approval(survivor, folded=True, superseded=None, evicted=0)
        approved = approved_record(record, plan, chain.versions(), now)
        entries = [entry(record, "approved", actor, now)]
        if plan.supersede_id is not None:
            cursor = await conn.execute(_SUPERSEDE, (scope_key, own_seq(scope_key, plan.supersede_id)))
            await uncount(conn, scope_key, await cursor.fetchall())
            by = run_actor(record.source_run_id)
            entries.insert(0, CurationEntry(plan.supersede_id, scope_key, "superseded", by, now, record.id))
        activation = (approved.supersedes, approved.last_used_at, scope_key, seq)
        cursor = await conn.execute(_ACTIVATE, activation)
        await conn.execute(_ADD_TERMS, (scope_key, ["", *(one(await cursor.fetchone()) or ())]))
        if vector is not None and embedder is not None:
            await conn.execute(_SET_VECTOR, (to_blob(vector), embedder.name, scope_key, seq))
        await append_entries(conn, entries, retention.audit_cutoff(now))
        evicted = await evict_over_cap(conn, scope_key, cap)
    return Approval(approved, folded=False, superseded=plan.supersede_id, evicted=evicted)


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
