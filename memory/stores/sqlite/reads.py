"""A scope's plain reads: `list` (newest first, optionally through the FTS prefilter), `fetch` by id, and
the curation reads (`pending`, `active_records`). None bumps usage; only `pending` sees a pending row."""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Sequence

from memory.rules.engine import (
    matches_filter,
)
from memory.stores.sqlite.sql import COLUMNS, NO_CUTOFF, R_COLUMNS, fts_match_query, placeholders, row_record
from memory.types import (
    MemoryRecord,
)


def list_records(
    connection: sqlite3.Connection, limit: int, query: str | None, cutoff: float | None = None
) -> builtins.list[MemoryRecord]:
    if query is None:
        rows = connection.execute(
            f"SELECT {COLUMNS} FROM records WHERE status = 'active' AND created_at >= ? "
            "ORDER BY seq DESC LIMIT ?",
            (NO_CUTOFF if cutoff is None else cutoff, limit),
        ).fetchall()
        return [row_record(row) for row in rows]
    match = fts_match_query(query)
    if match is None:
        return []
    cursor = connection.execute(
        f"SELECT {R_COLUMNS} FROM records_fts AS f JOIN records AS r ON r.seq = f.rowid "
        "WHERE records_fts MATCH ? AND r.status = 'active' ORDER BY r.seq DESC",
        (match,),
    )
    found: builtins.list[MemoryRecord] = []
    for row in cursor:  # the whole-token gate, then the limit
        record = row_record(row)
        if matches_filter(record, query) and (cutoff is None or record.created_at >= cutoff):
            found.append(record)
            if len(found) >= limit:
                break
    cursor.close()
    return found


def fetch_records(
    connection: sqlite3.Connection, ids: Sequence[str], cutoff: float | None
) -> builtins.list[MemoryRecord]:
    rows = connection.execute(
        f"SELECT {COLUMNS} FROM records WHERE erased_at IS NULL AND status != 'pending' "
        f"AND created_at >= ? AND id IN ({placeholders(len(ids))}) "
        "ORDER BY seq",
        (NO_CUTOFF if cutoff is None else cutoff, *ids),
    ).fetchall()
    return [row_record(row) for row in rows]


def status_records(
    connection: sqlite3.Connection, status: str, cutoff: float | None, *, newest_first: bool, limit: int = -1
) -> builtins.list[MemoryRecord]:
    """The unexpired rows in one status (`pending` for the review queue, `active` for consolidation)."""
    order = "DESC" if newest_first else "ASC"
    rows = connection.execute(
        f"SELECT {COLUMNS} FROM records WHERE status = ? AND erased_at IS NULL AND created_at >= ? "
        f"ORDER BY seq {order} LIMIT ?",
        (status, NO_CUTOFF if cutoff is None else cutoff, limit),
    ).fetchall()
    return [row_record(row) for row in rows]
