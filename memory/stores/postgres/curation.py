"""The curation log (`memory_curation_log`: who approved, edited, rejected, merged or forgot which
record, when; never text) and a record's chain of versions, walked both ways along `supersedes`:
its history, and the forget that erases every version's text."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Final, get_args

from psycopg.rows import TupleRow

from memory.stores.postgres.erasure import erase_rows
from memory.stores.postgres.rows import Connection
from memory.stores.postgres.sql import _LOCK_SCOPE
from memory.stores.sql_common import _STATUSES
from memory.types import (
    CurationAction,
    CurationEntry,
    EraseReason,
    RecordVersion,
)

_INSERT_ENTRY: Final = """
    INSERT INTO memory_curation_log (record_id, scope_key, action, actor, at, related_id)
    VALUES (%s, %s, %s, %s, %s, %s)
"""

_SELECT_ENTRIES: Final = """
    SELECT record_id, scope_key, action, actor, at, related_id FROM memory_curation_log
    WHERE scope_key = %(scope)s AND (record_id = %(id)s OR related_id = %(id)s)
    ORDER BY at DESC, entry_id DESC LIMIT %(n)s
"""

_SELECT_CHAIN_ENTRIES: Final = """
    SELECT record_id, scope_key, action, actor, at, related_id FROM memory_curation_log
    WHERE scope_key = %s AND record_id = ANY(%s) ORDER BY at, entry_id
"""

# Every version linked to the record by `supersedes`, either way (UNION: a cycle ends the walk). An
# older version is found by its seq, the id's last part: the primary key, not a scan of the scope.
_CHAIN: Final = """
    WITH RECURSIVE chain (id, supersedes) AS (
        SELECT id, supersedes FROM memory_records
        WHERE scope_key = %(scope)s AND seq = %(seq)s AND id = %(id)s
        UNION
        SELECT m.id, m.supersedes FROM memory_records AS m JOIN chain AS c
            ON (m.supersedes = c.id)
            OR (m.seq = substring(c.supersedes FROM ':([0-9]{1,18})$')::bigint AND m.id = c.supersedes)
        WHERE m.scope_key = %(scope)s
    )
    SELECT id FROM chain
"""

_SELECT_VERSIONS: Final = """
    SELECT id, scope_key, status, created_at, text, source_run_id, erased_reason, erased_at
    FROM memory_records WHERE scope_key = %s AND id = ANY(%s) ORDER BY seq
"""

_SELECT_ACTIVE_FOR_UPDATE: Final = """
    SELECT id FROM memory_records WHERE scope_key = %s AND seq = %s AND id = %s AND status = 'active'
    FOR UPDATE
"""

_ACTIONS: Final[dict[str, CurationAction]] = {action: action for action in get_args(CurationAction)}
_REASONS: Final[dict[str, EraseReason]] = {reason: reason for reason in get_args(EraseReason)}


def reflection_actor(source_run_id: str | None) -> str:
    """Who a reflected write acts as: its run, or `reflection` when it names none."""
    return f"run:{source_run_id}" if source_run_id else "reflection"


def entry(
    scope_key: str,
    record_id: str,
    action: CurationAction,
    actor: str,
    at: float,
    related_id: str | None = None,
) -> CurationEntry:
    return CurationEntry(
        record_id=record_id, scope_key=scope_key, action=action, actor=actor, at=at, related_id=related_id
    )


async def append_entries(conn: Connection, entries: Sequence[CurationEntry]) -> None:
    """Inside the action's transaction: its entries, one round trip."""
    if not entries:
        return
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
    conn: Connection, scope_key: str, record_id: str, limit: int
) -> builtins.list[CurationEntry]:
    cursor = await conn.execute(_SELECT_ENTRIES, {"scope": scope_key, "id": record_id, "n": limit})
    return [_entry_of(row) for row in await cursor.fetchall()]


async def chain_ids(conn: Connection, scope_key: str, seq: int, record_id: str) -> builtins.list[str]:
    """The ids of every version in the record's chain (the record's own first, if it exists)."""
    cursor = await conn.execute(_CHAIN, {"scope": scope_key, "seq": seq, "id": record_id})
    return [str(row[0]) for row in await cursor.fetchall()]


async def read_history(
    conn: Connection, scope_key: str, seq: int, record_id: str
) -> builtins.list[RecordVersion]:
    """Every version of the chain, oldest first, each with the entries naming it as `record_id`."""
    ids = await chain_ids(conn, scope_key, seq, record_id)
    if not ids:
        return []
    cursor = await conn.execute(_SELECT_CHAIN_ENTRIES, (scope_key, ids))
    by_record: dict[str, builtins.list[CurationEntry]] = {}
    for row in await cursor.fetchall():
        found = _entry_of(row)
        by_record.setdefault(found.record_id, []).append(found)
    cursor = await conn.execute(_SELECT_VERSIONS, (scope_key, ids))
    versions = []
    for version_id, scope, status, created_at, text, run_id, reason, erased_at in await cursor.fetchall():
        versions.append(
            RecordVersion(
                id=str(version_id),
                scope_key=str(scope),
                status=_STATUSES[str(status)],
                created_at=float(created_at),
                text=None if erased_at is not None else str(text),
                source_run_id=None if run_id is None else str(run_id),
                erased_reason=None if reason is None else _REASONS[str(reason)],
                entries=tuple(by_record.get(str(version_id), ())),
            )
        )
    return versions


async def forget_chain(
    conn: Connection, scrub: str, scope_key: str, seq: int, record_id: str, now: float
) -> bool:
    """Inside a transaction, under the scope's lock (no edit can add a version meanwhile): when the
    record is active, erase the text of every version in its chain, reason `forgotten`."""
    await conn.execute(_LOCK_SCOPE, (scope_key,))
    cursor = await conn.execute(_SELECT_ACTIVE_FOR_UPDATE, (scope_key, seq, record_id))
    if await cursor.fetchone() is None:
        return False
    ids = await chain_ids(conn, scope_key, seq, record_id)
    await erase_rows(conn, scrub, "scope_key = %s AND id = ANY(%s)", (scope_key, ids), "forgotten", now)
    return True
