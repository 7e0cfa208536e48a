"""The review queue on the real PostgreSQL server: what a pending row is kept out of (every read, the
document frequencies, the vectors), what approve brings it into, and what reject and expiry erase —
each with its curation entry in the same transaction. Every test owns a fresh schema."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from structlog.testing import capture_logs

from memory.stores.contract import CuratingStore
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import CurationEntry, MemoryStoreError, WriteResult
from tests.memory.embedders import ConceptEmbedder
from tests.memory.postgres_support import TempSchema, schema_rows, unique_application_name
from tests.memory.records import DAY, NOW, fact

ORG = "org:acme"


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
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(schema: TempSchema, clock: Clock) -> AsyncIterator[PostgresMemoryStore]:
    opened = await PostgresMemoryStore.connect(
        schema.dsn, clock=clock, application_name=unique_application_name()
    )
    try:
        yield opened
    finally:
        await opened.aclose()


async def documents(schema: TempSchema, scope_key: str = ORG) -> int:
    """The scope's active-record count in its document frequencies (the term '')."""
    rows = await schema_rows(
        schema, "SELECT df FROM memory_term_df WHERE scope_key = %s AND term = ''", (scope_key,)
    )
    return int(rows[0][0]) if rows else 0


async def row(schema: TempSchema, record_id: str) -> tuple[object, ...]:
    [found] = await schema_rows(
        schema,
        "SELECT status, text, norm, keywords, erased_reason, embedding FROM memory_records WHERE id = %s",
        (record_id,),
    )
    return found


def test_the_postgres_store_is_a_curating_store(store: PostgresMemoryStore) -> None:
    assert isinstance(store, CuratingStore)


async def test_a_pending_record_is_in_no_read_and_not_counted(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write(ORG, [fact("deploys run on tuesdays")])
    assert await store.write_pending(ORG, [fact("deploys freeze in december")]) == WriteResult(inserted=1)
    assert [r.id for r in await store.retrieve(ORG, "deploys december", 8)] == ["mem:org:acme:1"]
    assert list(await store.retrieve_many([ORG], "december freeze", 8)) == []
    assert [r.id for r in await store.list(ORG, 10)] == ["mem:org:acme:1"]
    assert await store.list(ORG, 10, query="december") == []
    assert await store.fetch(ORG, ["mem:org:acme:2"]) == []
    assert await documents(schema) == 1  # only the active record counts
    [waiting] = await store.pending(ORG, 10)
    assert (waiting.id, waiting.status, waiting.text) == (
        "mem:org:acme:2",
        "pending",
        "deploys freeze in december",
    )


async def test_approve_brings_the_record_into_reads_and_counts_and_logs_who(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write_pending(ORG, [fact("deploys freeze in december")])
    approved = await store.approve(ORG, "mem:org:acme:1", "user:slack:U1")
    assert approved is not None and approved.status == "active"
    assert [r.id for r in await store.retrieve(ORG, "december freeze", 8)] == ["mem:org:acme:1"]
    assert await store.pending(ORG, 10) == []
    assert await documents(schema) == 1
    assert await store.curation_log(ORG, "mem:org:acme:1", 10) == [
        CurationEntry("mem:org:acme:1", ORG, "approved", "user:slack:U1", NOW)
    ]


async def test_approve_gives_the_record_its_vector_and_none_while_pending(
    schema: TempSchema, clock: Clock
) -> None:
    embedder = ConceptEmbedder()
    store = PostgresMemoryStore(
        schema.dsn, clock=clock, embedder=embedder, application_name=unique_application_name()
    )
    try:
        await store.write_pending(ORG, [fact("deploys freeze in december")])
        assert (await row(schema, "mem:org:acme:1"))[5] is None
        await store.approve(ORG, "mem:org:acme:1", "user:slack:U1")
        assert (await row(schema, "mem:org:acme:1"))[5] is not None
    finally:
        await store.aclose()


async def test_reject_erases_the_text_and_logs_it_once(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write_pending(ORG, [fact("deploys freeze in december", keywords=("freeze",))])
    assert await store.reject(ORG, "mem:org:acme:1", "user:slack:U1") is True
    assert await row(schema, "mem:org:acme:1") == ("forgotten", "", "", [], "rejected", None)
    assert await store.pending(ORG, 10) == []
    assert await store.reject(ORG, "mem:org:acme:1", "user:slack:U1") is False
    assert await store.approve(ORG, "mem:org:acme:1", "user:slack:U1") is None
    log = await store.curation_log(ORG, "mem:org:acme:1", 10)
    assert [(e.action, e.actor) for e in log] == [("rejected", "user:slack:U1")]


async def test_expire_pending_erases_the_old_pending_of_every_scope(
    store: PostgresMemoryStore, schema: TempSchema, clock: Clock
) -> None:
    await store.write_pending(ORG, [fact("old waiting")])
    await store.write_pending("org:other", [fact("old waiting elsewhere")])
    await store.write(ORG, [fact("old but active")])
    clock.now += 10 * DAY
    await store.write_pending(ORG, [fact("fresh waiting")])
    assert await store.expire_pending(NOW + DAY) == 2
    assert [r.text for r in await store.pending(ORG, 10)] == ["fresh waiting"]
    assert await store.pending("org:other", 10) == []
    assert (await row(schema, "mem:org:acme:1"))[::4] == ("forgotten", "expired")
    assert [r.text for r in await store.list(ORG, 10)] == ["old but active"]
    [expired] = await store.curation_log("org:other", "mem:org:other:1", 10)
    assert (expired.action, expired.actor, expired.at) == ("expired", "system", NOW + 10 * DAY)


async def test_an_approval_whose_log_entry_cannot_be_written_changes_nothing(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write_pending(ORG, [fact("deploys freeze in december")])
    await schema_rows(
        schema, "ALTER TABLE memory_curation_log ADD CONSTRAINT no_approvals CHECK (action <> 'approved')"
    )
    with pytest.raises(MemoryStoreError, match="approve"):
        await store.approve(ORG, "mem:org:acme:1", "user:slack:U1")
    assert [r.id for r in await store.pending(ORG, 10)] == ["mem:org:acme:1"]
    assert await documents(schema) == 0


async def test_a_rejection_whose_log_entry_cannot_be_written_keeps_the_record(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write_pending(ORG, [fact("deploys freeze in december")])
    await schema_rows(
        schema, "ALTER TABLE memory_curation_log ADD CONSTRAINT no_rejections CHECK (action <> 'rejected')"
    )
    with pytest.raises(MemoryStoreError, match="reject"):
        await store.reject(ORG, "mem:org:acme:1", "user:slack:U1")
    assert (await row(schema, "mem:org:acme:1"))[:2] == ("pending", "deploys freeze in december")


async def test_two_stores_approving_one_record_at_once_approve_it_once(
    store: PostgresMemoryStore, schema: TempSchema, clock: Clock
) -> None:
    other = PostgresMemoryStore(schema.dsn, clock=clock, application_name=unique_application_name())
    try:
        await other.open()
        await store.write_pending(ORG, [fact("deploys freeze in december")])
        results = await asyncio.gather(
            store.approve(ORG, "mem:org:acme:1", "user:slack:U1"),
            other.approve(ORG, "mem:org:acme:1", "user:slack:U2"),
        )
        assert sum(result is not None for result in results) == 1
        assert [e.action for e in await store.curation_log(ORG, "mem:org:acme:1", 10)] == ["approved"]
        assert await documents(schema) == 1
    finally:
        await other.aclose()


async def test_another_store_with_warm_vectors_finds_an_approval_by_meaning_at_once(
    schema: TempSchema, clock: Clock
) -> None:
    embedder = ConceptEmbedder()
    approving, reading = (
        PostgresMemoryStore(
            schema.dsn, clock=clock, embedder=embedder, application_name=unique_application_name()
        )
        for _ in range(2)
    )
    try:
        await approving.write(ORG, [fact("lunch menu pasta")])
        await approving.write_pending(ORG, [fact("rollout notes")])
        assert await reading.retrieve(ORG, "when is the release?", 5) == []  # its vectors are cached now
        await approving.approve(ORG, "mem:org:acme:2", "user:slack:U1")
        assert [r.id for r in await reading.retrieve(ORG, "when is the release?", 5)] == ["mem:org:acme:2"]
    finally:
        await approving.aclose()
        await reading.aclose()


async def test_every_curation_action_logs_its_event_with_ids_and_counts_only(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    secret = "Quokkaflight"
    with capture_logs() as logs:
        await store.write_pending(ORG, [fact(f"the vault code is {secret}"), fact("deploy alpha")])
        await store.approve(ORG, "mem:org:acme:1", "user:slack:U1")
        await store.reject(ORG, "mem:org:acme:2", "user:slack:U1")
        await store.edit(ORG, "mem:org:acme:1", f"the vault code is {secret} again", "user:slack:U1")
        await store.write(ORG, [fact("deploy beta")])
        await store.merge(ORG, "mem:org:acme:3", ["mem:org:acme:4"], "user:slack:U1")
        await store.write_pending(ORG, [fact("deploy gamma")])
        clock.now += 15 * DAY
        await store.expire_pending(clock.now - 14 * DAY)

    def events(name: str) -> list[dict[str, object]]:
        return [dict(entry) for entry in logs if entry["event"] == name]

    assert [e["id"] for e in events("memory.approve")] == ["mem:org:acme:1"]
    assert [e["id"] for e in events("memory.reject")] == ["mem:org:acme:2"]
    assert [(e["id"], e["new_id"]) for e in events("memory.edit")] == [("mem:org:acme:1", "mem:org:acme:3")]
    assert [(e["survivor"], e["merged"]) for e in events("memory.merge")] == [("mem:org:acme:3", 1)]
    assert [e["expired"] for e in events("memory.pending_expired")] == [1]
    assert secret.lower() not in repr(logs).lower()
