"""The change feed a replica's scope indexes follow: every row version is stamped, by a trigger, with
the id of the transaction that wrote it (`changed_xid`), whoever wrote it — this replica, another one,
an older release, a migration or an operator's UPDATE.

A replica that has read a scope's rows as of a snapshot whose oldest running transaction was `xmin`
has seen every change committed by a transaction older than `xmin`: any later change carries an id of
at least `xmin`. So its next catch-up reads the rows stamped `>= xmin` — leaving out the transactions it
has already read whole (`seen`), so a transaction held open elsewhere on the server does not make it
read the same rows again and again. A catch-up that would read more rows than `CATCH_UP_ROWS` reloads
the scope instead (in pages of `PAGE_ROWS`, so no one fetch decodes a whole scope on the event loop).
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from psycopg.rows import TupleRow

from memory.stores.postgres.rows import Connection
from memory.stores.postgres.sql import _COLUMNS

# Its own migration step (schema.apply_schema runs it after the main list): the stamp column, the
# trigger that fills it, the catch-up's index, and the eviction order's index.
CHANGE_SCHEMA: Final[tuple[str, ...]] = (
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS changed_xid xid8",
    """
    CREATE OR REPLACE FUNCTION memory_records_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.changed_xid := pg_current_xact_id();
        RETURN NEW;
    END
    $$
    """,
    "CREATE INDEX IF NOT EXISTS memory_records_changed ON memory_records (scope_key, changed_xid)",
    # Least recently used first (`memory.rules.engine.eviction_key`), ties by seq: the excess is the
    # index's first rows, so a write over the cap never reads the whole active set.
    "CREATE INDEX IF NOT EXISTS memory_records_eviction"
    " ON memory_records (scope_key, (COALESCE(last_used_at, created_at)), created_at, seq)"
    " WHERE status = 'active'",
)

# Made only when missing: CREATE OR REPLACE TRIGGER would lock the table on every replica's start.
_HAS_TRIGGER: Final = (
    "SELECT 1 FROM pg_trigger WHERE tgname = 'memory_records_stamp'"
    " AND tgrelid = to_regclass('memory_records')"
)
_MAKE_TRIGGER: Final = (
    "CREATE TRIGGER memory_records_stamp BEFORE INSERT OR UPDATE ON memory_records"
    " FOR EACH ROW EXECUTE FUNCTION memory_records_stamp()"
)

# What a scope index needs of a row, after the record's own columns.
_INDEX_COLUMNS: Final = f"{_COLUMNS}, stems, embedding, embedding_model, changed_xid"
# The statement's own snapshot: every transaction older than its xmin had finished before it ran.
_XMIN: Final = "pg_snapshot_xmin(pg_current_snapshot())"

_SELECT_ACTIVE_PAGE: Final = f"""
    SELECT {_INDEX_COLUMNS}, {_XMIN} FROM memory_records
    WHERE scope_key = %s AND status = 'active' AND seq > %s ORDER BY seq LIMIT %s
"""

# The snapshot's xmin comes back even when no row changed (the LEFT JOIN's one row of NULLs).
_SELECT_CHANGED: Final = f"""
    SELECT {", ".join(f"m.{c.strip()}" for c in _INDEX_COLUMNS.split(","))}, {_XMIN}
    FROM (SELECT 1) AS one LEFT JOIN LATERAL (
        SELECT * FROM memory_records
        WHERE scope_key = %s AND changed_xid >= %s::text::xid8
            AND changed_xid <> ALL(%s::text[]::xid8[])
        LIMIT %s
    ) AS m ON true
"""

# A scope's held-back usage bumps (memory/stores/usage_bumps.py) in one statement, by primary key; the
# later of two uses wins (another replica's may be newer). The rows come back as the bump left them.
WRITE_BUMPS: Final = f"""
    UPDATE memory_records AS m
    SET last_used_at = GREATEST(m.last_used_at, b.used_at), use_count = m.use_count + b.uses
    FROM unnest(%s::bigint[], %s::int[], %s::float8[]) AS b (seq, uses, used_at)
    WHERE m.scope_key = %s AND m.seq = b.seq AND m.status = 'active'
    RETURNING {", ".join(f"m.{c.strip()}" for c in _INDEX_COLUMNS.split(","))}
"""

PAGE_ROWS: Final = 1000
CATCH_UP_ROWS: Final = 2000


async def make_trigger(conn: Connection) -> None:
    """Inside the schema transaction: the stamping trigger, once."""
    for statement in CHANGE_SCHEMA:
        await conn.execute(statement)
    cursor = await conn.execute(_HAS_TRIGGER)
    if await cursor.fetchone() is None:
        await conn.execute(_MAKE_TRIGGER)


@dataclass(frozen=True, slots=True)
class Changes:
    """Rows read for a scope index (each `_INDEX_COLUMNS`), and the snapshot's xmin they are as of.
    `full`: the scope's whole active set (load it afresh); else the rows changed since the index's."""

    rows: builtins.list[TupleRow]
    xmin: int
    full: bool


async def read_all(conn: Connection, scope_key: str) -> Changes:
    """The scope's active rows, a page per statement. The pages are different snapshots: the first
    one's xmin is what the whole read is as of, and a row changed between pages is read again by the
    next catch-up (its stamp is at least that xmin)."""
    rows: builtins.list[TupleRow] = []
    xmin: int | None = None
    after = 0
    while True:
        cursor = await conn.execute(_SELECT_ACTIVE_PAGE, (scope_key, after, PAGE_ROWS))
        page = await cursor.fetchall()
        if not page:
            break
        if xmin is None:
            xmin = int(page[0][-1])
        rows.extend(row[:-1] for row in page)
        after = int(page[-1][0])
        if len(page) < PAGE_ROWS:
            break
    if xmin is None:  # an empty scope: the xmin of a statement that reads no row
        cursor = await conn.execute(_SELECT_CHANGED, (scope_key, "0", [], 0))
        xmin = int(_xmin_of(await cursor.fetchall()))
    return Changes(rows, xmin, full=True)


# Where a kept scope index stands: the xmin it is as of, and the transactions since then it read whole.
Since = tuple[int, Collection[int]]


async def read_many(conn: Connection, wanted: Sequence[tuple[str, Since | None]]) -> dict[str, Changes]:
    """Each scope's rows changed since where its index stands (one round trip for all of them), or
    the whole scope when it has none or more than `CATCH_UP_ROWS` rows changed."""
    behind = [(key, since) for key, since in wanted if since is not None]
    found: dict[str, Changes] = {}
    cursors = []
    if len(behind) == 1:
        key, since = behind[0]
        cursors.append((key, await conn.execute(_SELECT_CHANGED, _changed_params(key, since))))
    elif behind:
        async with conn.pipeline():
            for key, since in behind:
                cursors.append((key, await conn.execute(_SELECT_CHANGED, _changed_params(key, since))))
    for key, cursor in cursors:
        rows = await cursor.fetchall()
        changed = [row[:-1] for row in rows if row[0] is not None]
        if len(changed) <= CATCH_UP_ROWS:
            found[key] = Changes(changed, _xmin_of(rows), full=False)
    for key, _ in wanted:
        if key not in found:
            found[key] = await read_all(conn, key)
    return {key: found[key] for key, _ in wanted}


def _changed_params(scope_key: str, since: Since) -> tuple[object, ...]:
    xmin, seen = since
    return (scope_key, str(xmin), [str(xid) for xid in seen], CATCH_UP_ROWS + 1)


def _xmin_of(found: builtins.list[TupleRow]) -> int:
    return int(found[0][-1])
