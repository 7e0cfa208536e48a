"""The catch-up every read of a warm scope index makes (memory/stores/postgres/changes.py) against the
real server: it runs in a function that keeps one plan, is made on a database that lacks it, and
follows the record table's columns as they are added."""

from __future__ import annotations

from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import MemoryRecord
from tests.memory.postgres_support import TempSchema, schema_rows, unique_application_name
from tests.memory.records import fact

SCOPE = "org:acme"


def texts(records: list[MemoryRecord]) -> list[str]:
    return sorted(record.text for record in records)


async def catch_up_function(schema: TempSchema) -> list[tuple[object, ...]]:
    return await schema_rows(
        schema,
        "SELECT p.provolatile, p.proconfig FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        " WHERE p.proname = 'memory_changed_since_v1' AND n.nspname = %s",
        (schema.name,),
    )


async def test_the_catch_up_keeps_one_generic_plan_and_reads_with_the_callers_snapshot(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])

    [(volatility, config)] = await catch_up_function(schema)

    assert volatility == "s"  # STABLE: the calling statement's snapshot, so its xmin is the rows'
    assert isinstance(config, list)
    assert "plan_cache_mode=force_generic_plan" in config


async def test_a_database_without_the_catch_up_function_gets_it_when_a_replica_opens(
    schema: TempSchema,
) -> None:
    older = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
    await older.write(SCOPE, [fact("deploys run nightly")])
    await older.aclose()
    await schema_rows(schema, "DROP FUNCTION memory_changed_since_v1")  # as an older release left it

    first, second = (
        PostgresMemoryStore(schema.dsn, application_name=unique_application_name()) for _ in range(2)
    )
    try:
        assert texts(await second.retrieve(SCOPE, "deploys", 5)) == ["deploys run nightly"]  # warm
        await first.write(SCOPE, [fact("deploys need a ticket")])

        assert texts(await second.retrieve(SCOPE, "deploys", 5)) == [
            "deploys need a ticket",
            "deploys run nightly",
        ]
    finally:
        await first.aclose()
        await second.aclose()
    assert len(await catch_up_function(schema)) == 1


async def test_the_catch_up_follows_a_column_added_to_the_records_table(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, second = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])
    assert len(await second.retrieve(SCOPE, "deploys", 5)) == 1  # warm: its catch-up plan is made
    await schema_rows(schema, "ALTER TABLE memory_records ADD COLUMN reviewed_by text")

    await first.write(SCOPE, [fact("deploys need a ticket")])
    await first.forget(SCOPE, f"mem:{SCOPE}:1")

    assert texts(await second.retrieve(SCOPE, "deploys", 5)) == ["deploys need a ticket"]


async def test_an_array_agg_of_an_exact_type_on_the_search_path_does_not_replace_the_built_in(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    # What a role allowed to create objects in the store's schema could leave there: an aggregate that
    # the catch-up's tombstone list would otherwise resolve to (an exact type beats the built-in's).
    await schema_rows(
        schema, "CREATE FUNCTION keep(s bigint[], v bigint) RETURNS bigint[] LANGUAGE sql AS 'SELECT s'"
    )
    await schema_rows(
        schema, "CREATE AGGREGATE array_agg(bigint) (SFUNC = keep, STYPE = bigint[], INITCOND = '{}')"
    )
    first, second = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys need a ticket")])
    assert len(await second.retrieve(SCOPE, "deploys", 5)) == 2  # warm

    await schema_rows(schema, "DELETE FROM memory_records WHERE scope_key = %s AND seq = 1", (SCOPE,))

    assert texts(await second.retrieve(SCOPE, "deploys", 5)) == ["deploys need a ticket"]
