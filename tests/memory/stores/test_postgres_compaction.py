"""PostgreSQL compaction by itself: an erasure by any replica leaves the database's files within
`compact_after_seconds`, and only one replica rewrites the tables at a time (an advisory lock)."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest
from structlog.testing import capture_logs

from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import (
    TcpForwarder,
    TempSchema,
    relations_holding,
    schema_rows,
    unique_application_name,
)
from tests.memory.records import fact

ORG = "org:acme"
ERASED = "quorvexil"
KEPT = "marzipank"


def replica(schema: TempSchema, compact_after_seconds: float) -> PostgresMemoryStore:
    return PostgresMemoryStore(
        schema.dsn, application_name=unique_application_name(), compact_after_seconds=compact_after_seconds
    )


async def written_and_forgotten(store: PostgresMemoryStore) -> None:
    await store.write(ORG, [fact(f"the {KEPT} runbook lives in the wiki")])
    await store.write(ORG, [fact(f"the {ERASED} vault opens at noon")])
    assert await store.forget(ORG, "mem:org:acme:2") is True


async def test_an_erasure_by_another_replica_leaves_the_files_within_compact_after_seconds(
    schema: TempSchema,
) -> None:
    watching = replica(schema, compact_after_seconds=1)
    erasing = replica(schema, compact_after_seconds=3600)  # it will not compact in this test's time
    try:
        await watching.open()
        await written_and_forgotten(erasing)
        forgotten_at = time.monotonic()
        # Within the setting from the forget, with room for the rewrite on a busy shared server (the
        # words' presence before it is shown by tests/commands/test_compact.py); never, without the
        # store's own look.
        await _marked(schema, by=forgotten_at + 1 + 9)
        await _compacted(schema)
        assert "memory_records" in relations_holding(schema.name, KEPT)
    finally:
        await watching.aclose()
        await erasing.aclose()


async def test_a_compaction_with_nothing_erased_since_the_last_rewrites_nothing(
    schema: TempSchema,
) -> None:
    store = replica(schema, compact_after_seconds=1)
    try:
        await written_and_forgotten(store)
        # Its compaction, once no session's snapshot is older than the forget (another session on a
        # shared server may hold one through the first rewrite, and then the next look rewrites again).
        await _compacted(schema)
        await _caught_up(schema)
        before = await _relfilenodes(schema)
        await asyncio.sleep(2.5)  # looks four times more
        assert await _relfilenodes(schema) == before
    finally:
        await store.aclose()


async def test_only_one_replica_rewrites_the_tables_at_a_time(schema: TempSchema) -> None:
    first, second = replica(schema, 3600), replica(schema, 3600)
    try:
        await written_and_forgotten(first)
        await second.open()
        async with await psycopg.AsyncConnection.connect(schema.dsn) as reader:
            await reader.execute("SELECT count(*) FROM memory_term_df")  # holds the table in its transaction
            compactions = [asyncio.create_task(store.compact()) for store in (first, second)]
            await asyncio.sleep(1.5)  # one rewrite now waits for the reader's lock; the other for it
            vacuuming, waiting = await _compaction_sessions(first, second)
            await reader.rollback()
        reports = await asyncio.gather(*compactions)
        assert (vacuuming, waiting) == (1, 1)
        assert max(report.waited_seconds for report in reports) >= 1.0
        assert relations_holding(schema.name, ERASED) == set()
    finally:
        await first.aclose()
        await second.aclose()


async def _marked(schema: TempSchema, by: float) -> None:
    """Once a compaction has rewritten the tables (it keeps its mark), else fails at monotonic `by`."""
    for _ in range(1000):
        if await schema_rows(schema, "SELECT 1 FROM memory_meta WHERE key = 'compacted_xmin'"):
            return
        if time.monotonic() > by:
            break
        await asyncio.sleep(0.1)
    raise AssertionError("no compaction in time")


async def _caught_up(schema: TempSchema, within: float = 30) -> None:
    """Once the compaction's mark is past every erased row's last write, else fails after `within` s."""
    deadline = time.monotonic() + within
    query = (
        "SELECT 1 FROM memory_meta WHERE key = 'compacted_xmin'"
        " AND value::xid8 > (SELECT max(changed_xid) FROM memory_records WHERE erased_at IS NOT NULL)"
    )
    for _ in range(1000):
        if await schema_rows(schema, query) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert await schema_rows(schema, query)


async def _compacted(schema: TempSchema, within: float = 30) -> None:
    """Once the erased word has left the files (else fails after `within` seconds)."""
    deadline = time.monotonic() + within
    for _ in range(1000):  # each look is a CHECKPOINT and a read of the files: a fraction of a second
        if not relations_holding(schema.name, ERASED) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert relations_holding(schema.name, ERASED) == set()


async def _compaction_sessions(*stores: PostgresMemoryStore) -> tuple[int, int]:
    """How many of the stores' compaction sessions run a VACUUM, and how many wait for the
    compaction's advisory lock."""
    names = [f"{store.application_name}-compact" for store in stores]
    async with await psycopg.AsyncConnection.connect(stores[0]._dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FILTER (WHERE query ILIKE 'VACUUM%%'),"
            " count(*) FILTER (WHERE wait_event = 'advisory')"
            " FROM pg_stat_activity WHERE application_name = ANY(%s)",
            (names,),
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def _relfilenodes(schema: TempSchema) -> list[tuple[str, int]]:
    async with await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT relname, relfilenode FROM pg_class"
            " WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r' ORDER BY relname"
        )
        return [(str(name), int(node)) for name, node in await cursor.fetchall()]


@pytest.mark.parametrize("value", [0, -1, float("nan")])
def test_a_compact_after_seconds_that_is_not_above_zero_is_refused(schema: TempSchema, value: float) -> None:
    with pytest.raises(ValueError, match="compact_after_seconds"):
        replica(schema, value)


async def test_a_version_an_older_snapshot_kept_through_a_rewrite_is_rewritten_once_it_ends(
    schema: TempSchema,
) -> None:
    store = replica(schema, compact_after_seconds=1)
    try:
        await store.write(ORG, [fact(f"the {KEPT} runbook lives in the wiki")])
        await store.write(ORG, [fact(f"the {ERASED} vault opens at noon")])
        async with await psycopg.AsyncConnection.connect(schema.dsn) as report:
            await report.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            await report.execute("SELECT count(*) FROM memory_usage")  # its snapshot, before the forget
            assert await store.forget(ORG, "mem:org:acme:2") is True
            await store.compact()  # the snapshot may still read the old version: the rewrite keeps it
            assert "memory_records" in relations_holding(schema.name, ERASED)
            await report.rollback()
        await _compacted(schema)  # the store's next look finds it still to compact
    finally:
        await store.aclose()


async def test_a_failed_look_is_a_warning_and_the_next_one_compacts(schema: TempSchema) -> None:
    forwarder = TcpForwarder()
    await forwarder.start()
    watching = PostgresMemoryStore(
        forwarder.dsn(schema.name), application_name=unique_application_name(), compact_after_seconds=1
    )
    erasing = replica(schema, compact_after_seconds=3600)
    try:
        await watching.open()
        with capture_logs() as logs:
            await forwarder.stop()  # the server is gone for this replica
            await written_and_forgotten(erasing)
            await asyncio.sleep(1.5)  # three looks at least
        failed = [e for e in logs if e["event"] == "memory.compact_failed"]
        assert failed and {e["log_level"] for e in failed} == {"warning"}
        assert ERASED not in str(failed)
        await forwarder.start()
        await _compacted(schema)
    finally:
        await watching.aclose()
        await erasing.aclose()
        await forwarder.stop()
