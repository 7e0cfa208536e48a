"""Each replica's scope indexes (memory/stores/postgres/index.py) against the real server: two
stores on one schema are two replicas, each with its own indexes; whatever one of them — or anyone
else on the database — changes, the other's next read sees.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from memory.stores.postgres.changes import read_many
from memory.stores.postgres.index import ScopeIndexes
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import MemoryRecord
from tests.memory.postgres_support import TempSchema, schema_rows, unique_application_name
from tests.memory.records import DAY, NOW, fact

SCOPE = "org:acme"


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def schema(emptied_schema: TempSchema) -> TempSchema:
    """These tests open stores on the schema and touch only their rows: an emptied one will do."""
    return emptied_schema


@pytest.fixture
async def replicas(
    schema: TempSchema,
) -> AsyncIterator[tuple[PostgresMemoryStore, PostgresMemoryStore, Clock]]:
    clock = Clock()
    first, second = (
        PostgresMemoryStore(schema.dsn, clock=clock, application_name=unique_application_name())
        for _ in range(2)
    )
    try:
        yield first, second, clock
    finally:
        await first.aclose()
        await second.aclose()


def ids(records: list[MemoryRecord]) -> list[str]:
    return [record.id for record in records]


def rid(seq: int) -> str:
    return f"mem:{SCOPE}:{seq}"


async def test_a_write_on_one_replica_is_read_by_the_other_at_once(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])
    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(1)]  # the second's index is loaded
    await first.write(SCOPE, [fact("deploys moved to tuesdays")])
    assert sorted(ids(await second.retrieve(SCOPE, "deploys", 5))) == [rid(1), rid(2)]


async def test_a_forget_supersede_or_eviction_on_one_replica_leaves_the_others_index(
    schema: TempSchema,
) -> None:
    clock = Clock()
    first, second = (
        PostgresMemoryStore(schema.dsn, cap=3, clock=clock, application_name=unique_application_name())
        for _ in range(2)
    )
    try:
        await first.write(SCOPE, [fact("alpha deploy"), fact("beta deploy"), fact("gamma deploy")])
        assert len(await second.retrieve(SCOPE, "deploy", 5)) == 3
        assert await first.forget(SCOPE, rid(1))
        await first.write(SCOPE, [fact("delta deploy", supersedes=rid(2))])
        clock.now += DAY
        await first.write(SCOPE, [fact("epsilon deploy"), fact("zeta deploy")])  # evicts the oldest
        found = ids(await second.retrieve(SCOPE, "deploy", 5))
        active = [
            str(row[0])
            for row in await schema_rows(
                schema, "SELECT id FROM memory_records WHERE status = 'active' ORDER BY seq"
            )
        ]
        assert sorted(found) == sorted(active) and len(active) == 3
        assert rid(1) not in found and rid(2) not in found
    finally:
        await first.aclose()
        await second.aclose()


async def test_an_erase_on_one_replica_empties_the_others_index(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("billing runs monthly")])
    assert len(await second.retrieve(SCOPE, "deploys billing", 5)) == 2
    assert await first.erase_scope(SCOPE, "user_request") == 2
    assert await second.retrieve(SCOPE, "deploys billing", 5) == []


async def test_a_change_made_outside_any_store_is_read_by_the_next_retrieve(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock], schema: TempSchema
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys run weekly")])
    assert len(await second.retrieve(SCOPE, "deploys", 5)) == 2
    # An operator's UPDATE (or a replica of an earlier release) stamps the row all the same.
    await schema_rows(schema, "UPDATE memory_records SET status = 'evicted' WHERE seq = 1")
    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(2)]


async def test_a_change_committed_after_the_index_was_read_by_an_older_transaction_is_not_missed(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock], schema: TempSchema
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys run weekly")])
    await second.open()  # before the row lock below: opening applies the schema, which would wait on it
    async with await psycopg.AsyncConnection.connect(schema.dsn) as slow:
        # Begun (and given its transaction id) before the second replica reads; committed after it
        # read, and after later transactions (its own bump, the first's write) were committed.
        await slow.execute("UPDATE memory_records SET status = 'forgotten' WHERE seq = 1")
        assert ids(await second.retrieve(SCOPE, "weekly", 5)) == [rid(2)]  # loads row 1 as active
        await first.write(SCOPE, [fact("deploys run daily")])
        assert ids(await second.retrieve(SCOPE, "daily", 5)) == [rid(3)]
        await slow.commit()
    assert sorted(ids(await second.retrieve(SCOPE, "deploys", 5))) == [rid(2), rid(3)]


async def test_a_read_of_several_scopes_catches_each_up_with_its_own_changes(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    other = "channel:slack:C1"
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys run weekly")])
    await first.write(other, [fact("deploys need a ticket")])
    warm = await second.retrieve_many([SCOPE, other, "user:slack:U9"], "deploys", 5)
    assert {key: len(found) for key, found in warm.items()} == {SCOPE: 2, other: 1}
    # One scope changes on the first replica, then the other: the second's one catch-up of all three
    # lays each scope's rows on its own index, never on another's.
    assert await first.forget(SCOPE, rid(1))
    await first.write(other, [fact("deploys freeze on fridays")])
    await first.write("user:slack:U9", [fact("deploys page me")])
    found = await second.retrieve_many([SCOPE, other, "user:slack:U9"], "deploys", 5)
    assert {key: sorted(item.record.text for item in ranked) for key, ranked in found.items()} == {
        SCOPE: ["deploys run weekly"],
        other: ["deploys freeze on fridays", "deploys need a ticket"],
        "user:slack:U9": ["deploys page me"],
    }


async def test_a_scope_of_several_pages_loads_whole(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    for start in range(0, 1100, 50):
        await first.write(SCOPE, [fact(f"note {n} about topic{n}") for n in range(start, start + 50)])
    assert ids(await second.retrieve(SCOPE, "topic1077", 5)) == [rid(1078)]  # on the second page


async def test_a_catch_up_reads_only_what_changed_even_while_an_older_transaction_stays_open(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock], schema: TempSchema
) -> None:
    first, _, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])
    async with (
        await psycopg.AsyncConnection.connect(schema.dsn) as idle,
        await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn,
    ):
        cursor = await idle.execute("SELECT pg_current_xact_id()")  # holds every snapshot's xmin back
        [(held,)] = await cursor.fetchall()
        [everything] = (await read_many(conn, [(SCOPE, None)])).values()
        assert [row[0] for row in everything.rows] == [1] and everything.full
        await first.write(SCOPE, [fact("deploys run weekly")])
        [changed] = (await read_many(conn, [(SCOPE, (everything.xmin, set()))])).values()
        assert 2 in [row[0] for row in changed.rows] and not changed.full
        assert changed.xmin <= int(held)  # the open transaction still holds it back
        await first.write(SCOPE, [fact("deploys run daily")])
        read_whole = {int(row[-1]) for row in changed.rows}
        [later] = (await read_many(conn, [(SCOPE, (changed.xmin, read_whole))])).values()
        assert [row[0] for row in later.rows] == [3]  # not row 2 again
        await idle.rollback()


@pytest.mark.serial  # another session's open transaction holds the horizon this test reads
async def test_a_transaction_read_whole_for_one_scope_is_still_read_for_another(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock], schema: TempSchema
) -> None:
    first, _, _ = replicas
    other = "channel:slack:C1"
    await first.write(SCOPE, [fact("deploys run nightly")])
    await first.write(other, [fact("deploys need a ticket")])
    async with await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn:
        loaded = await read_many(conn, [(SCOPE, None), (other, None)])
        # One transaction changes a row of each scope (as one flush writes every scope's bumps).
        stamps = await schema_rows(
            schema, "UPDATE memory_records SET confidence = 0.5 RETURNING changed_xid::text::bigint"
        )
        [both] = {int(stamp) for (stamp,) in stamps}
        since = [(SCOPE, (loaded[SCOPE].xmin, {both})), (other, (loaded[other].xmin, set()))]
        caught_up = await read_many(conn, since)
    assert caught_up[SCOPE].rows == []  # read whole for this scope already
    assert [row[0] for row in caught_up[other].rows] == [1]  # but not for this one


async def test_a_scope_being_read_keeps_its_index_while_other_scopes_loads_push_past_the_limit(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock], schema: TempSchema
) -> None:
    first, _, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])
    await first.write("channel:slack:C1", [fact("billing runs monthly")])
    indexes = ScopeIndexes(None, capacity=1)
    async with await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn:
        indexes.apply(SCOPE, (await read_many(conn, [(SCOPE, None)]))[SCOPE])
        async with indexes.locked([SCOPE]):
            since = indexes.since(SCOPE)
            assert since is not None
            # While this read's catch-up is in flight another reader loads another scope: one kept.
            other = await read_many(conn, [("channel:slack:C1", None)])
            indexes.apply("channel:slack:C1", other["channel:slack:C1"])
            caught_up = await read_many(conn, [(SCOPE, since)])
            index = indexes.apply(SCOPE, caught_up[SCOPE])  # nothing changed: applied to what it holds
    assert len(index) == 1  # not an index of the catch-up's rows alone (none)


# Curation on one replica, the other's index warm (it has served a retrieve of the scope already).

CURATOR = "user:slack:U1"


async def test_a_pending_write_on_one_replica_stays_out_of_the_others_warm_index(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])
    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(1)]
    await first.write_pending(SCOPE, [fact("deploys freeze in december")])
    assert ids(await second.retrieve(SCOPE, "deploys december freeze", 5)) == [rid(1)]


async def test_an_approval_on_one_replica_is_in_the_others_warm_index_at_once(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])
    await first.write_pending(SCOPE, [fact("deploys freeze in december")])
    assert ids(await second.retrieve(SCOPE, "deploys december", 5)) == [rid(1)]
    assert await first.approve(SCOPE, rid(2), CURATOR) is not None
    assert ids(await second.retrieve(SCOPE, "december freeze", 5)) == [rid(2)]


async def test_an_approval_over_the_cap_evicts_the_least_used_from_the_others_warm_index(
    schema: TempSchema,
) -> None:
    clock = Clock()
    first, second = (
        PostgresMemoryStore(schema.dsn, cap=2, clock=clock, application_name=unique_application_name())
        for _ in range(2)
    )
    try:
        await first.write(SCOPE, [fact("alpha deploy")])
        clock.now += DAY
        await first.write(SCOPE, [fact("beta deploy")])
        await first.write_pending(SCOPE, [fact("gamma deploy")])
        assert sorted(ids(await second.retrieve(SCOPE, "deploy", 5))) == [rid(1), rid(2)]
        clock.now += DAY
        assert await first.approve(SCOPE, rid(3), CURATOR) is not None
        assert sorted(ids(await second.retrieve(SCOPE, "deploy", 5))) == [rid(2), rid(3)]
        [(documents,)] = await schema_rows(
            schema, "SELECT df FROM memory_term_df WHERE scope_key = %s AND term = ''", (SCOPE,)
        )
        assert documents == 2  # the active count eviction reads stays exact
    finally:
        await first.aclose()
        await second.aclose()


async def test_an_edit_on_one_replica_replaces_the_record_in_the_others_warm_index(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])
    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(1)]
    edited = await first.edit(SCOPE, rid(1), "deploys run on tuesdays", CURATOR)
    assert edited is not None and edited.id == rid(2)
    [found] = await second.retrieve(SCOPE, "deploys", 5)
    assert (found.id, found.text) == (rid(2), "deploys run on tuesdays")


async def test_a_merge_on_one_replica_leaves_only_the_survivor_in_the_others_warm_index(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly"), fact("deploys happen every night")])
    assert sorted(ids(await second.retrieve(SCOPE, "deploys", 5))) == [rid(1), rid(2)]
    assert await first.merge(SCOPE, rid(1), [rid(2)], CURATOR) == 1
    [survivor] = await second.retrieve(SCOPE, "deploys", 5)
    assert survivor.id == rid(1) and survivor.use_count >= 2  # the duplicate's use folded in


async def test_forgetting_an_edited_record_on_one_replica_empties_the_others_warm_index(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore, Clock],
) -> None:
    first, second, _ = replicas
    await first.write(SCOPE, [fact("deploys run nightly")])
    assert await first.edit(SCOPE, rid(1), "deploys run on tuesdays", CURATOR) is not None
    assert ids(await second.retrieve(SCOPE, "deploys", 5)) == [rid(2)]
    assert await first.forget(SCOPE, rid(2))
    assert await second.retrieve(SCOPE, "deploys", 5) == []
