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


async def written_by_a_replica(schema: TempSchema, text: str | None = None) -> None:
    """A replica opens on the schema (making or updating it), writes `text` if given, and closes."""
    store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
    try:
        await store.open()
        if text is not None:
            await store.write(SCOPE, [fact(text)])
    finally:
        await store.aclose()


async def test_a_replica_opens_beside_an_open_write_without_waiting_for_it(schema: TempSchema) -> None:
    await written_by_a_replica(schema, "deploys run nightly")
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
    await written_by_a_replica(schema, "deploys run nightly")
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


async def functions(schema: TempSchema) -> dict[str, tuple[str, str]]:
    """Each of the store's functions in the schema: its row version (xmin) and its body."""
    rows = await schema_rows(
        schema,
        "SELECT p.proname, p.xmin::text, p.prosrc FROM pg_proc AS p"
        " JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s",
        (schema.name,),
    )
    return {str(name): (str(version), str(body)) for name, version, body in rows}


async def test_a_replica_opening_on_the_current_schema_leaves_the_functions_as_they_are(
    schema: TempSchema,
) -> None:
    await written_by_a_replica(schema, "deploys run nightly")
    before = await functions(schema)
    assert set(before) >= {"memory_records_track", "memory_records_stamp", "memory_changed_since_v1"}

    await written_by_a_replica(schema, "deploys need a ticket")

    assert await functions(schema) == before  # not written again: every session keeps its plans


async def test_a_function_changed_since_is_defined_again_when_a_replica_opens(schema: TempSchema) -> None:
    await written_by_a_replica(schema, "deploys run nightly")
    ours = (await functions(schema))["memory_records_stamp"][1]
    # As an older release's replica starting during a rolling upgrade would leave it.
    await schema_rows(
        schema,
        "CREATE OR REPLACE FUNCTION memory_records_stamp() RETURNS trigger LANGUAGE plpgsql"
        " AS $$ BEGIN RETURN NEW; END $$",
    )

    await written_by_a_replica(schema)

    assert (await functions(schema))["memory_records_stamp"][1] == ours
