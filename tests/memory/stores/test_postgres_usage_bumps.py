"""The PostgreSQL store's held-back usage bumps (memory/stores/usage_bumps.py, index.hold,
retrieve.write_bumps) against the real server: the replica that read ranks and counts as an immediate
bump would have left them, the database has them within FLUSH_SECONDS (at once before any other
operation of the store, and on close), and another replica sees them once written.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from memory.stores.postgres.changes import WRITE_BUMPS
from memory.stores.postgres.index import SCOPES_KEPT
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.usage_bumps import FLUSH_SECONDS
from memory.types import MemoryRecord
from tests.memory.embedders import ConceptEmbedder
from tests.memory.postgres_support import (
    STORED_RECORDS,
    TempSchema,
    schema_rows,
    unique_application_name,
)
from tests.memory.records import DAY, NOW, fact
from tests.memory.store_contract import FakeClock

SCOPE = "org:acme"


Clock = FakeClock


@pytest.fixture
def schema(emptied_schema: TempSchema) -> TempSchema:
    """These tests open stores on the schema and touch only their rows: an emptied one will do."""
    return emptied_schema


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


def replica(schema: TempSchema, clock: Clock, cap: int = 500) -> PostgresMemoryStore:
    return PostgresMemoryStore(schema.dsn, cap, clock=clock, application_name=unique_application_name())


@pytest.fixture
async def replicas(
    schema: TempSchema, clock: Clock
) -> AsyncIterator[tuple[PostgresMemoryStore, PostgresMemoryStore]]:
    first, second = replica(schema, clock), replica(schema, clock)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


def rid(seq: int) -> str:
    return f"mem:{SCOPE}:{seq}"


def ids(records: list[MemoryRecord]) -> list[str]:
    return [record.id for record in records]


async def stored_uses(schema: TempSchema) -> dict[str, tuple[int, float | None]]:
    rows = await schema_rows(schema, f"SELECT id, use_count, last_used_at FROM {STORED_RECORDS}")
    return {str(record_id): (int(count), used) for record_id, count, used in rows}


async def until_stored(schema: TempSchema, record_id: str, uses: int) -> None:
    deadline = time.monotonic() + FLUSH_SECONDS + 5
    while (await stored_uses(schema))[record_id][0] != uses:
        assert time.monotonic() < deadline, "the held-back bump was never written"
        await asyncio.sleep(0.05)


async def test_a_retrieve_writes_nothing_and_its_bump_reaches_the_database_within_the_interval(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema, clock: Clock
) -> None:
    first, _ = replicas
    await first.write(SCOPE, [fact("deploy one"), fact("billing two")])
    clock.now += 60
    [found] = await first.retrieve(SCOPE, "deploy", 5)
    assert (found.use_count, found.last_used_at) == (1, NOW + 60)
    assert (await stored_uses(schema))[rid(1)] == (0, None)  # held back: the read wrote nothing
    await until_stored(schema, rid(1), 1)
    assert (await stored_uses(schema))[rid(1)] == (1, NOW + 60)


async def test_the_reading_replica_ranks_and_counts_as_an_immediate_bump_would(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], clock: Clock
) -> None:
    first, _ = replicas
    await first.write(SCOPE, [fact("deploy notes one")])
    clock.now += DAY
    await first.write(SCOPE, [fact("deploy notes two")])
    clock.now += 30 * DAY
    assert ids(await first.retrieve(SCOPE, "one", 1)) == [rid(1)]  # used now
    [best] = await first.retrieve(SCOPE, "deploy", 1)  # before any write: the index holds the bump
    assert best.id == rid(1) and best.use_count == 2


async def test_a_bump_on_one_replica_reorders_the_others_ranking_once_written(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema, clock: Clock
) -> None:
    first, second = replicas
    await first.write(SCOPE, [fact("deploy notes one")])
    clock.now += DAY
    await first.write(SCOPE, [fact("deploy notes two")])
    clock.now += DAY
    assert ids(await second.retrieve(SCOPE, "deploy", 1)) == [rid(2)]  # the newer, by recency
    clock.now += 30 * DAY
    assert ids(await first.retrieve(SCOPE, "one", 1)) == [rid(1)]
    await until_stored(schema, rid(1), 1)
    [best] = await second.retrieve(SCOPE, "deploy", 1)
    assert best.id == rid(1) and best.use_count == 2  # the first's bump, then the second's own


async def test_another_replicas_change_to_a_bumped_record_keeps_the_pending_bump(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema, clock: Clock
) -> None:
    first, second = replicas
    await first.write(SCOPE, [fact("deploy notes one")])
    clock.now += 60
    await first.retrieve(SCOPE, "deploy", 1)  # first holds one bump of record 1
    await second.write(SCOPE, [fact("Deploy notes ONE")])  # a restatement: folded, used once more
    [again] = await first.retrieve(SCOPE, "deploy", 1)  # the catch-up reads the fold's row
    assert again.use_count == 3  # the fold's use, first's held-back one, and this read's
    await first.aclose()
    assert (await stored_uses(schema))[rid(1)][0] == 3


async def test_every_other_operation_writes_the_held_back_bumps_first(
    replicas: tuple[PostgresMemoryStore, PostgresMemoryStore], schema: TempSchema
) -> None:
    first, _ = replicas
    await first.write(SCOPE, [fact("deploy one"), fact("billing two")])
    await first.retrieve(SCOPE, "deploy", 5)
    [listed, _] = sorted(await first.list(SCOPE, 5), key=lambda record: record.id)
    assert listed.use_count == 1  # the list is the database's, and the bump is in it
    assert (await stored_uses(schema))[rid(1)][0] == 1


async def test_eviction_at_the_cap_sees_the_held_back_bumps(schema: TempSchema, clock: Clock) -> None:
    store = replica(schema, clock, cap=2)
    try:
        await store.write(SCOPE, [fact("deploy one")])
        clock.now += 1
        await store.write(SCOPE, [fact("billing two")])
        clock.now += 1
        await store.retrieve(SCOPE, "deploy", 1)  # the older record is now the more recently used
        clock.now += 1
        await store.write(SCOPE, [fact("release three")])
        assert sorted(ids(await store.list(SCOPE, 5))) == [rid(1), rid(3)]  # billing went, not deploy
    finally:
        await store.aclose()


async def test_closing_the_store_writes_its_held_back_bumps(schema: TempSchema, clock: Clock) -> None:
    store = replica(schema, clock)
    await store.write(SCOPE, [fact("deploy one"), fact("billing two")])
    [first] = await store.retrieve(SCOPE, "deploy", 5)
    [second] = await store.retrieve(SCOPE, "deploy", 5)
    await store.aclose()
    assert (first.use_count, second.use_count) == (1, 2)
    assert (await stored_uses(schema))[rid(1)][0] == 2


class HeldFlush(psycopg.AsyncConnection[Any]):
    """A connection whose bump UPDATE waits for the test's go-ahead (the statement is the store's own)."""

    started = asyncio.Event()
    go = asyncio.Event()

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str) and query == WRITE_BUMPS:
            type(self).started.set()
            await type(self).go.wait()
        return await super().execute(query, params, **kwargs)


@pytest.fixture
async def held_store(schema: TempSchema, clock: Clock) -> AsyncIterator[PostgresMemoryStore]:
    """A store whose flushes wait at their UPDATE until the test sets `HeldFlush.go`."""
    HeldFlush.started, HeldFlush.go = asyncio.Event(), asyncio.Event()
    store = PostgresMemoryStore(
        schema.dsn, clock=clock, application_name=unique_application_name(), connection_class=HeldFlush
    )
    try:
        yield store
    finally:
        HeldFlush.go.set()
        await store.aclose()


async def test_reads_go_on_during_a_flush_and_count_its_bumps_until_it_commits(
    held_store: PostgresMemoryStore, schema: TempSchema
) -> None:
    store = held_store
    await store.write(SCOPE, [fact("deploy one"), fact("billing two")])
    await store.retrieve(SCOPE, "deploy", 5)
    listing = asyncio.create_task(store.list(SCOPE, 5))  # writes the held-back bump first
    await asyncio.wait_for(HeldFlush.started.wait(), 5)
    [during] = await asyncio.wait_for(store.retrieve(SCOPE, "deploy", 5), 5)  # not blocked
    assert during.use_count == 2  # the bump in flight, then its own
    for n in range(SCOPES_KEPT):  # reads of other scopes push this one's index out
        await store.retrieve(f"org:other{n}", "deploy", 5)
    [reloaded] = await store.retrieve(SCOPE, "deploy", 5)  # read whole, as the database has it
    assert reloaded.use_count == 3  # with both bumps not yet committed laid over it
    HeldFlush.go.set()
    listed = {record.id: record for record in await listing}
    assert listed[rid(1)].use_count == 1  # the flight carried the first bump only
    [after] = await store.retrieve(SCOPE, "deploy", 5)
    assert after.use_count == 4  # the committed flight is not laid over its rows again
    await store.aclose()  # writes what is still held
    assert (await stored_uses(schema))[rid(1)][0] == 4


class FailingFlush(psycopg.AsyncConnection[Any]):
    """A connection on which the bump UPDATE fails as a lost server would fail it."""

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str) and query == WRITE_BUMPS:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return await super().execute(query, params, **kwargs)


async def test_a_failed_flush_is_logged_and_the_index_reads_the_database_afresh(
    schema: TempSchema, clock: Clock
) -> None:
    store = PostgresMemoryStore(
        schema.dsn, clock=clock, application_name=unique_application_name(), connection_class=FailingFlush
    )
    try:
        await store.write(SCOPE, [fact("deploy one"), fact("billing two")])
        await store.retrieve(SCOPE, "deploy", 5)
        with capture_logs() as logs:
            listed = await store.list(SCOPE, 5)  # the operation goes on: usage counts only
        assert len(listed) == 2
        [lost] = [entry for entry in logs if entry["event"] == "memory.store.bumps_lost"]
        assert (lost["scopes"], lost["records"], lost["log_level"]) == (1, 1, "warning")
        [again] = await store.retrieve(SCOPE, "deploy", 5)
        assert again.use_count == 1  # the database's 0 and this read: the lost bump is not laid over
    finally:
        await store.aclose()


async def test_a_caller_cancelled_during_a_flush_leaves_it_to_finish(
    held_store: PostgresMemoryStore, schema: TempSchema
) -> None:
    store = held_store
    await store.write(SCOPE, [fact("deploy one"), fact("billing two")])
    await store.retrieve(SCOPE, "deploy", 5)
    listing = asyncio.create_task(store.list(SCOPE, 5))
    await asyncio.wait_for(HeldFlush.started.wait(), 5)
    listing.cancel()  # as a handler's timeout would
    with pytest.raises(asyncio.CancelledError):
        await listing
    HeldFlush.go.set()
    await store.list(SCOPE, 5)  # waits for the flush in flight, which committed
    assert (await stored_uses(schema))[rid(1)][0] == 1
    [again] = await store.retrieve(SCOPE, "deploy", 5)
    assert again.use_count == 2  # neither lost nor laid over its committed row a second time


async def test_a_read_making_vectors_never_waits_for_a_row_another_transaction_holds(
    schema: TempSchema, clock: Clock
) -> None:
    plain = replica(schema, clock)
    await plain.write(SCOPE, [fact("deploy one"), fact("deploy two")])  # no vectors: no embedder
    await plain.aclose()
    store = PostgresMemoryStore(
        schema.dsn, clock=clock, embedder=ConceptEmbedder(), application_name=unique_application_name()
    )
    try:
        await store.open()  # its schema step takes table locks: before the row is held
        async with await psycopg.AsyncConnection.connect(schema.dsn) as holder:
            await holder.execute("SELECT 1 FROM memory_records WHERE seq = 1 FOR UPDATE")  # a flush's lock
            found = await asyncio.wait_for(store.retrieve(SCOPE, "deploy", 5), 5)  # not blocked
            assert sorted(ids(found)) == [rid(1), rid(2)]
            await holder.rollback()
        vectors = await schema_rows(
            schema, "SELECT seq, embedding IS NOT NULL FROM memory_records ORDER BY seq"
        )
        assert vectors == [(1, False), (2, True)]  # the held row's vector is made on a later read
    finally:
        await store.aclose()
