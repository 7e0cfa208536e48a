"""The records split by scope into partitions: a compaction rewrites, and locks, only the partitions that
held an erased record's bytes; a database an earlier release made keeps its one table."""

from __future__ import annotations

import asyncio
import time

import psycopg

from memory.stores.postgres.partitions import PARTITIONS
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import CompactionReport
from tests.memory.postgres_support import TempSchema, relations_holding, schema_rows, unique_application_name
from tests.memory.records import fact

ERASED = "quorvexil"
KEPT = "marzipank"

# The table as an earlier release made it (its later columns are added by the open).
_EARLIER_TABLE = """
    CREATE TABLE memory_records (
        scope_key text NOT NULL, seq bigint NOT NULL, id text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('fact', 'summary')), text text NOT NULL, norm text NOT NULL,
        keywords text[] NOT NULL DEFAULT '{}', tokens text[] NOT NULL DEFAULT '{}',
        source_thread_key text NOT NULL, source_run_id text, created_at double precision NOT NULL,
        last_used_at double precision, use_count integer NOT NULL DEFAULT 0, confidence double precision,
        supersedes text, status text NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted')),
        tsv tsvector GENERATED ALWAYS AS (array_to_tsvector(tokens)) STORED,
        PRIMARY KEY (scope_key, seq)
    )
"""


def store_of(schema: TempSchema) -> PostgresMemoryStore:
    return PostgresMemoryStore(schema.dsn, application_name=unique_application_name())


async def partition_of(schema: TempSchema, scope_key: str) -> str:
    rows = await schema_rows(
        schema,
        "SELECT DISTINCT tableoid::regclass::text FROM memory_records WHERE scope_key = %s",
        (scope_key,),
    )
    assert len(rows) == 1
    return str(rows[0][0])


async def two_scopes_apart(store: PostgresMemoryStore, schema: TempSchema) -> tuple[str, str]:
    """Two scopes with a record each, in different partitions."""
    first = "org:acme"
    await store.write(first, [fact(f"the {KEPT} runbook lives in the wiki")])
    for index in range(PARTITIONS):
        other = f"channel:C{index:04d}"
        await store.write(other, [fact(f"the {KEPT} rota is on the board")])
        if await partition_of(schema, other) != await partition_of(schema, first):
            return first, other
    raise AssertionError("no second partition")


async def erased_beside_another(store: PostgresMemoryStore, schema: TempSchema) -> tuple[str, str]:
    """Two scopes in different partitions, a record forgotten in the first."""
    erasing, other = await two_scopes_apart(store, schema)
    await store.write(erasing, [fact(f"the {ERASED} vault opens at noon")])
    written = await store.list(erasing, 10)
    assert await store.forget(erasing, next(r.id for r in written if ERASED in r.text)) is True
    return erasing, other


async def compacted(
    store: PostgresMemoryStore, schema: TempSchema, within: float = 30
) -> list[CompactionReport]:
    """The store's compactions until the erased word has left the files: another session on a shared
    server may hold a snapshot that keeps the old version through a rewrite (the next one rewrites it)."""
    reports = [await store.compact()]
    deadline = time.monotonic() + within
    while relations_holding(schema.name, ERASED) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        reports.append(await store.compact())
    assert relations_holding(schema.name, ERASED) == set()
    return reports


async def test_a_new_database_keeps_its_records_in_partitions_by_scope(schema: TempSchema) -> None:
    store = store_of(schema)
    try:
        await store.open()
        kind = await schema_rows(
            schema, "SELECT relkind::text FROM pg_class WHERE oid = 'memory_records'::regclass"
        )
        count = await schema_rows(
            schema, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'memory_records'::regclass"
        )
        assert (kind, count) == ([("p",)], [(PARTITIONS,)])
    finally:
        await store.aclose()


async def test_a_compaction_rewrites_only_the_partition_that_held_the_erasure(schema: TempSchema) -> None:
    store = store_of(schema)
    try:
        erasing, other = await erased_beside_another(store, schema)

        reports = await compacted(store, schema)

        rewritten = {
            t.table for report in reports for t in report.tables if t.table.startswith("memory_records")
        }
        assert rewritten == {await partition_of(schema, erasing)}
        assert await partition_of(schema, other) != await partition_of(schema, erasing)
    finally:
        await store.aclose()


async def test_a_write_to_another_partition_does_not_wait_for_a_rewrite(schema: TempSchema) -> None:
    store = store_of(schema)
    try:
        erasing, other = await erased_beside_another(store, schema)
        async with await psycopg.AsyncConnection.connect(schema.dsn) as reader:
            # Holds the erasing scope's partition in its transaction: the rewrite's lock waits, queued.
            await reader.execute("SELECT count(*) FROM memory_records WHERE scope_key = %s", (erasing,))
            compaction = asyncio.create_task(store.compact())
            await asyncio.sleep(0.5)
            assert not compaction.done()
            # A write of a scope in another partition goes through while the rewrite is queued.
            await asyncio.wait_for(store.write(other, [fact("the lobby plant needs water")]), timeout=1.5)
            await reader.rollback()
        await compaction
    finally:
        await store.aclose()


async def test_a_database_an_earlier_release_made_keeps_one_table_and_is_compacted_whole(
    schema: TempSchema,
) -> None:
    async with await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn:
        await conn.execute(_EARLIER_TABLE)
    store = store_of(schema)
    try:
        await store.write("org:acme", [fact(f"the {KEPT} runbook lives in the wiki")])
        await store.write("org:acme", [fact(f"the {ERASED} vault opens at noon")])
        assert await store.forget("org:acme", "mem:org:acme:2") is True

        reports = await compacted(store, schema)

        kind = await schema_rows(
            schema, "SELECT relkind::text FROM pg_class WHERE oid = 'memory_records'::regclass"
        )
        assert kind == [("r",)]
        assert all("memory_records" in {table.table for table in report.tables} for report in reports)
        assert "memory_records" in relations_holding(schema.name, KEPT)
    finally:
        await store.aclose()


async def test_a_record_moved_by_hand_to_a_scope_in_another_partition_keeps_its_usage_and_tombstone(
    schema: TempSchema,
) -> None:
    store = store_of(schema)
    try:
        first, other = await two_scopes_apart(store, schema)
        moved_to, was_in = f"{other}-moved", await partition_of(schema, first)
        await schema_rows(
            schema,
            "UPDATE memory_records SET scope_key = %s, seq = 99 WHERE scope_key = %s",
            (moved_to, first),
        )
        usage = await schema_rows(schema, "SELECT scope_key, seq FROM memory_usage WHERE seq = 99")
        deleted = await schema_rows(schema, "SELECT scope_key, seq FROM memory_deleted")
        assert await partition_of(schema, moved_to) != was_in
        assert (usage, deleted) == ([(moved_to, 99)], [(first, 1)])
    finally:
        await store.aclose()
