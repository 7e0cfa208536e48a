"""The ledger's two tables: which messages each run was distilled from (`memory_run_sources`, to erase
by source) and the read audit (`memory_read_audit`: ids and ranks only, never text)."""

from __future__ import annotations

import builtins

from psycopg_pool import AsyncConnectionPool

from memory.stores.postgres.rows import Connection
from memory.stores.postgres.sql import _INSERT_AUDIT, _LINK_SOURCE
from memory.stores.sql_common import AuditKey, audit_key, source_rows
from memory.types import (
    AuditQuery,
    ReadAudit,
    SourceLink,
)

# The audit rows an audit query asks for, by the key it asks by.
_AUDIT_WHERE: dict[AuditKey, str] = {
    "record": "record_ids @> ARRAY[%s]::text[]",
    "run": "run_id = %s",
    "user": "asker = %s",
    "thread": "thread_key = %s",
}
# Where erase_sources finds the rows of the runs linked to some messages.
SOURCES_WHERE = (
    "(scope_key, source_run_id) IN"
    " (SELECT scope_key, run_id FROM memory_run_sources WHERE message = ANY(%s::text[]))"
)


async def link_sources(pool: AsyncConnectionPool[Connection], link: SourceLink, now: float) -> None:
    async with pool.connection() as conn, conn.cursor() as cursor:
        await cursor.executemany(_LINK_SOURCE, source_rows(link, now))


async def record_read(pool: AsyncConnectionPool[Connection], entry: ReadAudit, cutoff: float) -> None:
    """The entry, in the transaction that drops the entries older than the audit's retention."""
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("DELETE FROM memory_read_audit WHERE at < %s", (cutoff,))
        await conn.execute(
            _INSERT_AUDIT,
            (
                entry.run_id,
                entry.thread_key,
                entry.asker,
                builtins.list(entry.scope_keys),
                [record_id for record_id, _ in entry.records],
                [rank for _, rank in entry.records],
                entry.at,
            ),
        )


async def read_audit(
    pool: AsyncConnectionPool[Connection], query: AuditQuery, cutoff: float
) -> builtins.list[ReadAudit]:
    key, value = audit_key(query)
    if key == "thread":
        value = value or ""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT run_id, thread_key, asker, scope_keys, record_ids, ranks, at"
            f" FROM memory_read_audit WHERE {_AUDIT_WHERE[key]} AND at >= %s"
            " ORDER BY at DESC, audit_id DESC LIMIT %s",
            (value, cutoff, query.limit),
        )
        rows = await cursor.fetchall()
    return [
        ReadAudit(
            run_id=row[0],
            thread_key=row[1],
            asker=row[2],
            scope_keys=tuple(row[3]),
            records=tuple(sorted(zip(row[4], row[5], strict=True), key=lambda pair: (pair[1], pair[0]))),
            at=float(row[6]),
        )
        for row in rows
    ]
