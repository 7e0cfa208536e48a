"""A person's erasure on PostgreSQL: no value of any table of the store's schema names them (every
column read as text), their scope lives on under the pseudonym, and after the compaction no heap page
of the schema (live or dead versions, TOAST) holds their id either."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg import sql

from commands.erase_person import erase_person
from memory.stores.contract import CompactingStore
from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import admin_connect, temp_schema, unique_application_name
from tests.memory.store_contract import fact, rid
from tests.memory.stores.test_erasure import pageinspect  # noqa: F401  (the fixture)
from tests.memory.stores.test_sqlite_person import ALICE, BOB, ORG, bob_everywhere

pytestmark = pytest.mark.usefixtures("pageinspect")

Conn = psycopg.Connection[tuple[object, ...]]
NEEDLE = "ubob"  # in the person's id and key, in no one else's


def naming_values(conn: Conn, schema: str) -> list[str]:
    """`table.column` for every value of the schema's tables whose text holds the person's id."""
    columns = conn.execute(
        "SELECT c.table_name, c.column_name FROM information_schema.columns AS c"
        " JOIN information_schema.tables AS t USING (table_schema, table_name)"
        " WHERE c.table_schema = %s AND t.table_type = 'BASE TABLE' ORDER BY 1, 2",
        (schema,),
    ).fetchall()
    found = []
    for table, column in columns:
        query = sql.SQL("SELECT count(*) FROM {}.{} WHERE lower({}::text) LIKE %s").format(
            sql.Identifier(schema),
            sql.Identifier(str(table)),
            sql.Identifier(str(column)),
        )
        row = conn.execute(query, (f"%{NEEDLE}%",)).fetchone()
        if row is not None and row[0]:
            found.append(f"{table}.{column}")
    return found


def naming_pages(conn: Conn, schema: str) -> list[str]:
    """Every heap relation of the schema (tables, partitions, TOAST) with a tuple, live or dead, whose
    raw bytes hold the person's id."""
    relations = conn.execute(
        "SELECT c.oid::regclass::text FROM pg_class AS c WHERE c.relkind IN ('r', 't') AND"
        " (c.relnamespace = %s::regnamespace OR c.oid IN (SELECT reltoastrelid FROM pg_class"
        "  WHERE relnamespace = %s::regnamespace))",
        (schema, schema),
    ).fetchall()
    found = []
    for (relation,) in relations:
        pages = conn.execute(
            "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int", (relation,)
        ).fetchone()
        for page in range(int(str(pages[0] if pages else 0))):
            items = conn.execute(
                "SELECT t_data FROM heap_page_items(get_raw_page(%s, %s))", (relation, page)
            ).fetchall()
            if any(isinstance(data, bytes) and NEEDLE.encode() in data.lower() for (data,) in items):
                found.append(str(relation))
                break
    return found


async def pages_after_compacting(compaction: CompactingStore, schema: str) -> list[str]:
    """`naming_pages` after a compaction, compacted again while some remain: another session's
    snapshot older than the erasure (the machine's other tests run beside these) keeps the dead
    versions through a rewrite, and the compaction comes again, as its watch would."""
    for _ in range(20):
        await compaction.compact()
        with admin_connect() as conn:
            found = naming_pages(conn, schema)
        if not found:
            break
        await asyncio.sleep(0.5)
    return found


async def test_a_persons_erasure_leaves_no_value_naming_them_in_any_table() -> None:
    with temp_schema() as schema:
        store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
        try:
            await bob_everywhere(store)
            with admin_connect() as conn:
                assert naming_values(conn, schema.name)  # the scan sees them before

            erased = await erase_person(store, None, BOB)

            assert erased.problem is None and erased.records == 3
            with admin_connect() as conn:
                assert naming_values(conn, schema.name) == []
            assert [e.actor for e in await store.curation_log(ORG, rid(ORG, 2), 10)] == [ALICE]
            assert [r.text for r in await store.list(ALICE, 10)] == ["likes the standup at ten"]
        finally:
            await store.aclose()


async def test_after_the_compaction_no_heap_page_holds_the_persons_id() -> None:
    with temp_schema() as schema:
        store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
        try:
            await bob_everywhere(store)
            await erase_person(store, None, BOB)
            with admin_connect() as conn:
                assert naming_pages(conn, schema.name)  # dead versions until the rewrite
            compaction = store.compaction()
            assert compaction is not None
            assert await pages_after_compacting(compaction, schema.name) == []
        finally:
            await store.aclose()


async def test_a_snapshot_older_than_the_erasure_keeps_the_rewrites_coming_until_it_ends() -> None:
    """A report's snapshot taken before the erasure sees Bob's old row versions, so a rewrite keeps
    them; the compaction's notes stay until a rewrite after that snapshot ends, which drops them."""
    with temp_schema() as schema:
        store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
        try:
            await bob_everywhere(store)
            compaction = store.compaction()
            assert compaction is not None
            with psycopg.connect(schema.dsn) as report:
                report.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                report.execute("SELECT 1").fetchone()  # its snapshot, and no table lock
                await erase_person(store, None, BOB)
                await compaction.compact()
                with admin_connect() as conn:
                    assert naming_pages(conn, schema.name)  # kept for the report's snapshot
                report.execute("COMMIT")
            assert await pages_after_compacting(compaction, schema.name) == []
        finally:
            await store.aclose()


async def test_a_replica_that_indexed_a_persons_scope_returns_none_of_it_after_their_erasure() -> None:
    """Bob talked through one replica (it indexed his scope); the erasure ran on another. A read of
    Bob's scope on the first must not rank the records the erasure took, nor keep their text."""
    with temp_schema() as schema:
        chat = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
        admin = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
        try:
            await chat.write(BOB, [fact("keeps the quokka vault code in his desk")])
            assert await chat.retrieve(BOB, "quokka vault code", 5)  # indexed on this replica

            erased = await erase_person(admin, None, BOB)
            assert erased.problem is None

            assert await chat.retrieve(BOB, "quokka vault code", 5) == []
        finally:
            await chat.aclose()
            await admin.aclose()
