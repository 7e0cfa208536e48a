"""The ledger's two tables: which messages each run was distilled from (`memory_run_sources`, to erase
by source) and the read audit (`memory_read_audit`: ids and ranks only, never text)."""

from __future__ import annotations

import builtins

from psycopg_pool import AsyncConnectionPool

from memory.rules.person import PersonRename
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


# The read-audit entries naming a person (as asker, as a scope read, by one of their records' ids),
# renamed in place: the arrays keep their order, every other element as it was.
_RENAME_READS = """
    UPDATE memory_read_audit SET
        asker = CASE WHEN asker = %(user)s THEN %(pseudonym)s ELSE asker END,
        scope_keys = array_replace(scope_keys, %(key)s, %(pseudonym_key)s),
        record_ids = ARRAY(
            SELECT CASE WHEN left(r, length(%(prefix)s)) = %(prefix)s
                THEN %(pseudonym_prefix)s || substr(r, length(%(prefix)s) + 1) ELSE r END
            FROM unnest(record_ids) WITH ORDINALITY AS u(r, i) ORDER BY i
        )
    WHERE asker = %(user)s OR %(key)s = ANY(scope_keys)
        OR EXISTS (SELECT 1 FROM unnest(record_ids) AS r WHERE left(r, length(%(prefix)s)) = %(prefix)s)
"""


async def rename_person(pool: AsyncConnectionPool[Connection], rename: PersonRename) -> int:
    """In one transaction: the person's curation entries and read-audit entries (with the threads
    that were theirs alone) take the pseudonym, their scope's source links go (they found only
    records now erased); how many entries changed."""
    params = {
        "user": rename.user_id,
        "pseudonym": rename.pseudonym,
        "key": rename.person_key,
        "pseudonym_key": rename.pseudonym_key,
        "prefix": rename.record_prefix,
        "pseudonym_prefix": rename.pseudonym_record_prefix,
    }
    async with pool.connection() as conn, conn.transaction():
        entries = await conn.execute(
            "UPDATE memory_curation_log SET actor = %(pseudonym_key)s WHERE actor = %(key)s", params
        )
        asked = await conn.execute(
            "SELECT audit_id, thread_key FROM memory_read_audit WHERE asker = %(user)s", params
        )
        own_threads = [
            (renamed, audit_id)
            for audit_id, thread_key in await asked.fetchall()
            if (renamed := rename.thread(str(thread_key), rename.user_id)) != thread_key
        ]
        async with conn.cursor() as cursor:
            await cursor.executemany(
                "UPDATE memory_read_audit SET thread_key = %s WHERE audit_id = %s", own_threads
            )
        reads = await conn.execute(_RENAME_READS, params)
        await conn.execute("DELETE FROM memory_run_sources WHERE scope_key = %(key)s", params)
        return max(entries.rowcount, 0) + max(reads.rowcount, 0)
