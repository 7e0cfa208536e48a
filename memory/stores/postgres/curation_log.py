"""The curation log (`memory_curation_log`: who approved, edited, rejected, merged or forgot which
record, when; never text), kept like the read audit for the audit's retention."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Final

from memory.stores.postgres.rows import Connection
from memory.stores.sql_common import curation_entry
from memory.types import (
    CurationEntry,
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


async def read_log(
    conn: Connection, scope_key: str, record_id: str, limit: int, since: float
) -> builtins.list[CurationEntry]:
    """Entries naming the record as their record or their related one, newest first."""
    params = {"scope": scope_key, "id": record_id, "since": since, "n": limit}
    cursor = await conn.execute(_SELECT_ENTRIES, params)
    return [curation_entry(row) for row in await cursor.fetchall()]


async def of_records(
    conn: Connection, scope_key: str, record_ids: Sequence[str], since: float
) -> builtins.list[CurationEntry]:
    """Entries naming these records as their record, oldest first (a history's)."""
    cursor = await conn.execute(_SELECT_CHAIN_ENTRIES, (scope_key, builtins.list(record_ids), since))
    return [curation_entry(row) for row in await cursor.fetchall()]
