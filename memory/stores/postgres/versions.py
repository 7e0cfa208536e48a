"""A scope's versions on PostgreSQL: the chain a record is in (gathered as `ChainWalk` asks), its
history, the forget that erases every version, an edit (a new version superseding the old, in the
same scope, with the same status) and consolidation's reads and merges. Each change runs under the
scope's lock and appends its curation entries in its own transaction; what an edit or a merge
writes, memory/rules/curation.py decides."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from typing import Final

from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.ranking.vectors import to_blob
from memory.rules.curation import (
    ChainWalk,
    edit_candidate,
    edited_record,
    entry,
    history_of,
    merge_duplicates,
    merged_survivor,
)
from memory.stores.postgres.curation_log import append_entries, of_records
from memory.stores.postgres.erasure import ScrubList, erase_rows
from memory.stores.postgres.rows import Connection, fetch_rows, one, own_seq, row_record
from memory.stores.postgres.sql import (
    _COLUMN_COUNT,
    _COLUMNS,
    _LOCK_ROWS,
    _LOCK_SCOPE,
    _MAX_SEQ_OF_SCOPE,
    _RECORDS,
    _SET_VECTOR,
)
from memory.stores.postgres.terms import uncount
from memory.stores.postgres.writes import _insert
from memory.types import ERASE_REASONS, EraseReason, MemoryRecord, OriginLabel, RecordVersion

_SELECT_ONE_EDITABLE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND seq = %s AND id = %s AND status IN ('active', 'pending')
"""

_SUPERSEDE_EDITED: Final = """
    UPDATE memory_records SET status = 'superseded'
    WHERE scope_key = %s AND seq = %s AND status IN ('active', 'pending') RETURNING stems
"""

_SELECT_ACTIVE_SINCE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status = 'active' AND created_at >= %s ORDER BY seq
"""

_SELECT_ACTIVE_FOR_MERGE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status = 'active' AND seq = ANY(%s) AND id = ANY(%s) ORDER BY seq{_LOCK_ROWS}
"""

_SET_MERGED_USAGE: Final = """
    UPDATE memory_records SET use_count = %s, last_used_at = %s, observed_at = %s
    WHERE scope_key = %s AND seq = %s
"""
# The survivor is active: its usage row is what its usage reads from. Relative, as a flush of usage
# bumps writes it without the record rows' locks: a use counted meanwhile stays counted.
_ADD_MERGED_USAGE_ROW: Final = (
    "UPDATE memory_usage SET uses = uses + %s, used_at = GREATEST(used_at, %s)"
    " WHERE scope_key = %s AND seq = %s"
)

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
) -> MemoryRecord | None:
    """The new version (`edited_record`: the text validated and redacted as any write is) inserted
    with the old one's status (an active one counted and given its vector), the old one superseded;
    None if the record was neither active nor pending."""
    async with pool.connection() as conn:
        found = await fetch_rows(conn, _SELECT_ONE_EDITABLE, (scope_key, seq, record_id))
    if not found:
        return None
    candidate = await asyncio.to_thread(edit_candidate, found[0][1], text, typed_in)
    vector = None
    if embedder is not None and found[0][1].status == "active":  # off the loop, before the lock
        [vector] = await asyncio.to_thread(embedder.embed, [candidate.text])
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await fetch_rows(conn, _SELECT_ONE_EDITABLE + _LOCK_ROWS, (scope_key, seq, record_id))
        if not found:
            return None
        old = found[0][1]
        cursor = await conn.execute(_SUPERSEDE_EDITED, (scope_key, seq))
        retired = await cursor.fetchall()
        now = clock()
        if old.status == "active":  # a pending one was never counted
            await uncount(conn, scope_key, retired)
        else:  # never approved: its words go, the new version waits instead
            where = "scope_key = %s AND seq = %s"
            await erase_rows(conn, await scrub.of(conn), where, (scope_key, seq), "edited", now)
        cursor = await conn.execute(_MAX_SEQ_OF_SCOPE, {"scope": scope_key})
        new_seq = int(one(await cursor.fetchone())) + 1
        new = edited_record(old, new_seq, candidate, now)
        await _insert(conn, new_seq, new)
        if vector is not None and embedder is not None and new.status == "active":
            await conn.execute(_SET_VECTOR, (to_blob(vector), embedder.name, scope_key, new_seq))
        await append_entries(conn, [entry(old, "edited", actor, now, new.id)], log_cutoff(now))
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
    log_cutoff: LogCutoff,
) -> int:
    """One transaction under the scope's lock: the active duplicates' usage folded into the active
    survivor (`merged_survivor`), their text erased (reason `merged`), each merge logged; how many."""
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
        seq_of = {record.id: row_seq for row_seq, record in rows}
        folded = merged_survivor(survivor, duplicates)
        survivor_seq = seq_of[survivor.id]
        await conn.execute(
            _SET_MERGED_USAGE,
            (folded.use_count, folded.last_used_at, folded.observed_at, scope_key, survivor_seq),
        )
        added = folded.use_count - survivor.use_count
        await conn.execute(_ADD_MERGED_USAGE_ROW, (added, folded.last_used_at, scope_key, survivor_seq))
        now = clock()
        # Each duplicate's older versions go with it: forgetting the survivor could not reach them.
        chains = [(await walk(conn, d, {})).versions() for d in duplicates]
        doomed = sorted({s for c in chains for v in c if (s := own_seq(scope_key, v.id)) is not None})
        where = "scope_key = %s AND seq = ANY(%s)"
        await erase_rows(conn, await scrub.of(conn), where, (scope_key, doomed), "merged", now)
        entries = [entry(d, "merged", actor, now, survivor.id) for d in duplicates]
        await append_entries(conn, entries, log_cutoff(now))
    return len(duplicates)


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
    is active, the text of every version in its chain erased, reason `forgotten`."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute(_LOCK_SCOPE, (scope_key,))
        found = await find(conn, scope_key, seq, record_id, lock=True)
        if found is None or found[0].status != "active" or found[1].get(record_id) is not None:
            return False
        start, erased = found
        versions = (await walk(conn, start, erased)).versions()
        seqs = [own_seq(scope_key, v.id) for v in versions]
        where = "scope_key = %s AND seq = ANY(%s)"
        await erase_rows(conn, await scrub.of(conn), where, (scope_key, seqs), "forgotten", now)
    return True
