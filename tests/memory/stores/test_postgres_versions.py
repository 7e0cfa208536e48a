"""Edits, history, merges and the curation log on the real PostgreSQL server: a record's chain of
versions walked both ways, forgetting that erases every version's text, the write path's own entries,
and the migration of a table from before curation. Every test owns its schema: an emptied one, or a new one
where it makes or changes tables itself."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memory.rules.retention import Retention
from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import TempSchema, schema_rows, unique_application_name
from tests.memory.records import DAY, NOW, fact

ORG = "org:acme"
ADMIN = "user:slack:U1"


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def schema(emptied_or_new_schema: TempSchema) -> TempSchema:
    return emptied_or_new_schema


@pytest.fixture
async def store(schema: TempSchema, clock: Clock) -> AsyncIterator[PostgresMemoryStore]:
    opened = await PostgresMemoryStore.connect(
        schema.dsn, clock=clock, application_name=unique_application_name()
    )
    try:
        yield opened
    finally:
        await opened.aclose()


async def texts(schema: TempSchema) -> list[tuple[str, str, str]]:
    rows = await schema_rows(schema, "SELECT id, status, text FROM memory_records ORDER BY scope_key, seq")
    return [(str(a), str(b), str(c)) for a, b, c in rows]


async def test_forgetting_one_version_erases_every_version_s_text(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write(ORG, [fact("deploys run on tuesdays"), fact("unrelated stays")])
    await store.edit(ORG, "mem:org:acme:1", "deploys run on thursdays", ADMIN)
    assert await store.forget(ORG, "mem:org:acme:3") is True
    assert await texts(schema) == [
        ("mem:org:acme:1", "superseded", ""),
        ("mem:org:acme:2", "active", "unrelated stays"),
        ("mem:org:acme:3", "forgotten", ""),
    ]
    history = await store.history(ORG, "mem:org:acme:1")
    assert [(v.text, v.erased_reason) for v in history] == [(None, "forgotten"), (None, "forgotten")]


@pytest.mark.new_schema
async def test_a_table_from_before_curation_admits_pending_after_opening(schema: TempSchema) -> None:
    old = await PostgresMemoryStore.connect(schema.dsn, application_name=unique_application_name())
    await old.write(ORG, [fact("kept through the migration")])
    await old.aclose()
    await schema_rows(
        schema,
        "DROP TABLE memory_curation_log;"
        " ALTER TABLE memory_records DROP CONSTRAINT memory_records_status_check;"
        " ALTER TABLE memory_records ADD CONSTRAINT memory_records_status_check"
        " CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted'))",
    )
    store = await PostgresMemoryStore.connect(schema.dsn, application_name=unique_application_name())
    try:
        assert (await store.write_pending(ORG, [fact("waits after the migration")])).inserted == 1
        assert [r.text for r in await store.list(ORG, 10)] == ["kept through the migration"]
        assert await store.approve(ORG, "mem:org:acme:2", ADMIN) is not None
    finally:
        await store.aclose()


async def test_entries_past_the_audit_retention_leave_the_table_on_the_next_logged_action(
    schema: TempSchema, clock: Clock
) -> None:
    store = PostgresMemoryStore(
        schema.dsn,
        clock=clock,
        retention=Retention(audit_days=30),
        application_name=unique_application_name(),
    )
    try:
        await store.write_pending(ORG, [fact("rule one"), fact("rule two")])
        await store.approve(ORG, "mem:org:acme:1", ADMIN)
        clock.now += 31 * DAY
        await store.approve(ORG, "mem:org:acme:2", ADMIN)
        rows = await schema_rows(schema, "SELECT record_id FROM memory_curation_log")
        assert rows == [("mem:org:acme:2",)]
    finally:
        await store.aclose()
