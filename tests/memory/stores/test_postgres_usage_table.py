"""The PostgreSQL store's usage rows (memory/stores/postgres/changes.py): an active record's last use and
use count live in a narrow `memory_usage` row that a trigger keeps in step with the record's status,
whoever changes it; a database of the schema before it gets its usage rows on open."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import (
    BASE_DSN,
    STORED_RECORDS,
    TempSchema,
    schema_rows,
    unique_application_name,
)
from tests.memory.records import NOW, fact
from tests.memory.store_contract import FakeClock

SCOPE = "org:acme"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


async def open_store(schema: TempSchema, clock: FakeClock, cap: int = 500) -> PostgresMemoryStore:
    return await PostgresMemoryStore.connect(
        schema.dsn, cap, clock=clock, application_name=unique_application_name()
    )


@pytest.fixture
def schema(emptied_or_new_schema: TempSchema) -> TempSchema:
    return emptied_or_new_schema


@pytest.fixture
async def store(schema: TempSchema, clock: FakeClock) -> AsyncIterator[PostgresMemoryStore]:
    opened = await open_store(schema, clock)
    try:
        yield opened
    finally:
        await opened.aclose()


async def usage_rows(schema: TempSchema) -> dict[int, tuple[float | None, int]]:
    rows = await schema_rows(schema, "SELECT seq, used_at, uses FROM memory_usage ORDER BY seq")
    return {int(seq): (used_at, int(uses)) for seq, used_at, uses in rows}


async def own_columns(schema: TempSchema) -> dict[int, tuple[str, float | None, int]]:
    rows = await schema_rows(schema, "SELECT seq, status, last_used_at, use_count FROM memory_records")
    return {int(seq): (str(status), used, int(count)) for seq, status, used, count in rows}


# The schema as the release before the usage table left it: usage in the record's own columns, the
# trigger that only stamps, the eviction index on the records.
_AS_BEFORE = (
    "DROP TRIGGER memory_records_track ON memory_records",
    "DROP TABLE memory_usage",
    "CREATE TRIGGER memory_records_stamp BEFORE INSERT OR UPDATE ON memory_records"
    " FOR EACH ROW EXECUTE FUNCTION memory_records_stamp()",
    "CREATE INDEX memory_records_eviction ON memory_records"
    " (scope_key, (COALESCE(last_used_at, created_at)), created_at, seq) WHERE status = 'active'",
    f"UPDATE memory_records SET use_count = 7, last_used_at = {NOW + 50} WHERE seq = 1",
    f"UPDATE memory_records SET use_count = 3, last_used_at = {NOW + 40} WHERE seq = 3",
)


@pytest.mark.new_schema
async def test_a_database_of_the_schema_before_gets_usage_rows_for_exactly_its_active_records(
    schema: TempSchema, clock: FakeClock
) -> None:
    first = await open_store(schema, clock)
    await first.write(SCOPE, [fact("deploy on tuesdays"), fact("billing runs nightly"), fact("oncall rota")])
    await first.forget(SCOPE, f"mem:{SCOPE}:2")
    await first.aclose()
    for statement in _AS_BEFORE:
        await schema_rows(schema, statement)

    again = await open_store(schema, clock)
    try:
        assert await usage_rows(schema) == {1: (NOW + 50, 7), 3: (NOW + 40, 3)}  # the forgotten one has none
        triggers = await schema_rows(
            schema,
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'memory_records'::regclass AND NOT tgisinternal",
        )
        assert triggers == [("memory_records_track",)]  # the stamping one is replaced
        clock.now = NOW + 100
        [found] = await again.retrieve(SCOPE, "tuesdays", 5)
        assert (found.id, found.use_count, found.last_used_at) == (f"mem:{SCOPE}:1", 8, NOW + 100)
    finally:
        await again.aclose()
    assert await usage_rows(schema) == {1: (NOW + 100, 8), 3: (NOW + 40, 3)}


async def test_a_use_writes_the_usage_row_and_leaves_the_record_row_as_written(
    store: PostgresMemoryStore, schema: TempSchema, clock: FakeClock
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays")])
    before = await schema_rows(schema, "SELECT changed_xid::text FROM memory_records")
    clock.now = NOW + 30
    await store.retrieve(SCOPE, "tuesdays", 5)
    await store.list(SCOPE, 1)  # writes the held-back bump
    assert await usage_rows(schema) == {1: (NOW + 30, 1)}
    assert await own_columns(schema) == {1: ("active", None, 0)}
    assert await schema_rows(schema, "SELECT changed_xid::text FROM memory_records") == before


async def test_a_record_leaving_active_takes_its_usage_into_its_own_columns(
    store: PostgresMemoryStore, schema: TempSchema, clock: FakeClock
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays"), fact("billing runs nightly")])
    clock.now = NOW + 30
    await store.retrieve(SCOPE, "tuesdays", 5)
    await store.write(SCOPE, [fact("deploy on thursdays", supersedes=f"mem:{SCOPE}:1")])
    await store.forget(SCOPE, f"mem:{SCOPE}:2")
    assert await usage_rows(schema) == {3: (None, 0)}  # only the active record has a usage row
    columns = await own_columns(schema)
    assert columns[1] == ("superseded", NOW + 30, 1) and columns[2] == ("forgotten", None, 0)
    read = await schema_rows(
        schema, f"SELECT seq, use_count, last_used_at FROM {STORED_RECORDS} ORDER BY seq"
    )
    assert read == [(1, 1, NOW + 30), (2, 0, None), (3, 0, None)]


async def test_an_operators_status_change_keeps_the_usage_rows_in_step(
    store: PostgresMemoryStore, schema: TempSchema, clock: FakeClock
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays")])
    clock.now = NOW + 30
    await store.retrieve(SCOPE, "tuesdays", 5)
    await store.list(SCOPE, 1)
    await schema_rows(schema, "UPDATE memory_records SET status = 'evicted'")
    assert await usage_rows(schema) == {}
    await schema_rows(schema, "UPDATE memory_records SET status = 'active'")
    assert await usage_rows(schema) == {1: (NOW + 30, 1)}  # as it was when it left
    [found] = await store.retrieve(SCOPE, "tuesdays", 5)  # the change feed carried both changes
    assert found.use_count == 2


async def test_a_restatement_counts_on_the_usage_row_of_an_active_record(
    store: PostgresMemoryStore, schema: TempSchema, clock: FakeClock
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays")])
    clock.now = NOW + 30
    await store.retrieve(SCOPE, "tuesdays", 5)
    clock.now = NOW + 60
    await store.write(SCOPE, [fact("Deploy on Tuesdays")])
    assert await usage_rows(schema) == {1: (NOW + 60, 2)}
    [(count,)] = await schema_rows(schema, f"SELECT use_count FROM {STORED_RECORDS}")
    assert count == 2


async def test_a_record_deleted_by_hand_takes_its_usage_row_with_it(
    store: PostgresMemoryStore, schema: TempSchema, clock: FakeClock
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays"), fact("billing runs nightly")])
    await schema_rows(schema, "DELETE FROM memory_records WHERE seq = 1")
    assert set(await usage_rows(schema)) == {2}  # no orphan for the eviction order to pick


async def test_a_record_moved_by_hand_takes_its_usage_row_to_its_new_place(
    store: PostgresMemoryStore, schema: TempSchema, clock: FakeClock
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays"), fact("billing runs nightly")])
    clock.now = NOW + 30
    await store.retrieve(SCOPE, "tuesdays", 5)
    await store.list(SCOPE, 1)  # writes the held-back bump

    await schema_rows(schema, "UPDATE memory_records SET seq = 9 WHERE seq = 1")

    # No orphan at the old place for the eviction order to pick, and the use is kept at the new one.
    assert await usage_rows(schema) == {2: (None, 0), 9: (NOW + 30, 1)}
    await schema_rows(schema, "UPDATE memory_records SET seq = 10, status = 'evicted' WHERE seq = 9")
    assert await usage_rows(schema) == {2: (None, 0)}
    assert (await own_columns(schema))[10] == ("evicted", NOW + 30, 1)


async def test_a_stray_usage_row_goes_when_a_record_not_active_leaves_or_takes_its_key(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays"), fact("billing runs nightly")])
    await store.forget(SCOPE, f"mem:{SCOPE}:1")
    for seq in (1, 7):  # what a time without the trigger (an older release's start) may leave
        await schema_rows(
            schema,
            "INSERT INTO memory_usage (scope_key, seq, used_at, uses, created_at)"
            " VALUES (%s, %s, NULL, 0, 0)",
            (SCOPE, seq),
        )

    await schema_rows(schema, "UPDATE memory_records SET seq = 7 WHERE seq = 1")

    assert set(await usage_rows(schema)) == {2}  # only the active record's


async def test_a_change_from_a_session_with_another_search_path_keeps_this_schemas_usage_rows(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays")])
    async with await psycopg.AsyncConnection.connect(BASE_DSN, autocommit=True) as conn:
        await conn.execute("SET search_path = public")
        table = sql.Identifier(schema.name, "memory_records")
        await conn.execute(sql.SQL("UPDATE {} SET status = 'evicted'").format(table))
    assert await usage_rows(schema) == {}


@pytest.mark.new_schema
async def test_upgrading_again_after_going_back_makes_the_usage_rows_afresh(
    schema: TempSchema, clock: FakeClock
) -> None:
    first = await open_store(schema, clock)
    await first.write(SCOPE, [fact("deploy on tuesdays"), fact("billing runs nightly")])
    clock.now = NOW + 30
    await first.retrieve(SCOPE, "tuesdays", 5)
    await first.aclose()
    # The documented way back (docs/operations.md): usage copied into the records, the trigger dropped.
    await schema_rows(
        schema,
        "UPDATE memory_records AS m SET last_used_at = u.used_at, use_count = u.uses FROM memory_usage AS u"
        " WHERE u.scope_key = m.scope_key AND u.seq = m.seq",
    )
    await schema_rows(schema, "DROP TRIGGER memory_records_track ON memory_records")
    assert await own_columns(schema) == {1: ("active", NOW + 30, 1), 2: ("active", None, 0)}
    # The older release then counts a use and forgets a record, in the records' own columns.
    await schema_rows(
        schema, f"UPDATE memory_records SET use_count = 4, last_used_at = {NOW + 90} WHERE seq = 1"
    )
    await schema_rows(schema, "UPDATE memory_records SET status = 'forgotten' WHERE seq = 2")

    again = await open_store(schema, clock)
    try:
        assert await usage_rows(schema) == {1: (NOW + 90, 4)}  # nothing stale, no orphan
    finally:
        await again.aclose()


@pytest.mark.new_schema
async def test_a_merge_keeps_a_use_another_replica_wrote_after_the_merge_read(
    store: PostgresMemoryStore, schema: TempSchema, clock: FakeClock
) -> None:
    await store.write(SCOPE, [fact("deploy on tuesdays"), fact("billing runs nightly")])
    clock.now = NOW + 30
    await store.retrieve(SCOPE, "tuesdays", 5)
    await store.retrieve(SCOPE, "billing", 5)
    await store.list(SCOPE, 1)  # both uses written: 1 each
    # Another replica's flush lands between the merge's read and its write: a trigger on the merge's
    # own update of the survivor's row adds 3 uses to the usage row, as that flush would.
    await schema_rows(
        schema,
        """
        CREATE FUNCTION flush_meanwhile() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN UPDATE memory_usage SET uses = uses + 3 WHERE scope_key = NEW.scope_key AND seq = NEW.seq;
        RETURN NEW; END $$;
        CREATE TRIGGER flush_meanwhile BEFORE UPDATE OF use_count ON memory_records
            FOR EACH ROW WHEN (NEW.status = 'active') EXECUTE FUNCTION flush_meanwhile();
        """,
    )
    assert await store.merge(SCOPE, f"mem:{SCOPE}:1", [f"mem:{SCOPE}:2"], "U_ADMIN") == 1
    assert (await usage_rows(schema))[1] == (NOW + 30, 5)  # its 1, the duplicate's 1, the flush's 3
