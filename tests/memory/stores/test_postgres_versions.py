"""Edits, history, merges and the curation log on the real PostgreSQL server: a record's chain of
versions walked both ways, forgetting that erases every version's text, the write path's own entries,
and the migration of a table from before curation. Every test owns a fresh schema."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import CurationEntry
from tests.memory.postgres_support import TempSchema, schema_rows, temp_schema, unique_application_name
from tests.memory.records import NOW, fact

ORG = "org:acme"
ADMIN = "user:slack:U1"


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def schema() -> Iterator[TempSchema]:
    with temp_schema() as created:
        yield created


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


async def texts(schema: TempSchema) -> list[tuple[str, str, str]]:
    rows = await schema_rows(schema, "SELECT id, status, text FROM memory_records ORDER BY scope_key, seq")
    return [(str(a), str(b), str(c)) for a, b, c in rows]


async def test_an_edit_supersedes_the_active_record_with_a_new_active_version(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    await store.write(ORG, [fact("deploys run on tuesdays", keywords=("deploy",))])
    clock.now += 60
    new = await store.edit(ORG, "mem:org:acme:1", "deploys run on thursdays", ADMIN)
    assert new is not None
    assert (new.id, new.status, new.supersedes, new.created_at) == (
        "mem:org:acme:2",
        "active",
        "mem:org:acme:1",
        NOW + 60,
    )
    assert (new.source_thread_key, new.source_run_id, new.origin) == ("slack:C1:1.0", "run-1", "unknown")
    assert [r.id for r in await store.retrieve(ORG, "deploys tuesdays thursdays", 8)] == ["mem:org:acme:2"]
    assert await store.curation_log(ORG, "mem:org:acme:2", 10) == [
        CurationEntry("mem:org:acme:1", ORG, "edited", ADMIN, NOW + 60, "mem:org:acme:2")
    ]


async def test_an_edit_of_a_pending_record_waits_too(store: PostgresMemoryStore) -> None:
    await store.write_pending(ORG, [fact("deploys freeze in december")])
    new = await store.edit(ORG, "mem:org:acme:1", "deploys freeze from mid december", ADMIN)
    assert new is not None and new.status == "pending"
    assert [r.id for r in await store.pending(ORG, 10)] == ["mem:org:acme:2"]
    assert await store.list(ORG, 10) == []


async def test_an_edit_of_what_is_neither_active_nor_pending_is_none(store: PostgresMemoryStore) -> None:
    await store.write(ORG, [fact("deploys run on tuesdays")])
    await store.edit(ORG, "mem:org:acme:1", "deploys run on thursdays", ADMIN)
    assert await store.edit(ORG, "mem:org:acme:1", "again", ADMIN) is None  # superseded now
    assert await store.edit(ORG, "mem:org:acme:7", "unknown", ADMIN) is None
    assert await store.edit(ORG, "mem:org:other:2", "foreign", ADMIN) is None


async def test_an_edit_is_validated_and_redacted_like_any_write(store: PostgresMemoryStore) -> None:
    await store.write(ORG, [fact("deploys run on tuesdays")])
    with pytest.raises(ValueError, match="text"):
        await store.edit(ORG, "mem:org:acme:1", "   ", ADMIN)
    new = await store.edit(ORG, "mem:org:acme:1", "the deploy password=hunter2hunter2 works", ADMIN)
    assert new is not None and "hunter2hunter2" not in new.text


async def test_history_walks_the_chain_both_ways_oldest_first_with_its_entries(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    await store.write(ORG, [fact("deploys run on tuesdays")])
    clock.now += 60
    await store.edit(ORG, "mem:org:acme:1", "deploys run on thursdays", ADMIN)
    await store.write(ORG, [fact("unrelated")])
    clock.now += 60
    await store.edit(ORG, "mem:org:acme:2", "deploys run on fridays", ADMIN)
    for asked in ("mem:org:acme:1", "mem:org:acme:2", "mem:org:acme:4"):
        history = await store.history(ORG, asked)
        assert [(v.id, v.status, v.text) for v in history] == [
            ("mem:org:acme:1", "superseded", "deploys run on tuesdays"),
            ("mem:org:acme:2", "superseded", "deploys run on thursdays"),
            ("mem:org:acme:4", "active", "deploys run on fridays"),
        ]
    history = await store.history(ORG, "mem:org:acme:4")
    assert [[e.action for e in v.entries] for v in history] == [["edited"], ["edited"], []]
    assert await store.history(ORG, "mem:org:acme:9") == []


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


async def test_forgetting_a_superseded_version_forgets_nothing(store: PostgresMemoryStore) -> None:
    await store.write(ORG, [fact("deploys run on tuesdays")])
    await store.edit(ORG, "mem:org:acme:1", "deploys run on thursdays", ADMIN)
    assert await store.forget(ORG, "mem:org:acme:1") is False
    assert [r.id for r in await store.list(ORG, 10)] == ["mem:org:acme:2"]


async def test_a_reflected_correction_and_a_restatement_are_logged_by_the_write(
    store: PostgresMemoryStore,
) -> None:
    await store.write(ORG, [fact("deploys run on tuesdays")])
    await store.write(ORG, [fact("Deploys run on Tuesdays.")])
    await store.write(ORG, [fact("deploys run on thursdays", supersedes="mem:org:acme:1")])
    log = await store.curation_log(ORG, "mem:org:acme:1", 10)
    assert [(e.action, e.actor, e.related_id) for e in log] == [
        ("superseded", "run:run-1", "mem:org:acme:2"),
        ("folded", "run:run-1", None),
    ]


async def test_the_log_names_a_record_as_subject_or_related_newest_first_limited(
    store: PostgresMemoryStore,
) -> None:
    await store.record_curation(CurationEntry("mem:org:acme:1", ORG, "remembered", ADMIN, NOW))
    await store.record_curation(
        CurationEntry("mem:org:acme:2", ORG, "merged", ADMIN, NOW + 1, "mem:org:acme:1")
    )
    await store.record_curation(CurationEntry("mem:org:acme:1", "org:other", "forgotten", ADMIN, NOW + 2))
    log = await store.curation_log(ORG, "mem:org:acme:1", 10)
    assert [e.action for e in log] == ["merged", "remembered"]
    assert [e.action for e in await store.curation_log(ORG, "mem:org:acme:1", 1)] == ["merged"]


async def test_an_entry_with_an_unknown_action_or_no_actor_is_refused_naming_it(
    store: PostgresMemoryStore,
) -> None:
    with pytest.raises(ValueError, match="action"):
        await store.record_curation(CurationEntry("mem:org:acme:1", ORG, "deleted", ADMIN, NOW))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="actor"):
        await store.record_curation(CurationEntry("mem:org:acme:1", ORG, "remembered", "", NOW))


async def test_merge_folds_the_duplicates_usage_into_the_survivor_and_erases_them(
    store: PostgresMemoryStore, schema: TempSchema, clock: Clock
) -> None:
    await store.write(
        ORG, [fact("deploys happen tuesdays"), fact("deploys happen on tuesday"), fact("other")]
    )
    clock.now += 60
    await store.retrieve(ORG, "deploys tuesday", 8)  # each of the two used once, now
    merged = await store.merge(
        ORG, "mem:org:acme:1", ["mem:org:acme:2", "mem:org:acme:1", "mem:org:acme:9"], ADMIN
    )
    assert merged == 1
    [survivor] = await store.fetch(ORG, ["mem:org:acme:1"])
    assert (survivor.use_count, survivor.last_used_at) == (2, NOW + 60)
    assert (await texts(schema))[1] == ("mem:org:acme:2", "forgotten", "")
    [entry] = await store.curation_log(ORG, "mem:org:acme:2", 10)
    assert (entry.action, entry.related_id, entry.actor) == ("merged", "mem:org:acme:1", ADMIN)
    assert [r.id for r in await store.active_records(ORG)] == ["mem:org:acme:1", "mem:org:acme:3"]


async def test_merge_into_a_record_that_is_not_active_merges_nothing(store: PostgresMemoryStore) -> None:
    await store.write(ORG, [fact("deploys happen tuesdays"), fact("deploys happen on tuesday")])
    await store.forget(ORG, "mem:org:acme:1")
    assert await store.merge(ORG, "mem:org:acme:1", ["mem:org:acme:2"], ADMIN) == 0
    assert [r.id for r in await store.active_records(ORG)] == ["mem:org:acme:2"]


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
