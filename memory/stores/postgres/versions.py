"""A scope's versions on PostgreSQL: the chain a record is in (gathered as `ChainWalk` asks), its
history, the forget that erases every version, an edit (a new version superseding the old, in the
same scope, with the same status) and consolidation's reads and merges. Each change runs under the
scope's lock and appends its curation entries in its own transaction; what an edit or a merge
writes, memory/stores/writing.py plans and writes.py applies."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from typing import Final

from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.rules.curation import FORGETTABLE, ChainWalk, edit_candidate, history_of, merge_duplicates
from memory.stores.postgres.curation_log import of_records
from memory.stores.postgres.erasure import ScrubList, erase_rows
from memory.stores.postgres.rows import Connection, fetch_rows, one, own_seq, row_record
from memory.stores.postgres.sql import (
    _COLUMN_COUNT,
    _COLUMNS,
    _LOCK_ROWS,
    _LOCK_SCOPE,
    _MAX_SEQ_OF_SCOPE,
    _RECORDS,
)
from memory.stores.postgres.writes import Applied, apply_steps
from memory.stores.writing import plan_edit, plan_merge
from memory.types import ERASE_REASONS, EraseReason, MemoryRecord, OriginLabel, RecordVersion

_SELECT_ONE_EDITABLE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND seq = %s AND id = %s AND status IN ('active', 'pending') AND created_at >= %s
"""

_SELECT_ACTIVE_SINCE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status = 'active' AND created_at >= %s ORDER BY seq
"""

_SELECT_ACTIVE_FOR_MERGE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status = 'active' AND seq = ANY(%s) AND id = ANY(%s) ORDER BY seq{_LOCK_ROWS}
"""

# The rows a chain walk asks for: by id (through the primary key's seq) and by the id they supersede.
_SELECT_LINKED: Final = f"""
    SELECT {_COLUMNS}, erased_reason FROM {_RECORDS}
    WHERE scope_key = %s AND ((seq = ANY(%s) AND id = ANY(%s)) OR supersedes = ANY(%s))
"""

_SELECT_ONE: Final = f"""
    SELECT {_COLUMNS}, erased_reason FROM {_RECORDS} WHERE scope_key = %s AND seq = %s AND id = %s
"""

_REASONS: Final[dict[str, EraseReason]] = {reason: reason for reason in ERASE_REASONS}  # type: ignore[misc]

Erased = dict[str, EraseReason | None]
Clock = Callable[[], float]
LogCutoff = Callable[[float], float]


async def edit(
    pool: AsyncConnectionPool[Connection],
    scope_key: str,
    seq: int,
    record_id: str,
    text: str,
    typed_in: OriginLabel,
    actor: str,
    embedder: Embedder | None,
    clock: Clock,
    log_cutoff: LogCutoff,
    scrub: ScrubList,
    since: float,
) -> MemoryRecord | None:
    """The new version planned (`plan_edit`: the text validated and redacted as any write is, in the
    old one's status) and applied under the scope's lock; None if the record was neither active nor
    pending, or expired (created before `since`: its new version would live a whole new ttl)."""
    async with pool.connection() as conn:
        found = await fetch_rows(conn, _SELECT_ONE_EDITABLE, (scope_key, seq, record_id, since))
    if not found:
        return None
    candidate = await asyncio.to_thread(edit_candidate, found[0][1], text, typed_in)
    vectors = None
    if embedder is not None and found[0][1].status == "active":  # off the loop, before the lock
        vectors = await asyncio.to_thread(embedder.embed, [candidate.text])
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await fetch_rows(conn, _SELECT_ONE_EDITABLE + _LOCK_ROWS, (scope_key, seq, record_id, since))
        if not found:
            return None
        cursor = await conn.execute(_MAX_SEQ_OF_SCOPE, {"scope": scope_key})
        now = clock()
        change = plan_edit(found[0][1], int(one(await cursor.fetchone())) + 1, candidate, now, actor)
        how = Applied(now, log_cutoff(now), scrub, vectors, embedder)
        await apply_steps(conn, scope_key, change.steps, how)
    return change.record


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
    log_cutoff: LogCutoff,
) -> int:
    """One transaction under the scope's lock: the active duplicates merged into the active survivor
    as `plan_merge` plans it; how many."""
    wanted = [survivor_id, *duplicate_ids]
    seqs = [seq for seq in (own_seq(scope_key, i) for i in wanted) if seq is not None]
    if not seqs:
        return 0
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        rows = await fetch_rows(conn, _SELECT_ACTIVE_FOR_MERGE, (scope_key, seqs, wanted))
        survivor, duplicates = merge_duplicates(scope_key, survivor_id, duplicate_ids, [r for _, r in rows])
        if survivor is None or not duplicates:
            return 0
        chains = [await walk(conn, d, {}) for d in duplicates]
        now = clock()
        change = plan_merge(survivor, duplicates, chains, now, actor)
        await apply_steps(conn, scope_key, change.steps, Applied(now, log_cutoff(now), scrub))
    return change.merged


def _linked(rows: Sequence[TupleRow], erased: Erased) -> builtins.list[MemoryRecord]:
    records = []
    for row in rows:
        _, record = row_record(row[:_COLUMN_COUNT])
        reason = row[_COLUMN_COUNT]
        erased[record.id] = None if reason is None else _REASONS.get(str(reason))
        records.append(record)
    return records


async def find(
    conn: Connection, scope_key: str, seq: int, record_id: str, *, lock: bool = False
) -> tuple[MemoryRecord, Erased] | None:
    """The row with this id (any status; `lock`: FOR UPDATE), and why it was erased (None: it was not)."""
    cursor = await conn.execute(_SELECT_ONE + (_LOCK_ROWS if lock else ""), (scope_key, seq, record_id))
    row = await cursor.fetchone()
    if row is None:
        return None
    erased: Erased = {}
    [record] = _linked([row], erased)
    return record, erased


async def walk(conn: Connection, start: MemoryRecord, erased: Erased) -> ChainWalk:
    """The start's chain gathered as the rules ask (by id and by superseded id); `erased` learns why
    each row met on the way was erased."""
    chain = ChainWalk(start)
    while True:
        ids, successors = chain.wanted()
        if not ids and not successors:
            return chain
        seqs = [seq for seq in (own_seq(start.scope_key, i) for i in ids) if seq is not None]
        cursor = await conn.execute(_SELECT_LINKED, (start.scope_key, seqs, ids, successors))
        chain.add(_linked(await cursor.fetchall(), erased))


async def read_history(
    conn: Connection, scope_key: str, seq: int, record_id: str, since: float
) -> builtins.list[RecordVersion]:
    """Every version of the chain, oldest first, each with the entries naming it as its record."""
    found = await find(conn, scope_key, seq, record_id)
    if found is None:
        return []
    start, erased = found
    versions = (await walk(conn, start, erased)).versions()
    entries = await of_records(conn, scope_key, [v.id for v in versions], since)
    return history_of(versions, {v.id: erased.get(v.id) for v in versions}, entries)


async def forget_chain(
    pool: AsyncConnectionPool[Connection],
    scrub: ScrubList,
    scope_key: str,
    seq: int,
    record_id: str,
    now: float,
) -> bool:
    """One transaction under the scope's lock (no edit can add a version meanwhile): when the record
    is active (or evicted), the text of every version in its chain erased, reason `forgotten`."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await find(conn, scope_key, seq, record_id, lock=True)
        if found is None or found[0].status not in FORGETTABLE or found[1].get(record_id) is not None:
            return False
        start, erased = found
        versions = (await walk(conn, start, erased)).versions()
        seqs = [own_seq(scope_key, v.id) for v in versions]
        where = "scope_key = %s AND seq = ANY(%s)"
        await erase_rows(conn, await scrub.of(conn), where, (scope_key, seqs), "forgotten", now)
    return True
