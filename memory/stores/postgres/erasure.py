"""Erasure in place: the not-yet-erased rows matching a filter keep their identity, scope, origin,
provenance, dates, status and reason; every other column — text, norm, keywords, tokens, and whatever
later columns hold (a vector) — is scrubbed (`memory.stores.sql_common.scrub_assignments`)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence

from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from memory.rules.retention import Retention
from memory.stores.postgres.rows import Connection
from memory.stores.postgres.terms import uncount
from memory.stores.sql_common import scrub_assignments
from memory.types import (
    EraseReason,
)


async def erase_rows(
    conn: Connection, scrub: str, where: str, params: Sequence[object], reason: EraseReason, now: float
) -> int:
    """Inside a transaction: scrub the not-yet-erased rows matching `where` in place; how many."""
    return len(await erased_rows(conn, scrub, where, params, reason, now))


async def erased_rows(
    conn: Connection, scrub: str, where: str, params: Sequence[object], reason: EraseReason, now: float
) -> builtins.list[tuple[str, str]]:
    """Inside a transaction: scrub the not-yet-erased rows matching `where` in place, and name them
    (scope key, id). An active or pending row becomes `forgotten`; an active one leaves its scope's
    document frequencies (a stem nobody holds is dropped) — a pending one was never counted. Rows
    are locked in key order, so two erasures meeting on the same rows (the expiry of every scope's
    pending records and one scope's write expiring its oldest) wait for each other, never deadlock."""
    cursor = await conn.execute(
        "WITH doomed AS (SELECT scope_key, seq, stems, status FROM memory_records"
        f" WHERE erased_at IS NULL AND ({where}) ORDER BY scope_key, seq FOR UPDATE)"
        f" UPDATE memory_records AS m SET {scrub}, erased_reason = %s, erased_at = %s,"
        " status = CASE WHEN m.status IN ('active', 'pending') THEN 'forgotten' ELSE m.status END"
        " FROM doomed WHERE m.scope_key = doomed.scope_key AND m.seq = doomed.seq"
        " RETURNING doomed.scope_key, doomed.stems, doomed.status, m.id",
        (*params, reason, now),
    )
    rows = await cursor.fetchall()
    retired: dict[str, builtins.list[TupleRow]] = {}
    for scope_key, stems, status, _ in rows:
        if status == "active":
            retired.setdefault(scope_key, []).append((stems,))
    for scope_key, stems in retired.items():
        await uncount(conn, scope_key, stems)
    if retired:
        await conn.execute(
            "DELETE FROM memory_term_df WHERE scope_key = ANY(%s::text[]) AND df <= 0 AND term <> ''",
            (builtins.list(retired),),
        )
    return [(str(scope_key), str(record_id)) for scope_key, _, _, record_id in rows]


async def live_scrub(conn: Connection) -> str:
    """The scrub list of the live table's columns (a generated column follows what it is made of)."""
    cursor = await conn.execute(
        "SELECT column_name, is_nullable, column_default, is_generated FROM information_schema.columns"
        " WHERE table_name = 'memory_records' AND table_schema = current_schema() ORDER BY ordinal_position"
    )
    return scrub_assignments(
        (str(name), nullable == "YES", None if default is None else str(default))
        for name, nullable, default, generated in await cursor.fetchall()
        if generated != "ALWAYS"
    )


# The records table's shape in two numbers: its highest column number (never reused, so any column
# added raises it) and how many columns it has now (a column dropped lowers it). One catalogue lookup.
_SHAPE = (
    "SELECT max(attnum), count(*) FILTER (WHERE NOT attisdropped) FROM pg_attribute"
    " WHERE attrelid = 'memory_records'::regclass AND attnum > 0"
)
_HOLD_SHAPE = "LOCK TABLE ONLY memory_records IN ROW EXCLUSIVE MODE"


class ScrubList:
    """The erase's SET list, read from the live table's columns, and read again whenever the table's
    shape has changed since: in a rolling upgrade a newer replica adds a column, and this replica's
    next erasure scrubs it too. Erasures are rare; each costs one catalogue lookup more."""

    def __init__(self) -> None:
        self._assignments: str | None = None
        self._shape: tuple[object, ...] | None = None

    async def of(self, conn: Connection) -> str:
        """Inside the erasure's transaction: the lock its UPDATE takes anyway, taken first, so no column
        is added (that needs the table's exclusive lock) between this lookup and the UPDATE."""
        await conn.execute(_HOLD_SHAPE)
        cursor = await conn.execute(_SHAPE)
        shape = tuple(await cursor.fetchone() or ())
        if self._assignments is None or shape != self._shape:
            self._assignments = await live_scrub(conn)
            self._shape = shape
        return self._assignments


async def erase(
    pool: AsyncConnectionPool[Connection],
    scrub: ScrubList,
    where: str,
    params: Sequence[object],
    reason: EraseReason,
    now: Callable[[], float],
) -> int:
    """One transaction: `erase_rows` over the rows matching `where`."""
    async with pool.connection() as conn, conn.transaction():
        return await erase_rows(conn, await scrub.of(conn), where, params, reason, now())


def expiry_filters(retention: Retention, now: float) -> builtins.list[tuple[str, tuple[object, ...]]]:
    """The WHERE clauses (with their parameters) of what retention has expired by `now`: the configured
    ttl for every scope but those with their own, then each of those."""
    own = builtins.list(retention.scope_ttl_days)
    filters: builtins.list[tuple[str, tuple[object, ...]]] = []
    if retention.ttl_days is not None:
        default_cutoff = now - retention.ttl_days * 86_400.0
        filters.append(("created_at < %s AND NOT (scope_key = ANY(%s::text[]))", (default_cutoff, own)))
    for scope_key in own:
        cutoff = retention.cutoff(scope_key, now)
        if cutoff is not None:
            filters.append(("scope_key = %s AND created_at < %s", (scope_key, cutoff)))
    return filters
