"""A replica opening on a database of the current schema (memory/stores/postgres/ddl.py) against the real
server: it only reads the catalogue, so it never waits on a writer, and a writer never waits on it.
Before, its `ADD COLUMN IF NOT EXISTS` and `CREATE INDEX IF NOT EXISTS` took their table locks anyway,
and replicas starting beside writes ended in "deadlock detected"."""

from __future__ import annotations

import asyncio

import psycopg
from psycopg.conninfo import make_conninfo

from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import BASE_DSN, TempSchema, schema_rows, unique_application_name
from tests.memory.records import fact

SCOPE = "org:acme"


async def test_a_replica_opens_beside_an_open_write_without_waiting_for_it(schema: TempSchema) -> None:
    first = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
    try:
        await first.write(SCOPE, [fact("deploys run nightly")])
    finally:
        await first.aclose()
    # A second's wait for any lock fails the open instead of hanging the test.
    impatient = make_conninfo(BASE_DSN, options=f"-csearch_path={schema.name} -clock_timeout=2000")
    async with await psycopg.AsyncConnection.connect(schema.dsn) as writer:
        # A write under way: it holds the records' and the usage rows' write locks until it ends.
        await writer.execute("UPDATE memory_records SET use_count = use_count WHERE seq = 1")
        await writer.execute("UPDATE memory_usage SET uses = uses WHERE seq = 1")
        second = PostgresMemoryStore(impatient, application_name=unique_application_name())
        try:
            await second.open()
            assert [r.text for r in await second.retrieve(SCOPE, "deploys", 5)] == ["deploys run nightly"]
        finally:
            await writer.rollback()  # first: the read's use is written when the replica closes
            await second.aclose()


async def test_a_replica_adding_indexes_gives_way_to_a_write_it_would_deadlock_with(
    schema: TempSchema,
) -> None:
    first = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
    try:
        await first.write(SCOPE, [fact("deploys run nightly")])
    finally:
        await first.aclose()
    await schema_rows(schema, "DROP INDEX memory_usage_eviction")  # as a release before them left it
    await schema_rows(schema, "DROP INDEX memory_records_pending")
    async with await psycopg.AsyncConnection.connect(schema.dsn) as writer:
        await writer.execute("UPDATE memory_records SET use_count = use_count WHERE seq = 1")
        second = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
        try:
            opening = asyncio.create_task(second.open())
            await asyncio.sleep(0.5)  # the open has the usage table's lock and waits for the records'
            # The write goes on to the usage row: the open gives way within its lock wait, so the
            # write never fails.
            await writer.execute("UPDATE memory_usage SET uses = uses WHERE seq = 1")
            await writer.commit()
            await opening
        finally:
            await second.aclose()
    indexes = await schema_rows(
        schema,
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s"
        " AND indexname IN ('memory_usage_eviction', 'memory_records_pending') ORDER BY 1",
        (schema.name,),
    )
    assert indexes == [("memory_records_pending",), ("memory_usage_eviction",)]
