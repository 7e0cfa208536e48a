"""PostgresMemoryStore against the real PostgreSQL server on 127.0.0.1:5432 (issue 10).

Every test owns its schema (tests/memory/postgres_support.py): one an earlier test's store made, its rows
deleted, where the test only opens stores and touches their rows; a new one (marked `new_schema`) where
what a store makes of a new schema, or of tables it did not make, or the planner's view of the tables is
the point, or the test changes the tables. The server unreachable fails the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from structlog.testing import capture_logs

from config.settings import load_settings
from memory.rules.engine import plan_eviction
from memory.stores.build import MemoryConfigError, build_memory_store
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.postgres import sql as postgres_store
from memory.stores.postgres.store import PostgresMemoryStore, match_query
from memory.types import MAX_TEXT_CHARS, MemoryCandidate, MemoryRecord, MemoryStoreError, WriteResult
from tests.memory.postgres_support import (
    STORED_RECORDS,
    TcpForwarder,
    TempSchema,
    terminate_backends,
    unique_application_name,
)
from tests.memory.records import DAY, NOW, fact
from tests.memory.service_support import free_port

SCOPE = "org:acme"
# Another scope in SCOPE's partition of `memory_records` (hash partitions, partitions.py): a crowd
# there shows a plan that reads past its scope's rows, as it would in one table.
CROWD = "org:other10"
T = TypeVar("T")


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


async def run_sql(schema: TempSchema, query: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    """Inspect or shape the schema from outside the store (a second client of the same server)."""
    async with await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn:
        cursor = await conn.execute(query.encode(), params)
        return await cursor.fetchall() if cursor.description else []


async def count_update_statements(schema: TempSchema) -> None:
    """A statement-level trigger logs every UPDATE statement on the records and usage tables, with
    the table's name and the statement's row count."""
    for table in ("memory_records", "memory_usage"):
        await run_sql(
            schema,
            f"""
            CREATE TABLE IF NOT EXISTS update_log (tab text NOT NULL, n integer NOT NULL);
            CREATE OR REPLACE FUNCTION log_update() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO update_log SELECT TG_TABLE_NAME, count(*) FROM new_rows; RETURN NULL; END $$;
            CREATE TRIGGER log_updates AFTER UPDATE ON {table}
                REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION log_update();
            """,
        )


def ids(records: Sequence[MemoryRecord]) -> list[str]:
    return [r.id for r in records]


async def eventually(action: Callable[[], Awaitable[T]], within: float) -> T:
    """The action's first success within `within` seconds (the pool reconnects in the background)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await action()
        except MemoryStoreError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


# --- round trip, scope isolation ------------------------------------------------------------------


async def test_write_then_retrieve_round_trips_namespaced_ids_and_bumps_usage(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    assert isinstance(store, MemoryStore)
    candidate = MemoryCandidate(
        kind="summary",
        text="We deploy on Tuesdays",
        source_thread_key="slack:C1:1.0",
        source_run_id="run-7",
        keywords=("release", "schedule"),
        confidence=0.75,
    )
    assert await store.write(SCOPE, [candidate, fact("CI runs on main")]) == WriteResult(inserted=2)
    clock.now += 60
    [found] = await store.retrieve(SCOPE, "when is the release?", 8)
    assert found == MemoryRecord(
        id="mem:org:acme:1",
        scope_key=SCOPE,
        kind="summary",
        text="We deploy on Tuesdays",
        source_thread_key="slack:C1:1.0",
        source_run_id="run-7",
        keywords=("release", "schedule"),
        created_at=NOW,
        confidence=0.75,
        last_used_at=NOW + 60,
        use_count=1,
        observed_at=NOW,  # the candidate named none: observed when written
    )
    [stored] = await store.list(SCOPE, 10, query="release")
    assert stored == found  # the bump is persisted, exactly as returned


async def test_scopes_never_see_each_other(store: PostgresMemoryStore) -> None:
    await store.write("org:acme", [fact("deploy on tuesdays")])
    await store.write("user:slack:U1", [fact("deploy on tuesdays")])  # same text: no cross-scope dedup
    assert ids(await store.list("user:slack:U1", 10)) == ["mem:user:slack:U1:1"]
    assert ids(await store.retrieve("org:acme", "deploy", 8)) == ["mem:org:acme:1"]
    assert await store.retrieve("org:other", "deploy", 8) == []
    assert await store.forget("user:slack:U1", "mem:org:acme:1") is False  # foreign id
    result = await store.write("user:slack:U1", [fact("new", supersedes="mem:org:acme:1")])
    assert result == WriteResult(inserted=1)  # a foreign id supersedes nothing
    assert [r.status for r in await store.list("org:acme", 10)] == ["active"]


def test_every_data_statement_filters_by_scope_key() -> None:
    statements = {
        name: value
        for name, value in vars(postgres_store).items()
        if isinstance(value, str)
        and name.startswith(("_SELECT", "_BUMP", "_SUPERSEDE", "_EVICT", "_FORGET", "_COUNT", "_MAX_SEQ"))
    }
    assert len(statements) >= 12
    for name, statement in statements.items():
        assert "WHERE scope_key = %" in statement, name


# --- dedup / supersede (§8, §18) ------------------------------------------------------------------


async def test_dedup_is_case_and_whitespace_insensitive_and_bumps_use_count(
    store: PostgresMemoryStore,
) -> None:
    await store.write(SCOPE, [fact("We deploy on Tuesdays")])
    assert await store.write(SCOPE, [fact("  we DEPLOY   on tuesdays ")]) == WriteResult(deduped=1)
    [only] = await store.list(SCOPE, 10)
    assert only.use_count == 1 and only.last_used_at == NOW  # a restatement confirms: used now


async def test_a_later_candidate_dedups_against_its_own_batch(store: PostgresMemoryStore) -> None:
    assert await store.write(SCOPE, [fact("x"), fact("X")]) == WriteResult(inserted=1, deduped=1)


async def test_supersede_flips_the_target_hides_it_and_points_at_it(store: PostgresMemoryStore) -> None:
    await store.write(SCOPE, [fact("deploys on tuesdays")])
    result = await store.write(SCOPE, [fact("deploys on thursdays", supersedes="mem:org:acme:1")])
    assert result == WriteResult(inserted=1, superseded=1)
    [new] = await store.retrieve(SCOPE, "deploys tuesdays thursdays", 8)
    assert new.id == "mem:org:acme:2" and new.supersedes == "mem:org:acme:1"
    assert ids(await store.list(SCOPE, 10)) == ["mem:org:acme:2"]
    # A superseded record is never a dedup target: restating it inserts a fresh active record.
    assert await store.write(SCOPE, [fact("deploys on tuesdays")]) == WriteResult(inserted=1)


async def test_unknown_malformed_or_empty_supersedes_ids_supersede_nothing(
    store: PostgresMemoryStore,
) -> None:
    await store.write(SCOPE, [fact("alpha")])
    for bad in ("mem:org:acme:99", "mem:org:acme:01", "nonsense", f"mem:org:acme:{2**70}"):
        assert await store.write(SCOPE, [fact(f"beta {bad}", supersedes=bad)]) == WriteResult(inserted=1)
    # An empty supersedes is no supersede at all: it dedups against the whole active set.
    assert await store.write(SCOPE, [fact("ALPHA", supersedes="")]) == WriteResult(deduped=1)
    assert (await store.list(SCOPE, 1, query="alpha"))[0].status == "active"


async def test_collision_guard_and_earliest_duplicate_takes_the_dedup(store: PostgresMemoryStore) -> None:
    await store.write(SCOPE, [fact("x"), fact("y")])
    # A correction whose text collides with an unrelated record still lands (collision guard)...
    result = await store.write(SCOPE, [fact("x", supersedes="mem:org:acme:2")])
    assert result == WriteResult(inserted=1, superseded=1)
    # ...so two actives share a norm now; a plain restatement bumps the earliest.
    assert await store.write(SCOPE, [fact("X")]) == WriteResult(deduped=1)
    by_id = {r.id: r for r in await store.list(SCOPE, 10)}
    assert by_id["mem:org:acme:1"].use_count == 1 and by_id["mem:org:acme:3"].use_count == 0
    # Restating the supersede target's own text is a no-op bump of the target.
    assert await store.write(SCOPE, [fact("x", supersedes="mem:org:acme:3")]) == WriteResult(deduped=1)


# --- retrieval (§17) ------------------------------------------------------------------------------


async def test_rank_ordering_rescues_a_relevant_old_record_beyond_the_500_most_recent(
    schema: TempSchema, clock: Clock
) -> None:
    store = await PostgresMemoryStore.connect(schema.dsn, cap=1000, clock=clock)
    try:
        await store.write(SCOPE, [fact("rollback the deploy")])
        clock.now += DAY
        for batch in range(12):
            await store.write(SCOPE, [fact(f"deploy note {batch} {n}") for n in range(50)])
        clock.now += DAY
        found = await store.retrieve(SCOPE, "deploy rollback", 8)
        assert len(found) == 8 and found[0].id == "mem:org:acme:1"
    finally:
        await store.aclose()


async def test_the_50_candidate_floor_lets_the_engine_rank_a_small_scope(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    await store.write(SCOPE, [fact(f"deploy {n}") for n in range(49)])
    clock.now += DAY
    # Newest, so the engine's favourite; long, so the text rank puts it last of the 50 matches.
    wordy = "deploy " + " ".join(f"filler{n}" for n in range(40))
    await store.write(SCOPE, [fact(wordy)])
    [best] = await store.retrieve(SCOPE, "deploy", 1)
    assert best.id == "mem:org:acme:50"


async def test_match_uses_the_24_longest_distinct_tokens(store: PostgresMemoryStore) -> None:
    long_tokens = [f"token{n:02d}" for n in range(24)]
    await store.write(SCOPE, [fact("only zz here"), fact(f"has {long_tokens[-1]}")])
    query = " ".join([*long_tokens, "zz", "zz"])  # 25 distinct: "zz" is the shortest and dropped
    assert match_query(query) == " | ".join(f"'{t}'" for t in long_tokens)
    assert ids(await store.retrieve(SCOPE, query, 8)) == ["mem:org:acme:2"]
    # Ties by length keep the first seen.
    assert match_query(" ".join(f"t{n:03d}" for n in range(30))) == " | ".join(
        f"'t{n:03d}'" for n in range(24)
    )


@pytest.mark.new_schema
async def test_usage_bump_is_one_statement_even_at_50_ids(
    store: PostgresMemoryStore, schema: TempSchema, clock: Clock
) -> None:
    await store.write(SCOPE, [fact(f"deploy {n}") for n in range(50)])
    await store.write(SCOPE, [fact(f"deploy {n}") for n in range(50, 60)])
    await count_update_statements(schema)
    clock.now += 5
    found = await store.retrieve(SCOPE, "deploy", 50)
    assert len(found) == 50 and all(r.last_used_at == NOW + 5 and r.use_count == 1 for r in found)
    assert await run_sql(schema, "SELECT tab, n FROM update_log") == []  # held back
    await store.list(SCOPE, 1)  # any other operation writes the held-back bumps first
    # One statement, on the narrow usage rows: no record row is rewritten by a use.
    assert await run_sql(schema, "SELECT tab, n FROM update_log") == [("memory_usage", 50)]
    bumped = await run_sql(schema, f"SELECT count(*) FROM {STORED_RECORDS} WHERE use_count = 1")
    assert bumped == [(50,)]


async def test_no_query_tokens_or_no_limit_returns_nothing(store: PostgresMemoryStore) -> None:
    await store.write(SCOPE, [fact("deploy")])
    assert await store.retrieve(SCOPE, "   ...  ", 8) == []
    assert await store.retrieve(SCOPE, "deploy", 0) == []
    assert await store.list(SCOPE, 10, query="!!") == []


async def test_non_ascii_text_is_stored_exactly_and_found_by_its_ascii_tokens(
    store: PostgresMemoryStore,
) -> None:
    text = "Le café ferme à 18h — Zürich 東京 🚀"
    await store.write(SCOPE, [fact(text, keywords=("Straße",))])
    [found] = await store.retrieve(SCOPE, "ferme 18h", 8)
    assert found.text == text and found.keywords == ("Straße",)
    assert ids(await store.retrieve(SCOPE, "rich", 8)) == [found.id]  # "Zürich" → tokens z, rich
    for accented in ("éàü", "東京", "🚀"):
        assert await store.retrieve(SCOPE, accented, 8) == []


@pytest.mark.parametrize(
    "query",
    [
        "'deploy'",
        '"deploy"',
        "deploy:*",
        "!deploy",
        "deploy & !tuesday",
        "deploy <-> tuesday",
        "deploy | x",
        "NEAR(deploy tuesday)",
        "deploy OR -tuesday",
        "deploy\\",
        "'); DROP TABLE memory_records; --deploy",
        "(deploy",
        "deploy*",
    ],
)
async def test_tsquery_syntax_in_queries_is_inert(store: PostgresMemoryStore, query: str) -> None:
    await store.write(SCOPE, [fact("we deploy on tuesday"), fact("unrelated")])
    assert ids(await store.retrieve(SCOPE, query, 8)) == ["mem:org:acme:1"]
    assert ids(await store.list(SCOPE, 8, query=query)) == ["mem:org:acme:1"]


async def test_same_operations_give_the_same_answers_as_the_in_process_store(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    """One algorithm: with ≤50 matches the prefilter hands the engine every match, so the answers
    (ids, order, usage, statuses) must equal the in-process store's, step by step."""
    reference = InProcessMemoryStore(cap=6, clock=clock)
    small = await PostgresMemoryStore.connect(
        store._dsn, cap=6, clock=clock, application_name=unique_application_name()
    )
    scope = "repo:owner/name"
    steps: list[tuple[str, Any]] = [
        ("write", [fact("We deploy on Tuesdays", keywords=("release",)), fact("CI runs on main")]),
        ("write", [fact("we deploy on tuesdays"), fact("Café au lait at 10am"), fact("x"), fact("X")]),
        ("retrieve", ("deploy release", 8)),
        ("write", [fact("We deploy on Thursdays", supersedes="mem:repo:owner/name:1")]),
        ("retrieve", ("caf 10am naïve", 3)),
        ("write", [fact(f"note {n} deploy") for n in range(5)]),
        ("retrieve", ("deploy", 4)),
        ("forget", "mem:repo:owner/name:4"),
        ("list", (10, None)),
        ("list", (10, "deploy main")),
        ("write", [fact("x", supersedes="mem:repo:owner/name:2"), fact("note 1 deploy")]),
        ("retrieve", ('"deploy" OR x*', 8)),
        ("list", (3, None)),
    ]
    try:
        for index, (action, argument) in enumerate(steps):
            clock.now += 3600
            if action == "write":
                got: object = await small.write(scope, argument)
                want: object = await reference.write(scope, argument)
            elif action == "retrieve":
                got = await small.retrieve(scope, *argument)
                want = await reference.retrieve(scope, *argument)
            elif action == "list":
                got = await small.list(scope, *argument)
                want = await reference.list(scope, *argument)
            else:
                got = await small.forget(scope, argument)
                want = await reference.forget(scope, argument)
            assert got == want, f"step {index}: {action}"
        assert await small.list(scope, 50) == await reference.list(scope, 50)
    finally:
        await small.aclose()


# --- list / forget (§24, §26) ---------------------------------------------------------------------


async def test_list_is_newest_first_filtered_limited_after_the_filter_and_never_bumps(
    store: PostgresMemoryStore,
) -> None:
    await store.write(SCOPE, [fact("deploy a"), fact("other"), fact("deploy b"), fact("deploy c")])
    assert ids(await store.list(SCOPE, 2)) == ["mem:org:acme:4", "mem:org:acme:3"]
    assert ids(await store.list(SCOPE, 2, query="deploy")) == ["mem:org:acme:4", "mem:org:acme:3"]
    assert ids(await store.list(SCOPE, 10, query="deploy")) == [
        "mem:org:acme:4",
        "mem:org:acme:3",
        "mem:org:acme:1",
    ]
    assert ids(await store.list(SCOPE, 10, query="deplo")) == []  # whole tokens only
    assert all(r.use_count == 0 and r.last_used_at is None for r in await store.list(SCOPE, 10))
    assert await store.list(SCOPE, 0) == []


async def test_forget_soft_deletes_one_active_record_once(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write(SCOPE, [fact("deploy a"), fact("deploy b")])
    assert await store.forget(SCOPE, "mem:org:acme:1") is True
    assert await store.forget(SCOPE, "mem:org:acme:1") is False
    assert await store.forget(SCOPE, "mem:org:acme:9") is False
    assert await store.forget(SCOPE, "mem:org:acme:01") is False
    assert ids(await store.retrieve(SCOPE, "deploy", 8)) == ["mem:org:acme:2"]
    assert await run_sql(schema, "SELECT id, status FROM memory_records ORDER BY seq") == [
        ("mem:org:acme:1", "forgotten"),
        ("mem:org:acme:2", "active"),
    ]


# --- cap and eviction (§27, §28) ------------------------------------------------------------------


async def test_eviction_at_the_cap_happens_inside_the_batch_least_recently_used_first(
    schema: TempSchema, clock: Clock
) -> None:
    store = await PostgresMemoryStore.connect(schema.dsn, cap=3, clock=clock)
    try:
        await store.write(SCOPE, [fact("alpha"), fact("beta"), fact("gamma")])
        clock.now += 10
        await store.retrieve(SCOPE, "alpha", 8)  # alpha is now the most recently used
        clock.now += 10
        result = await store.write(SCOPE, [fact("delta"), fact("epsilon")])
        assert result == WriteResult(inserted=2, evicted=2)
        assert ids(await store.list(SCOPE, 10)) == ["mem:org:acme:5", "mem:org:acme:4", "mem:org:acme:1"]
        assert await store.retrieve(SCOPE, "beta gamma", 8) == []
        # Restating an evicted record's text inserts a fresh one (evicted rows are no dedup target)...
        assert await store.write(SCOPE, [fact("beta")]) == WriteResult(inserted=1, evicted=1)
        # ...and a per-batch cap (the memory service's) overrides the store's.
        assert await store.write(SCOPE, [fact("zeta")], cap=1) == WriteResult(inserted=1, evicted=3)
        assert ids(await store.list(SCOPE, 10)) == ["mem:org:acme:7"]
        with pytest.raises(ValueError, match="cap"):
            await store.write(SCOPE, [fact("eta")], cap=0)
    finally:
        await store.aclose()


async def test_soft_deleted_rows_leave_the_active_only_fts_index(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    [[indexdef]] = await run_sql(
        schema,
        "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %s",
        ("memory_records_fts",),
    )
    assert "USING gin (tsv)" in indexdef and "WHERE (status = 'active'::text)" in indexdef
    await store.write(SCOPE, [fact("deploy one"), fact("deploy two"), fact("deploy three")])
    await store.write(SCOPE, [fact("deploy four", supersedes="mem:org:acme:2")])
    await store.forget(SCOPE, "mem:org:acme:3")
    matched = await run_sql(
        schema,
        "SELECT id FROM memory_records WHERE status = 'active' AND tsv @@ 'deploy'::tsquery ORDER BY seq",
    )
    assert matched == [("mem:org:acme:1",), ("mem:org:acme:4",)]


# --- schema: the one migration path ---------------------------------------------------------------

INDEXES = {
    "memory_records_pkey",
    "memory_records_status_norm",
    "memory_records_active_seq",
    "memory_records_active_used",
    "memory_records_fts",
    "memory_records_stems",
    "memory_records_run",
    "memory_records_created",
    "memory_records_changed",
    "memory_records_supersedes",
    "memory_records_pending",
    "memory_records_erased",
    "memory_usage_pkey",
    "memory_usage_changed",
    "memory_usage_eviction",
}


async def index_names(schema: TempSchema) -> set[str]:
    rows = await run_sql(
        schema,
        "SELECT indexname FROM pg_indexes"
        " WHERE schemaname = current_schema() AND tablename IN ('memory_records', 'memory_usage')",
    )
    return {str(row[0]) for row in rows}


@pytest.mark.new_schema
async def test_opening_an_old_database_adds_the_missing_indexes_and_keeps_the_rows(
    schema: TempSchema, clock: Clock
) -> None:
    first = await PostgresMemoryStore.connect(schema.dsn, clock=clock)
    await first.write(SCOPE, [fact("deploy on tuesdays")])
    await first.aclose()
    await run_sql(
        schema,
        "DROP INDEX memory_records_status_norm, memory_records_active_seq,"
        " memory_records_active_used, memory_records_fts, memory_records_stems, memory_records_run,"
        " memory_records_created, memory_records_changed,"
        " memory_records_supersedes, memory_records_pending, memory_records_erased, memory_usage_changed,"
        " memory_usage_eviction",
    )
    assert await index_names(schema) == {"memory_records_pkey", "memory_usage_pkey"}
    again = await PostgresMemoryStore.connect(schema.dsn, clock=clock)
    try:
        assert await index_names(schema) == INDEXES
        assert ids(await again.retrieve(SCOPE, "tuesdays", 8)) == ["mem:org:acme:1"]
    finally:
        await again.aclose()


async def test_opening_stems_rows_written_before_ranking_v2_and_counts_them(
    schema: TempSchema, clock: Clock
) -> None:
    first = await PostgresMemoryStore.connect(schema.dsn, clock=clock)
    await first.write(SCOPE, [fact("we deployed on tuesdays"), fact("billing runs nightly")])
    await first.aclose()
    # As an older build left them: no stems, no counts.
    await run_sql(schema, "UPDATE memory_records SET stems = NULL")
    await run_sql(schema, "DELETE FROM memory_term_df")
    await run_sql(schema, "DELETE FROM memory_meta")
    again = await PostgresMemoryStore.connect(schema.dsn, clock=clock)
    try:
        assert ids(await again.retrieve(SCOPE, "deploys", 8)) == ["mem:org:acme:1"]
    finally:
        await again.aclose()
    stems = await run_sql(schema, "SELECT seq, stems FROM memory_records ORDER BY seq")
    assert [(row[0], row[1]) for row in stems] == [
        (1, ["deploy", "on", "tuesday", "we"]),
        (2, ["bill", "night", "run"]),
    ]
    counts = {row[0]: row[1] for row in await run_sql(schema, "SELECT term, df FROM memory_term_df")}
    assert counts[""] == 2 and counts["deploy"] == 1 and counts["bill"] == 1


@pytest.mark.new_schema
async def test_replicas_opening_together_apply_the_schema_once_without_racing(schema: TempSchema) -> None:
    stores = await asyncio.gather(*(PostgresMemoryStore.connect(schema.dsn) for _ in range(4)))
    try:
        assert await index_names(schema) == INDEXES
    finally:
        await asyncio.gather(*(s.aclose() for s in stores))


async def test_long_texts_are_deduped_without_hitting_the_btree_size_limit(
    store: PostgresMemoryStore,
) -> None:
    # The longest text a store accepts (4,000 characters), in two-byte letters: ~7 kB, over any btree
    # entry limit (~2.7 kB).
    long_text = " ".join(f"ü{n:04d}" for n in range(666))[:MAX_TEXT_CHARS]
    assert len(long_text.encode()) > 2704
    assert await store.write(SCOPE, [fact(long_text)]) == WriteResult(inserted=1)
    assert await store.write(SCOPE, [fact(long_text.upper())]) == WriteResult(deduped=1)


# --- the write path reads only what plan_write needs (§18) ----------------------------------------

# The btree indexes, each prefixed by scope_key.
SCOPE_INDEXES = (INDEXES | {"memory_term_df_pkey", "memory_deleted_pkey"}) - {
    "memory_records_fts",
    "memory_records_stems",
}


def recording_connection() -> tuple[type[psycopg.AsyncConnection[Any]], list[tuple[str, Any]]]:
    """A real psycopg connection class that also keeps every (statement, params) the store runs."""
    statements: list[tuple[str, Any]] = []

    class Recording(psycopg.AsyncConnection[Any]):
        async def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            statements.append((str(query), params))
            return await super().execute(query, params, **options)

    return Recording, statements


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


async def explain_analyze(schema: TempSchema, statement: str, params: Any) -> list[dict[str, Any]]:
    """The executed plan of one recorded statement with its own values, rolled back afterwards."""
    async with await psycopg.AsyncConnection.connect(
        schema.dsn, cursor_factory=psycopg.AsyncClientCursor
    ) as conn:
        cursor = await conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", params)
        row = await cursor.fetchone()
        await conn.rollback()
        assert row is not None
        nodes = list(plan_nodes(row[0][0]["Plan"]))
        for node in nodes:  # a partition's index is named as the table's index it is part of
            if "Index Name" in node:
                cursor = await conn.execute(
                    "SELECT c.relname FROM pg_class AS c WHERE c.oid = pg_partition_root(%s::regclass)",
                    (node["Index Name"],),
                )
                root = await cursor.fetchone()
                node["Index Name"] = node["Index Name"] if root is None else str(root[0])
    return nodes


@pytest.mark.new_schema
async def test_a_write_under_the_cap_makes_targeted_index_lookups_never_a_scan_of_the_scope(
    schema: TempSchema, clock: Clock
) -> None:
    connection_class, statements = recording_connection()
    store = await PostgresMemoryStore.connect(schema.dsn, clock=clock, connection_class=connection_class)
    try:
        for start in range(0, 400, 50):
            await store.write(
                SCOPE, [fact(f"note {n} about topic {n % 7}") for n in range(start, start + 50)]
            )
        # A crowd in another scope: a lookup not led by scope_key, or a scan, shows in the plans.
        await run_sql(
            schema,
            "INSERT INTO memory_records (scope_key, seq, id, kind, text, norm, source_thread_key, created_at)"
            f" SELECT '{CROWD}', n, 'mem:{CROWD}:' || n, 'fact', 'other ' || n, 'other ' || n, 't', 0"
            " FROM generate_series(1, 20000) AS n",
        )
        await run_sql(schema, "VACUUM ANALYZE memory_records")
        statements.clear()
        batch = [
            fact("Note 3 about   topic 3"),  # a dedup
            fact("the revised fifth note", supersedes="mem:org:acme:5"),
            fact("a brand new note"),
        ]
        assert await store.write(SCOPE, batch) == WriteResult(inserted=2, deduped=1, superseded=1)
    finally:
        await store.aclose()

    reads = [(sql, params) for sql, params in statements if sql.lstrip().startswith(("SELECT", "UPDATE"))]
    sql_run = [" ".join(sql.split()) for sql, _ in reads]
    # The eviction runs over the cap only.
    assert " ".join(postgres_store._EVICT_LEAST_USED.split()) not in sql_run
    lookups = [sql for sql in sql_run if sql.startswith("SELECT seq,")]
    assert len(lookups) == len(batch)  # one targeted lookup per candidate
    for sql, params in reads:
        if "pg_advisory_xact_lock" in sql:
            continue
        nodes = await explain_analyze(schema, sql, params)
        scans = [n for n in nodes if "Relation Name" in n and n["Node Type"] != "ModifyTable"]
        assert scans, sql
        for node in scans:
            assert node["Node Type"] != "Seq Scan", (sql, node["Node Type"])
            # A bitmap heap scan is driven by its bitmap index scan: the index is the child's.
            probe = node["Plans"][0] if node["Node Type"] == "Bitmap Heap Scan" else node
            assert probe.get("Index Name") in SCOPE_INDEXES, (sql, probe.get("Index Name"))
            assert "scope_key" in probe.get("Index Cond", ""), (sql, probe.get("Index Cond"))
            if sql.lstrip().startswith("SELECT COUNT(*)"):
                continue  # the active count reads the scope's active index entries only (§15)
            if "memory_term_df" in sql:
                continue  # one counts row per stem of the retired record, by primary key
            touched = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            assert touched <= 2, (sql, node["Node Type"], touched)


@pytest.mark.new_schema
async def test_a_write_over_the_cap_evicts_what_plan_eviction_picks_reading_only_the_excess(
    schema: TempSchema, clock: Clock
) -> None:
    connection_class, statements = recording_connection()
    store = await PostgresMemoryStore.connect(
        schema.dsn, cap=120, clock=clock, connection_class=connection_class
    )
    try:
        for start in range(0, 120, 40):  # each batch's records share their creation time: full ties
            clock.now += 10
            await store.write(SCOPE, [fact(f"note {n} about topic{n % 9}") for n in range(start, start + 40)])
        clock.now += 10
        await store.retrieve(SCOPE, "topic0 topic4", 8)  # some of the oldest are used now: they stay
        rows = await run_sql(
            schema,
            f"SELECT id, created_at, last_used_at FROM {STORED_RECORDS} WHERE status = 'active' ORDER BY seq",
        )
        active = [
            MemoryRecord(
                id=str(record_id),
                scope_key=SCOPE,
                kind="fact",
                text="",
                source_thread_key="",
                created_at=float(created_at),
                last_used_at=None if last_used_at is None else float(last_used_at),
            )
            for record_id, created_at, last_used_at in rows
        ]
        expected = plan_eviction([*active, *(fact_record(n) for n in range(6))], 120)
        # A crowd in another scope, analyzed: a plan that reads past the excess shows in the rows.
        await run_sql(
            schema,
            "INSERT INTO memory_records (scope_key, seq, id, kind, text, norm, source_thread_key, created_at)"
            f" SELECT '{CROWD}', n, 'mem:{CROWD}:' || n, 'fact', 'other ' || n, 'other ' || n, 't', 0"
            " FROM generate_series(1, 20000) AS n",
        )
        await run_sql(schema, "ANALYZE memory_records")
        statements.clear()
        batch = [fact(f"fresh note {n}") for n in range(6)]
        assert await store.write(SCOPE, batch) == WriteResult(inserted=6, evicted=6)
    finally:
        await store.aclose()

    evicted = await run_sql(schema, "SELECT id FROM memory_records WHERE status = 'evicted' ORDER BY seq")
    assert sorted(str(row[0]) for row in evicted) == sorted(expected)
    [(sql, params)] = [(q, p) for q, p in statements if "'evicted'" in q]
    nodes = await explain_analyze(schema, sql, params)
    scans = [n for n in nodes if "Relation Name" in n and n["Node Type"] != "ModifyTable"]
    ordered = [n for n in scans if n.get("Index Name") == "memory_usage_eviction"]
    assert ordered and all(n["Actual Rows"] == 6 for n in ordered)  # the excess, never the scope
    assert all(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) <= 6 for n in scans)


def fact_record(n: int) -> MemoryRecord:
    """A record the batch below will insert: created now, so never among the least recently used."""
    return MemoryRecord(
        id=f"mem:{SCOPE}:new{n}",
        scope_key=SCOPE,
        kind="fact",
        text="",
        source_thread_key="",
        created_at=NOW * 2,
    )


# --- atomicity and concurrency --------------------------------------------------------------------


@pytest.mark.new_schema
async def test_a_batch_failing_midway_leaves_nothing_behind(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    await store.write(SCOPE, [fact("deploys on tuesdays")])
    await run_sql(schema, "ALTER TABLE memory_records ADD CONSTRAINT no_boom CHECK (text <> 'boom')")
    batch = [
        fact("deploys on thursdays", supersedes="mem:org:acme:1"),
        fact("deploys on tuesdays"),
        fact("boom"),
    ]
    with pytest.raises(MemoryStoreError):
        await store.write(SCOPE, batch)
    assert await run_sql(schema, "SELECT id, status, use_count FROM memory_records") == [
        ("mem:org:acme:1", "active", 0)
    ]
    assert await store.write(SCOPE, [fact("fine")]) == WriteResult(inserted=1)
    assert ids(await store.list(SCOPE, 1)) == ["mem:org:acme:2"]  # no seq was burnt either


async def test_concurrent_batches_through_two_pools_all_land_with_unique_ids(
    store: PostgresMemoryStore, schema: TempSchema, clock: Clock
) -> None:
    other = await PostgresMemoryStore.connect(schema.dsn, clock=clock, max_size=4)
    try:
        results = await asyncio.gather(
            *(
                (store if n % 2 else other).write(SCOPE, [fact(f"fact {n} a"), fact(f"fact {n} b")])
                for n in range(20)
            )
        )
        assert all(r == WriteResult(inserted=2) for r in results)
        listed = await store.list(SCOPE, 50)
        assert sorted(ids(listed)) == sorted(f"mem:org:acme:{n}" for n in range(1, 41))
        assert len({r.text for r in listed}) == 40
    finally:
        await other.aclose()


async def test_a_retrieve_during_a_write_batch_sees_the_state_before_or_after_it(
    store: PostgresMemoryStore,
) -> None:
    await store.write(SCOPE, [fact(f"alpha old {n}") for n in range(5)])
    batch = [fact(f"alpha new {n}") for n in range(45)]
    write = asyncio.create_task(store.write(SCOPE, batch))
    seen: set[int] = set()
    while not write.done():
        seen.add(len(await store.retrieve(SCOPE, "alpha", 50)))
    await write
    seen.add(len(await store.retrieve(SCOPE, "alpha", 50)))
    assert seen <= {5, 50} and 50 in seen


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope_key", ["", "org:has space", "org:\x00nul", "x" * 201, "org:tab\t"])
async def test_bad_scope_keys_are_refused_and_nothing_is_written(
    store: PostgresMemoryStore, schema: TempSchema, scope_key: str
) -> None:
    with pytest.raises(ValueError, match="scope key"):
        await store.write(scope_key, [fact("x")])
    for call in (
        store.retrieve(scope_key, "x", 8),
        store.list(scope_key, 8),
        store.forget(scope_key, "mem:x:1"),
    ):
        with pytest.raises(ValueError, match="scope key"):
            await call
    assert await run_sql(schema, "SELECT count(*) FROM memory_records") == [(0,)]


async def test_text_postgresql_cannot_hold_is_refused_naming_the_field(
    store: PostgresMemoryStore, schema: TempSchema
) -> None:
    with pytest.raises(ValueError, match=r"candidates\[1\]\.text .*NUL"):
        await store.write(SCOPE, [fact("fine"), fact("nul \x00 inside")])
    with pytest.raises(ValueError, match=r"candidates\[0\]\.keywords\[0\]"):
        await store.write(SCOPE, [fact("fine", keywords=("\ud800",))])
    assert await run_sql(schema, "SELECT count(*) FROM memory_records") == [(0,)]


# --- start-up, a lost server, reconnection --------------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    ["not a dsn s3cret", "", "  ", "postgresql://u:s3cret@host/db?bogus=1", "host=x password=s3cret bogus=1"],
)
def test_a_malformed_dsn_is_refused_naming_the_setting_without_the_password(dsn: str) -> None:
    with pytest.raises(ValueError, match="DATABASE_URL / --database-url") as refused:
        PostgresMemoryStore(dsn)
    assert "s3cret" not in str(refused.value)


async def test_an_unreachable_server_at_start_up_is_one_clear_error_naming_the_setting() -> None:
    port = free_port()
    dsn = f"postgresql://postgres:s3cret@127.0.0.1:{port}/test"
    started = time.monotonic()
    with pytest.raises(MemoryStoreError, match="DATABASE_URL / --database-url") as refused:
        await PostgresMemoryStore.connect(dsn, timeout=2.0)
    message = str(refused.value)
    assert f"127.0.0.1:{port}/test" in message and "s3cret" not in message and "\n" not in message
    assert time.monotonic() - started < 5


async def test_a_missing_database_at_start_up_names_the_setting() -> None:
    with pytest.raises(MemoryStoreError, match=r"DATABASE_URL.*sb_no_such_db"):
        await PostgresMemoryStore.connect("postgresql://postgres@127.0.0.1:5432/sb_no_such_db")


@pytest.mark.new_schema
async def test_the_first_operation_opens_a_store_built_without_awaiting_open(
    schema: TempSchema, clock: Clock
) -> None:
    store = PostgresMemoryStore(schema.dsn, clock=clock)  # what a synchronous start-up builds
    try:
        assert await store.write(SCOPE, [fact("deploy")]) == WriteResult(inserted=1)
    finally:
        await store.aclose()
    with pytest.raises(MemoryStoreError, match="closed"):
        await store.write(SCOPE, [fact("after close")])


async def test_a_server_down_at_first_use_degrades_retrieve_and_is_dialled_once_for_many_callers(
    schema: TempSchema,
) -> None:
    dials = 0

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal dials
        dials += 1
        writer.transport.abort()  # a server that hangs up: every connection attempt fails

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = PostgresMemoryStore(
        f"postgresql://postgres@127.0.0.1:{port}/test?sslmode=disable&gssencmode=disable", timeout=1.0
    )
    try:
        with capture_logs() as logs:
            results = await asyncio.gather(*(store.retrieve(SCOPE, "deploy", 8) for _ in range(10)))
        assert results == [[]] * 10
        warnings = [e for e in logs if e["event"] == "memory.retrieve_failed"]
        assert len(warnings) == 10 and all("DATABASE_URL" in e["message"] for e in warnings)
        assert dials == 1
        with pytest.raises(MemoryStoreError, match="DATABASE_URL / --database-url"):
            await store.write(SCOPE, [fact("x")])
        assert dials == 2  # a later call dials again: the server may be back
    finally:
        await store.aclose()
        server.close()
        await server.wait_closed()


async def test_a_lost_server_degrades_retrieve_fails_the_rest_and_the_pool_reconnects(
    schema: TempSchema, clock: Clock
) -> None:
    forwarder = TcpForwarder()
    await forwarder.start()
    store = await PostgresMemoryStore.connect(
        forwarder.dsn(schema.name), clock=clock, timeout=0.5, reconnect_timeout=2.0, max_size=2
    )
    try:
        await store.write(SCOPE, [fact("deploy on tuesdays")])
        await forwarder.stop()  # the server is gone: connections dropped, new ones refused

        with capture_logs() as logs:
            assert await store.retrieve(SCOPE, "deploy", 8) == []
        assert [e["log_level"] for e in logs if e["event"] == "memory.retrieve_failed"] == ["warning"]
        with pytest.raises(MemoryStoreError):
            await store.write(SCOPE, [fact("lost")])
        with pytest.raises(MemoryStoreError):
            await store.list(SCOPE, 10)
        with pytest.raises(MemoryStoreError):
            await store.forget(SCOPE, "mem:org:acme:1")

        await forwarder.start()  # the server is back on the same address
        clock.now += 60
        result = await eventually(lambda: store.write(SCOPE, [fact("deploy on fridays")]), within=20)
        assert result == WriteResult(inserted=1)
        assert ids(await store.retrieve(SCOPE, "deploy", 8)) == ["mem:org:acme:2", "mem:org:acme:1"]
    finally:
        await store.aclose()
        await forwarder.stop()


async def test_after_the_pools_backends_are_terminated_the_next_write_succeeds(
    schema: TempSchema, clock: Clock
) -> None:
    name = unique_application_name()
    store = await PostgresMemoryStore.connect(
        schema.dsn, clock=clock, application_name=name, min_size=4, max_size=4, timeout=3.0
    )
    try:
        await store.write(SCOPE, [fact("before the restart")])
        # Every pooled connection dies, as in a server restart; the pool must not meet the dead ones
        # one by one (1 s, 2 s, … of back-off each) before it finds a live one.
        assert await terminate_backends(name) == 4
        assert await store.write(SCOPE, [fact("after the restart")]) == WriteResult(inserted=1)
        assert ids(await store.list(SCOPE, 10)) == ["mem:org:acme:2", "mem:org:acme:1"]
    finally:
        await store.aclose()


# --- selection: memory.store = "postgres", DSN from DATABASE_URL ----------------------------------


def postgres_settings_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    config = tmp_path / "switchboard.toml"
    config.write_text("")
    return {
        "SWITCHBOARD_ORGANIZATION": "acme",
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_MEMORY__STORE": "postgres",
        "SWITCHBOARD_DATA_DIR": str(tmp_path),
        **extra,
    }


async def test_memory_store_postgres_selects_this_store_with_the_dsn_from_database_url(
    tmp_path: Path, schema: TempSchema
) -> None:
    env = postgres_settings_env(
        tmp_path, DATABASE_URL=schema.dsn, SWITCHBOARD_MEMORY__MAX_RECORDS_PER_SCOPE="2"
    )
    settings = load_settings(env=env, config_path=tmp_path / "switchboard.toml")
    store = build_memory_store(settings, env=env)
    try:
        assert isinstance(store, PostgresMemoryStore) and store.cap == 2
        await store.open()  # what start-up awaits: the server is verified here
        result = await store.write(SCOPE, [fact("a"), fact("b"), fact("c")])
        assert result == WriteResult(inserted=3, evicted=1)
    finally:
        await store.aclose()


@pytest.mark.parametrize("dsn", [None, "", "not a dsn s3cret"])
def test_memory_store_postgres_without_a_usable_database_url_names_it(
    tmp_path: Path, dsn: str | None
) -> None:
    env = postgres_settings_env(tmp_path, **({} if dsn is None else {"DATABASE_URL": dsn}))
    settings = load_settings(env=env, config_path=tmp_path / "switchboard.toml")
    with pytest.raises(MemoryConfigError, match="DATABASE_URL") as refused:
        build_memory_store(settings, env=env)
    assert "s3cret" not in str(refused.value)


# --- the origin label's migration (issue 14) -------------------------------------------------------

# The table as it was before origins were stored (main at 68a4e75), copied so the test keeps meaning
# what it says however the store's own DDL changes.
_PRE_ORIGIN_SCHEMA = """
    CREATE TABLE memory_records (
        scope_key text NOT NULL,
        seq bigint NOT NULL,
        id text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('fact', 'summary')),
        text text NOT NULL,
        norm text NOT NULL,
        keywords text[] NOT NULL DEFAULT '{}',
        tokens text[] NOT NULL DEFAULT '{}',
        source_thread_key text NOT NULL,
        source_run_id text,
        created_at double precision NOT NULL,
        last_used_at double precision,
        use_count integer NOT NULL DEFAULT 0,
        confidence double precision,
        supersedes text,
        status text NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted')),
        tsv tsvector GENERATED ALWAYS AS (array_to_tsvector(tokens)) STORED,
        PRIMARY KEY (scope_key, seq)
    );
    CREATE INDEX memory_records_status_norm ON memory_records (scope_key, status, md5(norm));
    CREATE INDEX memory_records_active_seq ON memory_records (scope_key, status, seq DESC);
    CREATE INDEX memory_records_fts ON memory_records USING gin (tsv) WHERE status = 'active';
"""

_LEGACY_LABELS = {
    "org:acme": ("public", None),
    "repo:acme/api": ("public", None),
    "channel:slack:C0PRIV": ("private", "slack:C0PRIV"),
    "user:slack:U0A": ("unknown", None),
}


@pytest.mark.new_schema
async def test_a_table_from_before_origins_migrates_in_place_with_conservative_labels(
    schema: TempSchema, clock: Clock
) -> None:
    await run_sql(schema, _PRE_ORIGIN_SCHEMA)
    for scope_key in _LEGACY_LABELS:
        await run_sql(
            schema,
            "INSERT INTO memory_records (scope_key, seq, id, kind, text, norm, tokens, source_thread_key,"
            " created_at) VALUES (%s, 1, %s, 'fact', 'deploy with make', 'deploy with make',"
            " ARRAY['deploy', 'with', 'make'], 'slack:C1:1.0', %s)",
            (scope_key, f"mem:{scope_key}:1", NOW),
        )
    store = await PostgresMemoryStore.connect(
        schema.dsn, clock=clock, application_name=unique_application_name()
    )
    try:
        for scope_key, label in _LEGACY_LABELS.items():
            (listed,) = await store.list(scope_key, 5)
            assert (listed.origin, listed.origin_conversation) == label, scope_key
            (found,) = await store.retrieve(scope_key, "deploy", 5)
            assert (found.origin, found.origin_conversation) == label, scope_key
        labelled = MemoryCandidate(
            kind="fact", text="a new fact", source_thread_key="t", origin="dm", origin_conversation="slack:D1"
        )
        await store.write("user:slack:U0A", [labelled])
        newest = (await store.list("user:slack:U0A", 1))[0]
        assert (newest.origin, newest.origin_conversation) == ("dm", "slack:D1")
    finally:
        await store.aclose()
    # The column is now required with `unknown` as its default (a writer that predates origins still
    # inserts), and a second open relabels nothing.
    assert await run_sql(
        schema,
        "SELECT is_nullable, column_default FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = 'memory_records' AND column_name = 'origin'",
    ) == [("NO", "'unknown'::text")]
    await run_sql(schema, "UPDATE memory_records SET origin = 'public' WHERE scope_key = 'user:slack:U0A'")
    again = await PostgresMemoryStore.connect(
        schema.dsn, clock=clock, application_name=unique_application_name()
    )
    try:
        assert {r.origin for r in await again.list("user:slack:U0A", 5)} == {"public"}
    finally:
        await again.aclose()


async def test_only_a_server_out_of_reach_makes_a_retrieve_advisory(schema: TempSchema, clock: Clock) -> None:
    """A closed store is a fault, not an outage: its retrieve raises like every other call (the lost
    server's degraded retrieve is pinned above)."""
    store = await PostgresMemoryStore.connect(schema.dsn, clock=clock)
    await store.write(SCOPE, [fact("deploy on tuesdays")])
    await store.aclose()
    with capture_logs() as logs, pytest.raises(MemoryStoreError, match="closed"):
        await store.retrieve(SCOPE, "deploy", 8)
    with pytest.raises(MemoryStoreError, match="closed"):
        await store.retrieve_many([SCOPE], "deploy", 8)
    assert not [e for e in logs if e["event"] == "memory.retrieve_failed"]
