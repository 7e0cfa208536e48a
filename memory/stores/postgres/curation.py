"""The curation log (`memory_curation_log`: who approved, edited, rejected, merged or forgot which
record, when; never text), kept like the read audit for the audit's retention, and a record's chain
of versions gathered as `memory.rules.curation.ChainWalk` asks: its history, and the forget that
erases every version's text."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Final

from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from memory.rules.curation import ChainWalk, history_of
from memory.stores.postgres.erasure import ScrubList, erase_rows
from memory.stores.postgres.rows import Connection, own_seq, row_record
from memory.stores.postgres.sql import _COLUMN_COUNT, _COLUMNS, _LOCK_ROWS, _LOCK_SCOPE, _RECORDS
from memory.types import (
    CURATION_ACTIONS,
    ERASE_REASONS,
    CurationAction,
    CurationEntry,
    EraseReason,
    MemoryRecord,
    RecordVersion,
)

_ENTRY_COLUMNS: Final = "record_id, scope_key, action, actor, at, related_id"

_INSERT_ENTRY: Final = f"INSERT INTO memory_curation_log ({_ENTRY_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"

# Entries past the audit's retention, dropped by the next action that logs: SKIP LOCKED, so two
# scopes' transactions purging at once never wait on (or deadlock with) each other.
_PURGE_ENTRIES: Final = """
    DELETE FROM memory_curation_log WHERE entry_id IN
        (SELECT entry_id FROM memory_curation_log WHERE at < %s FOR UPDATE SKIP LOCKED)
"""

_SELECT_ENTRIES: Final = f"""
    SELECT {_ENTRY_COLUMNS} FROM memory_curation_log
    WHERE scope_key = %(scope)s AND (record_id = %(id)s OR related_id = %(id)s) AND at >= %(since)s
    ORDER BY at DESC, entry_id DESC LIMIT %(n)s
"""

_SELECT_CHAIN_ENTRIES: Final = f"""
    SELECT {_ENTRY_COLUMNS} FROM memory_curation_log
    WHERE scope_key = %s AND record_id = ANY(%s) AND at >= %s ORDER BY at, entry_id
"""

# The rows a chain walk asks for: by id (through the primary key's seq) and by the id they supersede.
_SELECT_LINKED: Final = f"""
    SELECT {_COLUMNS}, erased_reason FROM {_RECORDS}
    WHERE scope_key = %s AND ((seq = ANY(%s) AND id = ANY(%s)) OR supersedes = ANY(%s))
"""

_SELECT_ONE: Final = f"""
    SELECT {_COLUMNS}, erased_reason FROM {_RECORDS} WHERE scope_key = %s AND seq = %s AND id = %s
"""

_ACTIONS: Final[dict[str, CurationAction]] = {action: action for action in CURATION_ACTIONS}  # type: ignore[misc]
_REASONS: Final[dict[str, EraseReason]] = {reason: reason for reason in ERASE_REASONS}  # type: ignore[misc]

Erased = dict[str, EraseReason | None]


async def append_entries(conn: Connection, entries: Sequence[CurationEntry], cutoff: float) -> None:
    """Inside the action's transaction: its entries (one round trip), and those past the retention
    dropped."""
    if not entries:
        return
    await conn.execute(_PURGE_ENTRIES, (cutoff,))
    async with conn.cursor() as cursor:
        await cursor.executemany(
            _INSERT_ENTRY,
            [(e.record_id, e.scope_key, e.action, e.actor, e.at, e.related_id) for e in entries],
        )


def _entry_of(row: TupleRow) -> CurationEntry:
    record_id, scope_key, action, actor, at, related_id = row
    return CurationEntry(
        record_id=str(record_id),
        scope_key=str(scope_key),
        action=_ACTIONS[str(action)],
        actor=str(actor),
        at=float(at),
        related_id=None if related_id is None else str(related_id),
    )


async def read_log(
    conn: Connection, scope_key: str, record_id: str, limit: int, since: float
) -> builtins.list[CurationEntry]:
    """Entries naming the record as their record or their related one, newest first."""
    params = {"scope": scope_key, "id": record_id, "since": since, "n": limit}
    cursor = await conn.execute(_SELECT_ENTRIES, params)
    return [_entry_of(row) for row in await cursor.fetchall()]


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
    cursor = await conn.execute(_SELECT_CHAIN_ENTRIES, (scope_key, [v.id for v in versions], since))
    entries = [_entry_of(row) for row in await cursor.fetchall()]
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
