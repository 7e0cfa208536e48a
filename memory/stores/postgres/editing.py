"""People's changes to stored records on PostgreSQL: an edit (a new version superseding the old, in
the same scope, with the same status) and consolidation's reads and merges. Each runs under the
scope's lock and appends its curation entries in its own transaction."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.ranking.vectors import to_blob
from memory.rules.engine import mint_record, prepare_batch
from memory.stores.postgres.curation import append_entries, entry
from memory.stores.postgres.erasure import ScrubList, erase_rows
from memory.stores.postgres.rows import Connection, fetch_rows, one, own_seq
from memory.stores.postgres.sql import (
    _COLUMNS,
    _LOCK_SCOPE,
    _MAX_SEQ_OF_SCOPE,
    _SELECT_ONE_ACTIVE,
    _SET_VECTOR,
)
from memory.stores.postgres.terms import uncount
from memory.stores.postgres.writes import _insert
from memory.types import MemoryCandidate, MemoryRecord

_SELECT_ONE_EDITABLE: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND seq = %s AND id = %s AND status IN ('active', 'pending')
"""

_SUPERSEDE_EDITED: Final = """
    UPDATE memory_records SET status = 'superseded'
    WHERE scope_key = %s AND seq = %s AND status IN ('active', 'pending') RETURNING stems
"""

_SELECT_ACTIVE_SINCE: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND status = 'active' AND created_at >= %s ORDER BY seq
"""

_SELECT_DUPLICATES: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND status = 'active' AND seq = ANY(%s) AND id = ANY(%s) ORDER BY seq FOR UPDATE
"""

_SET_MERGED_USAGE: Final = """
    UPDATE memory_records SET use_count = %s, last_used_at = %s, observed_at = %s
    WHERE scope_key = %s AND seq = %s
"""

Clock = Callable[[], float]


def edited_candidate(record: MemoryRecord, text: str) -> MemoryCandidate:
    """The candidate an edit writes: the new text with the old version's kind, origin and provenance."""
    return MemoryCandidate(
        kind=record.kind,
        text=text,
        source_thread_key=record.source_thread_key,
        keywords=record.keywords,
        source_run_id=record.source_run_id,
        confidence=record.confidence,
        origin=record.origin,
        origin_conversation=record.origin_conversation,
        observed_at=record.observed_at,
    )


def merged_survivor(survivor: MemoryRecord, duplicates: Sequence[MemoryRecord]) -> MemoryRecord:
    """The survivor of a merge: every use of the duplicates added, last used and observed the latest."""
    folded = [survivor, *duplicates]
    used = [r.last_used_at for r in folded if r.last_used_at is not None]
    observed = [r.observed_at for r in folded if r.observed_at is not None]
    return replace(
        survivor,
        use_count=sum(r.use_count for r in folded),
        last_used_at=max(used) if used else None,
        observed_at=max(observed) if observed else None,
    )


async def edit(
    pool: AsyncConnectionPool[Connection],
    scope_key: str,
    seq: int,
    record_id: str,
    text: str,
    actor: str,
    embedder: Embedder | None,
    clock: Clock,
) -> MemoryRecord | None:
    """The new version, validated and redacted as any write is, inserted with the old one's status
    (an active one counted and given its vector) and the old one superseded; None if the record
    was neither active nor pending."""
    async with pool.connection() as conn:
        found = await fetch_rows(conn, _SELECT_ONE_EDITABLE, (scope_key, seq, record_id))
    if not found:
        return None
    [candidate] = await asyncio.to_thread(prepare_batch, [edited_candidate(found[0][1], text)])
    vector = None
    if embedder is not None and found[0][1].status == "active":  # off the loop, before the lock
        [vector] = await asyncio.to_thread(embedder.embed, [candidate.text])
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await fetch_rows(conn, _SELECT_ONE_EDITABLE + " FOR UPDATE", (scope_key, seq, record_id))
        if not found:
            return None
        old = found[0][1]
        cursor = await conn.execute(_SUPERSEDE_EDITED, (scope_key, seq))
        retired = await cursor.fetchall()
        if old.status == "active":
            await uncount(conn, scope_key, retired)
        cursor = await conn.execute(_MAX_SEQ_OF_SCOPE, (scope_key,))
        new_seq = int(one(await cursor.fetchone())) + 1
        now = clock()
        new = replace(mint_record(scope_key, new_seq, candidate, now, old.id), status=old.status)
        await _insert(conn, new_seq, new)
        if vector is not None and embedder is not None and new.status == "active":
            await conn.execute(_SET_VECTOR, (to_blob(vector), embedder.name, scope_key, new_seq))
        await append_entries(conn, [entry(scope_key, old.id, "edited", actor, now, new.id)])
    return new


async def active_records(
    pool: AsyncConnectionPool[Connection], scope_key: str, since: float
) -> builtins.list[MemoryRecord]:
    async with pool.connection() as conn:
        rows = await fetch_rows(conn, _SELECT_ACTIVE_SINCE, (scope_key, since))
    return [record for _, record in rows]


async def merge(
    pool: AsyncConnectionPool[Connection],
    scrub: ScrubList,
    scope_key: str,
    survivor_id: str,
    duplicate_ids: Sequence[str],
    actor: str,
    clock: Clock,
) -> int:
    """One transaction under the scope's lock: the active duplicates' usage folded into the active
    survivor, their text erased (reason `merged`), each merge logged; how many were merged."""
    survivor_seq = own_seq(scope_key, survivor_id)
    wanted = {
        seq: record_id
        for record_id in dict.fromkeys(duplicate_ids)
        if record_id != survivor_id and (seq := own_seq(scope_key, record_id)) is not None
    }
    if survivor_seq is None or not wanted:
        return 0
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await fetch_rows(
            conn, _SELECT_ONE_ACTIVE + " FOR UPDATE", (scope_key, survivor_seq, survivor_id)
        )
        if not found:
            return 0
        params = (scope_key, builtins.list(wanted), builtins.list(wanted.values()))
        duplicates = await fetch_rows(conn, _SELECT_DUPLICATES, params)
        if not duplicates:
            return 0
        folded = merged_survivor(found[0][1], [record for _, record in duplicates])
        await conn.execute(
            _SET_MERGED_USAGE,
            (folded.use_count, folded.last_used_at, folded.observed_at, scope_key, survivor_seq),
        )
        now = clock()
        seqs = [seq for seq, _ in duplicates]
        await erase_rows(
            conn, await scrub.of(conn), "scope_key = %s AND seq = ANY(%s)", (scope_key, seqs), "merged", now
        )
        await append_entries(
            conn, [entry(scope_key, record.id, "merged", actor, now, survivor_id) for _, record in duplicates]
        )
    return len(duplicates)
