"""What a PostgreSQL failure means (memory/stores/postgres/failures.py), each provoked for real on the
local server: a statement timeout is a fault, raised even by the advisory retrieve; a deadlock is run
once more; a server out of reach is the only failure a retrieve reads as no memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from memory.stores.postgres.failures import failure, once_more_on_conflict, out_of_reach
from memory.stores.postgres.schema import _LOCK_SCHEMA
from memory.stores.postgres.sql import _LOCK_SCOPE
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import MemoryStoreError, MemoryUnavailable, WriteResult
from tests.memory.postgres_support import (
    BASE_DSN,
    TcpForwarder,
    TempSchema,
    unique_application_name,
    with_options,
)
from tests.memory.records import fact

SCOPE = "org:acme"


@pytest.fixture
def schema(emptied_schema: TempSchema) -> TempSchema:
    return emptied_schema


async def _connect(dsn: str, **options: Any) -> PostgresMemoryStore:
    return await PostgresMemoryStore.connect(dsn, application_name=unique_application_name(), **options)


@pytest.fixture
async def locked_table(schema: TempSchema) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    """Another client holding the records table's ACCESS EXCLUSIVE lock: every statement on it waits."""
    async with await psycopg.AsyncConnection.connect(schema.dsn) as other:
        yield other
        await other.rollback()


async def _lock_records(other: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    await other.execute("LOCK TABLE memory_records IN ACCESS EXCLUSIVE MODE")


async def test_a_statement_timeout_fails_a_retrieve_instead_of_reading_as_no_memory(
    schema: TempSchema, locked_table: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    store = await _connect(with_options(schema.dsn, "-cstatement_timeout=1000"))
    try:
        await store.write(SCOPE, [fact("deploy on tuesdays")])
        await _lock_records(locked_table)
        with capture_logs() as logs, pytest.raises(MemoryStoreError) as failed:
            await store.retrieve(SCOPE, "deploy", 8)
        assert not isinstance(failed.value, MemoryUnavailable)
        assert "statement timeout or cancel (57014)" in str(failed.value)
        assert not [e for e in logs if e.get("message", "").startswith("memory unavailable")]
        assert [e["sqlstate"] for e in logs if e["event"] == "memory.retrieve_failed"] == ["57014"]
    finally:
        await locked_table.rollback()
        await store.aclose()


async def test_a_statement_timeout_fails_a_write_naming_it(
    schema: TempSchema, locked_table: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    store = await _connect(with_options(schema.dsn, "-cstatement_timeout=1000"))
    try:
        await _lock_records(locked_table)
        with pytest.raises(MemoryStoreError, match=r"write failed: statement timeout or cancel \(57014\)"):
            await store.write(SCOPE, [fact("deploy on tuesdays")])
    finally:
        await locked_table.rollback()
        await store.aclose()


async def test_a_statement_timeout_while_the_schema_is_prepared_fails_a_retrieve(schema: TempSchema) -> None:
    """The first operation opens the store: a statement of the schema's that times out on a server that
    answered is a fault, not the server out of reach."""
    store = PostgresMemoryStore(
        with_options(schema.dsn, "-cstatement_timeout=1000"), application_name=unique_application_name()
    )
    try:
        async with await psycopg.AsyncConnection.connect(schema.dsn) as other:
            await other.execute(_LOCK_SCHEMA)  # another replica changing the schema, for longer
            with pytest.raises(MemoryStoreError, match="DATABASE_URL") as failed:
                await store.retrieve(SCOPE, "deploy", 8)
            assert not isinstance(failed.value, MemoryUnavailable)
            assert "statement timeout" in str(failed.value)
    finally:
        await store.aclose()


async def _waiting_for_a_lock(application_name: str) -> None:
    """Until the store's backend waits for a lock another transaction holds."""
    async with await psycopg.AsyncConnection.connect(BASE_DSN, autocommit=True) as watcher:
        for _ in range(1000):
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event_type = 'Lock'",
                (application_name,),
            )
            row = await cursor.fetchone()
            if row and row[0]:
                return
            await asyncio.sleep(0.01)
    raise AssertionError("the store's write never waited for the row lock")


async def test_a_write_the_server_ends_as_a_deadlock_is_run_once_more_and_lands(schema: TempSchema) -> None:
    name = unique_application_name()
    # The store looks for a deadlock 2 s into its wait (the other asks for its lock well before then,
    # however loaded the machine), the other only after 30 s: the server ends the store's try.
    dsn = with_options(schema.dsn, "-cdeadlock_timeout=2s")
    store = await PostgresMemoryStore.connect(dsn, application_name=name)
    try:
        await store.write(SCOPE, [fact("deploy on tuesdays")])
        async with await psycopg.AsyncConnection.connect(schema.dsn) as other:
            # The other transaction holds the record's row; the store's restatement takes the scope's
            # lock, then waits for that row; the other then asks for the scope's lock: a deadlock.
            await other.execute("SET LOCAL deadlock_timeout = '30s'")
            await other.execute("SELECT 1 FROM memory_records WHERE scope_key = %s FOR UPDATE", (SCOPE,))
            with capture_logs() as logs:
                write = asyncio.ensure_future(store.write(SCOPE, [fact("Deploy on Tuesdays.")]))
                await _waiting_for_a_lock(name)
                await other.execute(_LOCK_SCOPE.encode(), (SCOPE,))
                await other.commit()
                assert await write == WriteResult(deduped=1)
        assert [e["sqlstate"] for e in logs if e["event"] == "memory.write_retried"] == ["40P01"]
        assert not [e for e in logs if e["event"] == "memory.write_failed"]
        (record,) = await store.list(SCOPE, 5)
        assert record.use_count == 1  # folded once: the rolled-back try left nothing
    finally:
        await store.aclose()


async def test_a_server_out_of_reach_degrades_a_retrieve_and_fails_a_write_as_unavailable(
    schema: TempSchema,
) -> None:
    forwarder = TcpForwarder()
    await forwarder.start()
    store = await _connect(forwarder.dsn(schema.name), timeout=0.5, reconnect_timeout=1.0, max_size=2)
    try:
        await store.write(SCOPE, [fact("deploy on tuesdays")])
        await forwarder.stop()
        with capture_logs() as logs:
            assert await store.retrieve(SCOPE, "deploy", 8) == []
        assert [e["log_level"] for e in logs if e["event"] == "memory.retrieve_failed"] == ["warning"]
        with pytest.raises(MemoryUnavailable, match="unavailable"):
            await store.write(SCOPE, [fact("lost")])
    finally:
        await store.aclose()
        await forwarder.stop()


async def test_a_second_conflict_in_a_row_is_raised_naming_it() -> None:
    tries = 0

    async def work() -> None:
        nonlocal tries
        tries += 1
        raise psycopg.errors.SerializationFailure("could not serialize access due to concurrent update")

    with pytest.raises(psycopg.errors.SerializationFailure) as raised:
        await once_more_on_conflict("merge", work)
    assert tries == 2
    error = failure("merge", SCOPE, raised.value)
    assert type(error) is MemoryStoreError
    assert str(error) == (
        "PostgreSQL memory merge failed: serialization failure (40001):"
        " could not serialize access due to concurrent update"
    )


@pytest.mark.parametrize(
    ("error", "unavailable"),
    [
        (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), True),
        (psycopg.errors.CannotConnectNow("the database system is starting up"), True),
        (psycopg.errors.ConnectionFailure("connection failure"), True),
        (psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"), True),
        (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), False),
        (psycopg.errors.DiskFull("could not extend file: No space left on device"), False),
        (psycopg.errors.DeadlockDetected("deadlock detected"), False),
    ],
)
def test_only_a_server_out_of_reach_is_unavailable(error: psycopg.Error, unavailable: bool) -> None:
    assert out_of_reach(error) is unavailable
    assert isinstance(failure("write", SCOPE, error), MemoryUnavailable) is unavailable
