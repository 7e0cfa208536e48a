"""Record rows deleted outside the store (an operator's DELETE) against the real server: the store never
deletes one, but whoever does, every replica's warm scope index lets the record go at its next read,
as it lets a forgotten one go (memory/stores/postgres/changes.py, the tombstones).
"""

from __future__ import annotations

import psycopg
import pytest

from memory.stores.postgres.changes import CATCH_UP_DELETED, read_many
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import MemoryRecord
from tests.memory.postgres_support import TempSchema, schema_rows, unique_application_name
from tests.memory.records import fact

SCOPE = "org:acme"


@pytest.fixture
def schema(emptied_or_new_schema: TempSchema) -> TempSchema:
    return emptied_or_new_schema


def ids(records: list[MemoryRecord]) -> list[str]:
    return sorted(record.id for record in records)


def rid(seq: int) -> str:
    return f"mem:{SCOPE}:{seq}"


async def test_a_row_deleted_outside_the_store_leaves_every_replicas_warm_index(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys need a ticket")])
    for replica in replicas:
        assert ids(await replica.retrieve(SCOPE, "deploys", 5)) == [rid(1), rid(2)]  # warm

    await schema_rows(schema, "DELETE FROM memory_records WHERE scope_key = %s AND seq = 1", (SCOPE,))

    for replica in replicas:
        assert ids(await replica.retrieve(SCOPE, "deploys", 5)) == [rid(2)]


async def test_a_record_written_after_the_newest_row_was_deleted_takes_a_new_id(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, second = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys need a ticket")])
    await schema_rows(schema, "DELETE FROM memory_records WHERE scope_key = %s AND seq = 2", (SCOPE,))

    await first.write(SCOPE, [fact("deploys moved to tuesdays")])

    # A citation or an audit entry naming the deleted record's id must never name another record.
    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(1), rid(3)]
    assert await schema_rows(schema, "SELECT seq FROM memory_records ORDER BY seq") == [(1,), (3,)]


@pytest.mark.new_schema
async def test_a_row_put_back_by_hand_after_its_delete_is_read_again_and_loses_its_tombstone(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, second = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys need a ticket")])
    assert len(await second.retrieve(SCOPE, "deploys", 5)) == 2
    await schema_rows(schema, "CREATE TABLE kept AS SELECT * FROM memory_records WHERE seq = 2")
    await schema_rows(schema, "DELETE FROM memory_records WHERE scope_key = %s AND seq = 2", (SCOPE,))
    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(1)]

    # An operator's undo: every column but the generated ones, as they were.
    names = await schema_rows(
        schema,
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
        " AND table_name = 'memory_records' AND is_generated = 'NEVER' ORDER BY ordinal_position",
        (schema.name,),
    )
    columns = ", ".join(name for (name,) in names)
    await schema_rows(schema, f"INSERT INTO memory_records ({columns}) SELECT {columns} FROM kept")

    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(1), rid(2)]
    assert await schema_rows(schema, "SELECT seq FROM memory_deleted") == []


@pytest.mark.serial  # another session's open transaction holds the horizon this test reads
async def test_a_delete_is_read_once_even_while_an_older_transaction_stays_open(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys need a ticket")])
    async with (
        await psycopg.AsyncConnection.connect(schema.dsn) as idle,
        await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn,
    ):
        await idle.execute("SELECT pg_current_xact_id()")  # holds every snapshot's xmin back
        [loaded] = (await read_many(conn, [(SCOPE, None)])).values()
        [(stamp,)] = await schema_rows(
            schema,
            "DELETE FROM memory_records WHERE scope_key = %s AND seq = 1"
            " RETURNING pg_current_xact_id()::text",
            (SCOPE,),
        )

        [caught_up] = (await read_many(conn, [(SCOPE, (loaded.xmin, set()))])).values()
        assert caught_up.deleted == [(1, int(stamp))] and not caught_up.full
        [again] = (await read_many(conn, [(SCOPE, (caught_up.xmin, {int(stamp)}))])).values()
        assert again.deleted == [] and again.rows == []  # read whole already: not read again
        await idle.rollback()


@pytest.mark.new_schema
async def test_a_schema_from_before_tombstones_gets_them_when_a_store_opens_on_it(
    schema: TempSchema,
) -> None:
    older = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
    await older.write(SCOPE, [fact("deploys run nightly"), fact("deploys need a ticket")])
    await older.aclose()
    await schema_rows(schema, "DROP TABLE memory_deleted")  # as a database of the previous release

    reader = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
    try:
        assert len(await reader.retrieve(SCOPE, "deploys", 5)) == 2
        await schema_rows(schema, "DELETE FROM memory_records WHERE scope_key = %s AND seq = 2", (SCOPE,))
        assert ids(await reader.retrieve(SCOPE, "deploys", 5)) == [rid(1)]
    finally:
        await reader.aclose()


async def test_a_row_moved_by_hand_to_another_seq_leaves_its_old_place_in_a_warm_index(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, second = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys need a ticket")])
    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(1), rid(2)]

    await schema_rows(
        schema,
        "UPDATE memory_records SET seq = 7, id = %s WHERE scope_key = %s AND seq = 1",
        (rid(7), SCOPE),
    )

    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(2), rid(7)]


async def test_a_catch_up_past_its_share_of_deleted_rows_reads_the_scope_afresh(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, _ = replicas
    await first.write(SCOPE, [fact(f"note {n} about topic{n}") for n in range(CATCH_UP_DELETED + 2)])
    async with await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn:
        [loaded] = (await read_many(conn, [(SCOPE, None)])).values()
        await schema_rows(
            schema, "DELETE FROM memory_records WHERE scope_key = %s AND seq <= %s", (SCOPE, CATCH_UP_DELETED)
        )
        [few] = (await read_many(conn, [(SCOPE, (loaded.xmin, set()))])).values()
        await schema_rows(
            schema,
            "DELETE FROM memory_records WHERE scope_key = %s AND seq = %s",
            (SCOPE, CATCH_UP_DELETED + 1),
        )
        [many] = (await read_many(conn, [(SCOPE, (loaded.xmin, set()))])).values()

    assert not few.full and len(few.deleted) == CATCH_UP_DELETED
    assert many.full and [row[0] for row in many.rows] == [CATCH_UP_DELETED + 2]
