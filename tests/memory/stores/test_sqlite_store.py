"""The embedded durable store: files, schema, FTS prefilter, transactions, durability (§15–§18, §26–§28).

Behaviour every store shares lives in the contract suite (test_store_contract.py); these tests cover what
only a SQLite store has. SQL is observed through the store's `on_statement` hook (SQLite's own trace of
the statements it runs), never by patching our functions.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memory.ranking.fusion import SPEC, Ranking
from memory.rules.engine import MAX_MATCH_TOKENS, candidate_cap, match_tokens
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore, database_filename, fts_match_query
from memory.stores.usage_bumps import FLUSH_SECONDS
from memory.types import DEFAULT_SCOPE_CAP, MAX_LIMIT, MemoryCandidate, MemoryStoreError, WriteResult
from tests.memory.store_contract import DAY, START, FakeClock, fact, ids, rid

ORG = "org:acme"
REPO_ROOT = Path(__file__).resolve().parents[3]


class Statements:
    """Every SQL statement the store's connections run, with the scope and the thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seen: list[tuple[str, str, int]] = []

    def __call__(self, scope_key: str, sql: str) -> None:
        with self._lock:
            self.seen.append((scope_key, sql, threading.get_ident()))

    def clear(self) -> None:
        with self._lock:
            self.seen.clear()

    def sql(self) -> list[str]:
        """Top-level statements only: SQLite reports the FTS5 module's own nested SQL as `-- …`."""
        with self._lock:
            return [sql for _, sql, _ in self.seen if not sql.startswith("--")]

    def starting(self, prefix: str) -> list[str]:
        return [sql for sql in self.sql() if sql.startswith(prefix)]


@pytest.fixture
def statements() -> Statements:
    return Statements()


@pytest.fixture
async def store(tmp_path: Path, statements: Statements) -> AsyncIterator[SqliteMemoryStore]:
    made = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock(), on_statement=statements)
    yield made
    await made.aclose()


@pytest.fixture
async def spec_store(tmp_path: Path, statements: Statements) -> AsyncIterator[SqliteMemoryStore]:
    """The seed's ranking, whose retrieve is the FTS5 bm25 prefilter (v2 reads the scope index)."""
    made = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock(), ranking=SPEC, on_statement=statements)
    yield made
    await made.aclose()


@contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection to inspect (or damage) a scope's database from outside the store."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def fts_rowids(connection: sqlite3.Connection) -> set[int]:
    return {int(row[0]) for row in connection.execute("SELECT rowid FROM records_fts")}


def seqs_with_status(connection: sqlite3.Connection, status: str) -> set[int]:
    return {int(row[0]) for row in connection.execute("SELECT seq FROM records WHERE status = ?", (status,))}


def plan(connection: sqlite3.Connection, sql: str) -> str:
    return " | ".join(str(row[3]) for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}"))


async def fill(store: SqliteMemoryStore, scope: str, texts: list[str]) -> None:
    for start in range(0, len(texts), 50):
        await store.write(scope, [fact(text) for text in texts[start : start + 50]])


# -- files ------------------------------------------------------------------------------------------


async def test_each_scope_gets_its_own_safely_named_database_file(tmp_path: Path) -> None:
    keys = [
        "org:acme",
        "org:ACME",
        "org:acme.",
        "org:acme!",
        "repo:../../etc/passwd",
        "repo:owner/name",
        "channel:slack:C1/..",
        "user:a\\b",
        "user:" + "x" * 195,
    ]
    data_dir = tmp_path / "memory"
    store = SqliteMemoryStore(data_dir)
    try:
        for key in keys:
            await store.write(key, [fact(f"lives in {key}")])
    finally:
        await store.aclose()

    names = [database_filename(key) for key in keys]
    assert len(set(names)) == len(keys)
    assert len({name.lower() for name in names}) == len(keys)  # case-insensitive filesystems too
    for name in names:
        assert re.fullmatch(r"[a-z0-9_-]{1,48}-[0-9a-f]{32}\.sqlite3", name), name
    assert sorted(path.name for path in data_dir.iterdir()) == sorted(names)
    assert not (tmp_path / "etc").exists()
    assert database_filename("repo:owner/name").startswith("repo_owner_name-")


async def test_a_database_remembers_its_scope_and_refuses_to_serve_another(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    store = SqliteMemoryStore(data_dir)
    await store.write("org:one", [fact("belongs to one")])
    await store.aclose()
    with raw(data_dir / database_filename("org:one")) as connection:
        assert connection.execute("SELECT value FROM meta WHERE key = 'scope_key'").fetchone() == ("org:one",)
    shutil.copy(data_dir / database_filename("org:one"), data_dir / database_filename("org:two"))

    impostor = SqliteMemoryStore(data_dir)
    try:
        with pytest.raises(MemoryStoreError, match="belongs to another scope"):
            await impostor.list("org:two", 10)
        with pytest.raises(MemoryStoreError, match="belongs to another scope"):
            await impostor.retrieve("org:two", "belongs", 10)
        assert ids(await impostor.list("org:one", 10)) == ["mem:org:one:1"]
    finally:
        await impostor.aclose()


async def test_databases_run_in_wal_mode(store: SqliteMemoryStore) -> None:
    await store.write(ORG, [fact("hello")])
    with raw(store.database_path(ORG)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def _open_database_files(data_dir: Path) -> set[str]:
    found: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(data_dir)) and target.endswith(".sqlite3"):
            found.add(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to count descriptors")
async def test_open_connections_are_bounded_by_an_lru(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    store = SqliteMemoryStore(data_dir, max_open=3)
    scopes = [f"user:slack:U{n}" for n in range(12)]
    try:
        for scope in scopes:
            await store.write(scope, [fact(f"note of {scope}")])
            assert store.open_scope_count() <= 3
            assert len(_open_database_files(data_dir)) <= 3
        for scope in scopes:  # closed scopes reopen transparently
            assert [r.text for r in await store.list(scope, 5)] == [f"note of {scope}"]
        assert store.open_scope_count() == 3
    finally:
        await store.aclose()
    assert _open_database_files(data_dir) == set()


async def test_reads_never_create_a_database(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    store = SqliteMemoryStore(data_dir)
    try:
        assert await store.retrieve(ORG, "anything", 5) == []
        assert await store.list(ORG, 5) == []
        assert await store.list(ORG, 5, "anything") == []
        assert await store.forget(ORG, "mem:org:acme:1") is False
    finally:
        await store.aclose()
    assert not data_dir.exists() or list(data_dir.iterdir()) == []


# -- schema, migration, reconciliation ---------------------------------------------------------------


async def test_the_schema_has_the_named_indexes_and_an_fts_table(store: SqliteMemoryStore) -> None:
    await store.write(ORG, [fact("hello")])
    with raw(store.database_path(ORG)) as connection:
        indexes = {
            row[1]: [str(col[2]) for col in connection.execute(f"PRAGMA index_xinfo({row[1]})") if col[5]]
            for row in connection.execute("PRAGMA index_list(records)")
            if not str(row[1]).startswith("sqlite_autoindex")
        }
        columns = {row[1] for row in connection.execute("PRAGMA table_info(records)")}
        fts = connection.execute("SELECT sql FROM sqlite_master WHERE name = 'records_fts'").fetchone()
    assert indexes["records_status_norm"] == ["status", "norm"]
    assert indexes["records_active_seq"] == ["status", "seq"]
    assert indexes["records_active_used"] == ["status", "last_used_at", "created_at"]
    assert {"seq", "norm", "id", "scope_key", "status", "last_used_at", "use_count"} <= columns
    assert "fts5" in fts[0].lower()


async def test_opening_an_old_database_adds_the_indexes_and_keeps_its_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    data_dir.mkdir()
    path = data_dir / database_filename(ORG)
    with raw(path) as connection:  # an earlier layout: no meta table, only the dedup index
        connection.executescript(
            """
            CREATE TABLE records (
                seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, scope_key TEXT NOT NULL,
                kind TEXT NOT NULL, text TEXT NOT NULL, norm TEXT NOT NULL,
                keywords TEXT NOT NULL DEFAULT '[]', source_thread_key TEXT NOT NULL,
                source_run_id TEXT, created_at REAL NOT NULL, last_used_at REAL,
                use_count INTEGER NOT NULL DEFAULT 0, confidence REAL, supersedes TEXT,
                status TEXT NOT NULL DEFAULT 'active');
            CREATE INDEX records_status_norm ON records (status, norm);
            CREATE VIRTUAL TABLE records_fts USING fts5(text, keywords, tokenize = 'ascii');
            INSERT INTO records (seq, id, scope_key, kind, text, norm, source_thread_key, created_at)
                VALUES (1, 'mem:org:acme:1', 'org:acme', 'fact', 'deploy with make', 'deploy with make',
                        't', 1800000000.0);
            INSERT INTO records_fts (rowid, text, keywords) VALUES (1, 'deploy with make', '');
            """
        )
    store = SqliteMemoryStore(data_dir, clock=FakeClock())
    try:
        assert ids(await store.retrieve(ORG, "deploy", 5)) == ["mem:org:acme:1"]
        assert ids(await store.retrieve(ORG, "deploys", 5)) == ["mem:org:acme:1"]  # stems built on open
        assert await store.write(ORG, [fact("second")]) == WriteResult(inserted=1)
        assert ids(await store.list(ORG, 5)) == ["mem:org:acme:2", "mem:org:acme:1"]
    finally:
        await store.aclose()
    with raw(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"records_status_norm", "records_active_seq", "records_active_used"} <= names
        assert connection.execute("SELECT value FROM meta WHERE key = 'scope_key'").fetchone() == (ORG,)
        columns = {row[1] for row in connection.execute("PRAGMA table_info(records)")}
        assert {"embedding", "embedding_model"} <= columns
        stems = dict(connection.execute("SELECT rowid, stems FROM records_stems").fetchall())
        assert stems == {1: "deploy make with", 2: "second"}
        counts = dict(connection.execute("SELECT term, df FROM term_df WHERE term <> '#vectors'").fetchall())
        assert counts == {"": 2, "deploy": 1, "make": 1, "with": 1, "second": 1}


async def test_opening_reconciles_the_fts_table_down_to_the_active_rows(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    store = SqliteMemoryStore(data_dir, clock=FakeClock())
    await store.write(ORG, [fact(f"record {word}") for word in ("alpha", "bravo", "charlie", "delta")])
    await store.write(ORG, [fact("record echo", supersedes=rid(ORG, 1))])
    assert await store.forget(ORG, rid(ORG, 2)) is True
    await store.aclose()
    path = data_dir / database_filename(ORG)
    with raw(path) as connection:  # dead rows left by an older build, and one active row lost
        connection.execute("INSERT INTO records_fts (rowid, text, keywords) VALUES (1, 'record alpha', '')")
        connection.execute("INSERT INTO records_fts (rowid, text, keywords) VALUES (2, 'record bravo', '')")
        connection.execute("INSERT INTO records_fts (rowid, text, keywords) VALUES (99, 'ghost', '')")
        connection.execute("DELETE FROM records_fts WHERE rowid = 3")
        assert fts_rowids(connection) == {1, 2, 4, 5, 99}

    with capture_logs() as logs:
        reopened = SqliteMemoryStore(data_dir, clock=FakeClock())
        try:
            assert await reopened.retrieve(ORG, "alpha bravo ghost", 5) == []
            assert ids(await reopened.retrieve(ORG, "charlie", 5)) == [rid(ORG, 3)]
        finally:
            await reopened.aclose()
    assert [e for e in logs if e["event"] == "memory.store.reconciled"] == [
        {
            "event": "memory.store.reconciled",
            "scope_key": ORG,
            "removed": 3,
            "restored": 1,
            "log_level": "info",
        }
    ]
    with raw(path) as connection:
        assert fts_rowids(connection) == seqs_with_status(connection, "active") == {3, 4, 5}
        snapshot = connection.execute(
            "SELECT rowid, text, keywords FROM records_fts ORDER BY rowid"
        ).fetchall()

    with capture_logs() as logs:  # idempotent: a clean table is left alone
        again = SqliteMemoryStore(data_dir, clock=FakeClock())
        try:
            assert ids(await again.list(ORG, 10, "record")) == [rid(ORG, 5), rid(ORG, 4), rid(ORG, 3)]
        finally:
            await again.aclose()
    assert [e for e in logs if e["event"] == "memory.store.reconciled"] == []
    with raw(path) as connection:
        assert connection.execute(
            "SELECT rowid, text, keywords FROM records_fts ORDER BY rowid"
        ).fetchall() == (snapshot)


# -- retrieve: the FTS prefilter ----------------------------------------------------------------------


def test_match_tokens_keep_the_24_longest_distinct_ties_by_first_appearance() -> None:
    query = "zz " + " ".join(f"w{n:03d}" for n in range(30)) + " w000 W001 longesttoken"
    kept = match_tokens(query)
    assert len(kept) == MAX_MATCH_TOKENS
    assert kept[0] == "longesttoken"
    assert kept[1:] == [f"w{n:03d}" for n in range(23)]
    assert "zz" not in kept
    assert match_tokens("b x c x") == ["b", "x", "c"]
    assert match_tokens("?! —") == []


def test_the_match_expression_is_quoted_tokens_or_joined() -> None:
    assert (
        fts_match_query('deploy* NEAR("api" -x) col:y')
        == '"deploy" OR "near" OR "api" OR "col" OR "x" OR "y"'
    )
    assert fts_match_query("¿?") is None
    assert candidate_cap(1) == 50
    assert candidate_cap(10) == 50
    assert candidate_cap(11) == 55


async def test_user_text_reaches_fts_only_as_quoted_tokens(
    spec_store: SqliteMemoryStore, statements: Statements
) -> None:
    store = spec_store
    await store.write(ORG, [fact("deploy the api")])
    statements.clear()

    await store.retrieve(ORG, 'deploy* OR "api" NEAR(x) -col:y', 5)
    await store.list(ORG, 5, "deploy* AND NOT api")

    matches = [sql for sql in statements.sql() if "MATCH" in sql]
    assert len(matches) == 2
    for sql in matches:
        expression = re.search(r"MATCH '([^']*)'", sql)
        assert expression is not None
        assert re.fullmatch(r'"[a-z0-9]+"( OR "[a-z0-9]+")*', expression.group(1)), expression.group(1)


async def test_stopwords_never_reach_the_fts_match(
    spec_store: SqliteMemoryStore, statements: Statements
) -> None:
    store = spec_store
    await store.write(ORG, [fact("the deploy goes to the staging cluster")])
    assert fts_match_query("How do we deploy the API?") == '"deploy" OR "api"'
    assert fts_match_query("what is it to you") is None
    statements.clear()

    assert ids(await store.retrieve(ORG, "what is the deploy plan", 5)) == [rid(ORG, 1)]
    assert ids(await store.list(ORG, 5, "where is the deploy")) == [rid(ORG, 1)]
    matches = [sql for sql in statements.sql() if "MATCH" in sql]
    assert [re.findall(r'"([a-z0-9]+)"', sql) for sql in matches] == [["deploy", "plan"], ["deploy"]]

    statements.clear()  # a query of stopwords only selects nothing and never touches the database
    assert await store.retrieve(ORG, "what is it to you", 5) == []
    assert await store.list(ORG, 5, "what is it to you") == []
    assert statements.sql() == []


async def test_the_whole_token_gate_checks_the_record_not_a_stale_fts_row(store: SqliteMemoryStore) -> None:
    await store.write(ORG, [fact("use pnpm"), fact("deploy on fridays")])
    with raw(store.database_path(ORG)) as connection:  # FTS content drifted from its record
        connection.execute("UPDATE records_fts SET text = 'use pnpm rollback' WHERE rowid = 1")
    assert await store.retrieve(ORG, "rollback", 5) == []
    assert await store.list(ORG, 5, "rollback") == []
    assert ids(await store.retrieve(ORG, "pnpm", 5)) == [rid(ORG, 1)]


async def test_bm25_candidates_rescue_a_relevant_but_old_record(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path / "memory", cap=1000, clock=clock)
    try:
        await store.write(ORG, [fact("alpha beta gamma rollback drill")])  # relevant, never used, old
        clock.advance(30 * DAY)
        await fill(store, ORG, [f"alpha note {n} about the usual things" for n in range(599)])
        clock.advance(DAY)

        found = await store.retrieve(ORG, "alpha beta gamma", 1)
    finally:
        await store.aclose()

    # 599 newer records also match "alpha": recency-ordered candidates would never include it
    assert ids(found) == [rid(ORG, 1)]


async def test_the_50_candidate_floor_hands_the_engine_every_match_in_a_small_scope(tmp_path: Path) -> None:
    clock = FakeClock()
    sqlite_store = SqliteMemoryStore(tmp_path / "memory", clock=clock)
    in_memory = InProcessMemoryStore(cap=500, clock=clock)
    old = [fact(f"deploy deploy deploy {n}") for n in range(49)]  # best bm25, all older
    fresh = fact("deploy " + " ".join(f"filler{n}" for n in range(40)))  # worst bm25, most recent
    try:
        for target in (sqlite_store, in_memory):
            clock.now = START
            await target.write(ORG, old)
            clock.now = START + 10 * DAY
            await target.write(ORG, [fresh])
        clock.now = START + 11 * DAY

        found = await sqlite_store.retrieve(ORG, "deploy", 2)
        expected = await in_memory.retrieve(ORG, "deploy", 2)
    finally:
        await sqlite_store.aclose()

    assert ids(found)[0] == rid(ORG, 50)  # the engine's recency term, not bm25, picked it
    assert ids(found) == ids(expected)


@pytest.mark.parametrize("ranking", ["v2", "spec"])
async def test_match_is_capped_at_the_24_longest_distinct_tokens(
    tmp_path: Path, statements: Statements, ranking: str
) -> None:
    # Ending in "q": no Snowball suffix rule touches them, so 24 tokens are 24 distinct stems too.
    long_tokens = [f"token{chr(97 + n // 26)}{chr(97 + n % 26)}q" for n in range(24)]
    store = SqliteMemoryStore(
        tmp_path / "memory",
        clock=FakeClock(),
        ranking=SPEC if ranking == "spec" else Ranking(),
        on_statement=statements,
    )
    try:
        await store.write(ORG, [fact(f"only {long_tokens[7]} here"), fact("zq is short")])
        query = "zq " + " ".join(long_tokens)  # 25 distinct tokens; the shortest is dropped
        statements.clear()

        found = await store.retrieve(ORG, query, 10)

        assert ids(found) == [rid(ORG, 1)]  # the record matched only by the dropped "zq" is no candidate
        if ranking == "spec":  # the FTS5 prefilter's expression (v2 gates on the same 24 in its index)
            match_sql = next(sql for sql in statements.sql() if "MATCH" in sql)
            assert match_sql.count('"') == 2 * MAX_MATCH_TOKENS
            assert '"zq"' not in match_sql
        assert ids(await store.retrieve(ORG, "zq " + " ".join(long_tokens[:23]), 10)) == [
            rid(ORG, 1),
            rid(ORG, 2),
        ]
    finally:
        await store.aclose()


def use_counts(store: SqliteMemoryStore, scope: str) -> dict[str, int]:
    """What the database itself holds (not what the store would overlay)."""
    with raw(store.database_path(scope)) as connection:
        return {row[0]: row[1] for row in connection.execute("SELECT id, use_count FROM records")}


async def test_a_retrieve_is_a_plain_read_that_leaves_its_bumps_for_later(
    store: SqliteMemoryStore, statements: Statements
) -> None:
    await store.write(ORG, [fact("deploy one"), fact("deploy two"), fact("deploy three"), fact("other")])
    statements.clear()

    found = await store.retrieve(ORG, "deploy", 5)

    assert len(found) == 3
    assert [sql for sql in statements.sql() if sql.startswith(("BEGIN IMMEDIATE", "UPDATE"))] == []
    assert set(use_counts(store, ORG).values()) == {0}
    assert {record.use_count for record in found} == {1}  # what it returns is already bumped


async def test_pending_bumps_are_written_in_one_transaction_before_the_next_operation(
    store: SqliteMemoryStore, statements: Statements
) -> None:
    await fill(store, ORG, [f"deploy item {n}" for n in range(60)])
    found = await store.retrieve(ORG, "deploy", MAX_LIMIT)
    statements.clear()

    await store.list(ORG, 1)

    body = statements.sql()
    assert body[0] == "BEGIN IMMEDIATE"
    updates = [sql for sql in body if sql.startswith("UPDATE records SET last_used_at")]
    assert len(updates) == MAX_LIMIT == len(found)
    assert body.index("COMMIT") > body.index(updates[-1])
    counts = use_counts(store, ORG)
    assert {key for key, count in counts.items() if count} == set(ids(found))


async def test_pending_bumps_reach_the_database_within_the_flush_interval(store: SqliteMemoryStore) -> None:
    await store.write(ORG, [fact("deploy one"), fact("other")])
    [found] = await store.retrieve(ORG, "deploy", 5)
    deadline = time.monotonic() + FLUSH_SECONDS + 5
    while use_counts(store, ORG)[found.id] == 0:
        assert time.monotonic() < deadline, "the pending bump was never written"
        await asyncio.sleep(0.05)
    assert use_counts(store, ORG)[found.id] == 1


async def test_closing_the_store_writes_its_pending_bumps(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory")
    await store.write(ORG, [fact("deploy one"), fact("other")])
    [first] = await store.retrieve(ORG, "deploy", 5)
    [second] = await store.retrieve(ORG, "deploy", 5)
    await store.aclose()
    assert (first.use_count, second.use_count) == (1, 2)
    assert use_counts(store, ORG)[first.id] == 2


def stored_usage(store: SqliteMemoryStore, record_id: str) -> tuple[float, int]:
    """A record's last use and use count as its database holds them."""
    with raw(store.database_path(ORG)) as connection:
        [(last_used_at, use_count)] = connection.execute(
            "SELECT last_used_at, use_count FROM records WHERE id = ?", (record_id,)
        ).fetchall()
    return float(last_used_at), int(use_count)


async def test_a_process_writing_older_bumps_after_another_keeps_the_later_last_use(tmp_path: Path) -> None:
    earlier, later = FakeClock(START), FakeClock(START + DAY)
    slow = SqliteMemoryStore(tmp_path / "memory", clock=earlier)  # two processes on one directory
    fast = SqliteMemoryStore(tmp_path / "memory", clock=later)
    try:
        await slow.write(ORG, [fact("deploy one"), fact("other")])
        [held] = await slow.retrieve(ORG, "deploy", 5)  # used at START, not written yet
        await fast.retrieve(ORG, "deploy", 5)  # used a day later, written first
        await fast.aclose()

        await slow.aclose()  # its older bump written last

        assert stored_usage(slow, held.id) == (START + DAY, 2)
    finally:
        await fast.aclose()
        await slow.aclose()


async def test_a_restatement_folded_by_a_process_with_an_older_clock_keeps_the_later_last_use(
    tmp_path: Path,
) -> None:
    slow = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock(START))
    fast = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock(START + DAY))
    try:
        await slow.write(ORG, [fact("deploys run nightly")])
        [used] = await fast.retrieve(ORG, "deploys", 5)
        await fast.aclose()  # its use, a day later, written

        await slow.write(ORG, [fact("deploys run nightly")])  # a restatement: folded into the record

        assert stored_usage(slow, used.id) == (START + DAY, 2)
    finally:
        await fast.aclose()
        await slow.aclose()


async def test_retrieve_and_list_return_at_most_max_limit_records(store: SqliteMemoryStore) -> None:
    await fill(store, ORG, [f"deploy item {n}" for n in range(60)])
    assert len(await store.retrieve(ORG, "deploy", 500)) == MAX_LIMIT
    assert len(await store.list(ORG, 500)) == MAX_LIMIT
    assert len(await store.list(ORG, 500, "deploy")) == MAX_LIMIT


async def test_list_never_writes(store: SqliteMemoryStore, statements: Statements) -> None:
    await store.write(ORG, [fact("deploy one"), fact("deploy two")])
    statements.clear()
    await store.list(ORG, 5)
    await store.list(ORG, 5, "deploy")
    assert not [sql for sql in statements.sql() if not sql.startswith("SELECT")]


# -- write: targeted lookups, one transaction --------------------------------------------------------


def _transaction_of(statements: list[str]) -> list[str]:
    assert statements[0] == "BEGIN IMMEDIATE" and statements[-1] == "COMMIT", statements
    assert statements.count("BEGIN IMMEDIATE") == 1 and statements.count("COMMIT") == 1
    return statements[1:-1]


async def test_write_plans_from_targeted_lookups_under_the_cap(
    store: SqliteMemoryStore, statements: Statements
) -> None:
    await fill(store, ORG, [f"existing record {n}" for n in range(40)])
    statements.clear()

    result = await store.write(
        ORG,
        [fact("Existing record 3"), fact("replacement", supersedes=rid(ORG, 7)), fact("brand new")],
    )

    assert result == WriteResult(inserted=2, deduped=1, superseded=1)
    body = _transaction_of(statements.sql())
    selects = [sql for sql in body if sql.startswith("SELECT")]
    kinds = []
    with raw(store.database_path(ORG)) as connection:
        for sql in selects:
            query_plan = plan(connection, sql)
            # (a rowid lookup in the stem index, "SCAN records_stems VIRTUAL TABLE INDEX 0:=", is no scan)
            assert re.search(r"SCAN records(?!_stems VIRTUAL TABLE INDEX 0:=)", query_plan) is None, (
                sql,
                query_plan,
            )
            if "norm =" in sql:
                assert "records_status_norm" in query_plan
                kinds.append("norm")
            elif "WHERE id =" in sql:
                kinds.append("id")
            elif "FROM term_df" in sql:
                assert "PRIMARY KEY" in query_plan  # the active count: one row, not an index's range
                kinds.append("count")
            elif "MAX(seq)" in sql:
                kinds.append("seq")
            elif "FROM records_stems WHERE rowid IN" in sql:
                kinds.append("stems")  # the superseded row's stems, to uncount them (by rowid)
            else:
                raise AssertionError(f"unexpected read while under the cap: {sql}")
    assert kinds == ["seq", "norm", "norm", "id", "stems", "norm", "count"]


async def test_an_over_cap_write_evicts_inside_the_batch_transaction(
    tmp_path: Path, statements: Statements
) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path / "memory", cap=5, clock=clock, on_statement=statements)
    try:
        await store.write(ORG, [fact(f"record {n}") for n in range(5)])
        clock.advance(1)
        statements.clear()

        result = await store.write(ORG, [fact("newer one"), fact("newer two")])

        assert result == WriteResult(inserted=2, evicted=2)
        body = _transaction_of(statements.sql())
        excess = [sql for sql in body if "INDEXED BY records_eviction" in sql]
        assert len(excess) == 1
        evictions = [sql for sql in body if "SET status = 'evicted'" in sql]
        assert len(evictions) == 1
        assert body.index(excess[0]) > max(
            i for i, sql in enumerate(body) if sql.startswith("INSERT INTO records ")
        )
        with raw(store.database_path(ORG)) as connection:
            assert "INDEX records_eviction" in plan(connection, excess[0].replace("LIMIT ?", "LIMIT 2"))
            assert seqs_with_status(connection, "evicted") == {1, 2}
            assert len(seqs_with_status(connection, "active")) == 5
    finally:
        await store.aclose()


async def test_a_failing_statement_rolls_back_the_whole_batch(store: SqliteMemoryStore) -> None:
    await store.write(ORG, [fact("keep me"), fact("old fact")])
    with raw(store.database_path(ORG)) as connection:  # a real SQLite failure in the middle of a batch
        connection.execute(
            "CREATE TRIGGER explode BEFORE INSERT ON records WHEN NEW.text = 'explode' "
            "BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )

    with pytest.raises(MemoryStoreError, match="boom"):
        await store.write(
            ORG,
            [
                fact("first of the batch"),
                fact("new fact", supersedes=rid(ORG, 2)),
                fact("keep ME"),
                fact("explode"),
            ],
        )

    rows = {r.id: r for r in await store.list(ORG, 10)}
    assert sorted(rows) == [rid(ORG, 1), rid(ORG, 2)]
    assert rows[rid(ORG, 1)].use_count == 0
    with raw(store.database_path(ORG)) as connection:
        assert fts_rowids(connection) == {1, 2}
        connection.execute("DROP TRIGGER explode")
    assert await store.write(ORG, [fact("after")]) == WriteResult(inserted=1)
    assert ids(await store.list(ORG, 1)) == [rid(ORG, 3)]


# -- FTS hygiene ---------------------------------------------------------------------------------------


async def test_forget_deletes_the_fts_row_and_keeps_the_record(store: SqliteMemoryStore) -> None:
    await store.write(ORG, [fact("use pnpm"), fact("use npm")])
    assert await store.forget(ORG, rid(ORG, 1)) is True
    with raw(store.database_path(ORG)) as connection:
        assert fts_rowids(connection) == seqs_with_status(connection, "active") == {2}
        assert seqs_with_status(connection, "forgotten") == {1}


async def test_supersede_deletes_the_fts_row_and_keeps_the_record(store: SqliteMemoryStore) -> None:
    await store.write(ORG, [fact("staging is us-east-1")])
    await store.write(ORG, [fact("staging is eu-west-1", supersedes=rid(ORG, 1))])
    with raw(store.database_path(ORG)) as connection:
        assert fts_rowids(connection) == seqs_with_status(connection, "active") == {2}
        assert seqs_with_status(connection, "superseded") == {1}


async def test_eviction_deletes_the_fts_rows_and_keeps_the_records(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path / "memory", cap=3, clock=clock)
    try:
        await store.write(ORG, [fact(f"record {n}") for n in range(3)])
        clock.advance(1)
        assert (await store.write(ORG, [fact("record 3"), fact("record 4")])).evicted == 2
        with raw(store.database_path(ORG)) as connection:
            assert fts_rowids(connection) == seqs_with_status(connection, "active") == {3, 4, 5}
            assert seqs_with_status(connection, "evicted") == {1, 2}
    finally:
        await store.aclose()


# -- durability ----------------------------------------------------------------------------------------


async def test_a_new_store_over_the_same_directory_sees_every_acknowledged_write(tmp_path: Path) -> None:
    clock = FakeClock()
    first = SqliteMemoryStore(tmp_path / "memory", clock=clock)
    await first.write(ORG, [fact("deploy with make", keywords=("ship",)), fact("use pnpm")])
    await first.write("user:slack:U1", [fact("prefers short answers")])
    clock.advance(5)
    await first.retrieve(ORG, "deploy", 5)
    assert await first.forget(ORG, rid(ORG, 2)) is True
    await first.aclose()

    second = SqliteMemoryStore(tmp_path / "memory", clock=clock)
    try:
        [record] = await second.list(ORG, 10)
        assert (record.id, record.use_count, record.last_used_at, record.keywords) == (
            rid(ORG, 1),
            1,
            START + 5,
            ("ship",),
        )
        assert ids(await second.list("user:slack:U1", 10)) == ["mem:user:slack:U1:1"]
        assert await second.write(ORG, [fact("next")]) == WriteResult(inserted=1)
        assert ids(await second.list(ORG, 1)) == [rid(ORG, 3)]
    finally:
        await second.aclose()


STREAM = "org:stream"


@contextmanager
def _writer(data_dir: Path, batch_size: int, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """The writer subprocess (tests/memory/sigkill_writer.py); never outlives the test."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.memory.sigkill_writer", str(data_dir), str(batch_size), *extra],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def _acks(lines: list[str]) -> list[int]:
    return [int(line.split()[1]) for line in lines if line.startswith("ack ")]


def _assert_stream_consistent(path: Path, batch_size: int, acked: int) -> int:
    """No half-applied batch, no duplicate id, every acknowledged batch there, FTS == active rows."""
    with raw(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = connection.execute("SELECT seq, id, text, status FROM records ORDER BY seq").fetchall()
        fts = fts_rowids(connection)
        active = seqs_with_status(connection, "active")
    record_ids = [row[1] for row in rows]
    assert len(record_ids) == len(set(record_ids))
    per_batch: dict[int, list[tuple[int, str, str]]] = {}
    for seq, _, text, status in rows:
        match = re.fullmatch(r"stream b(\d+) part (\d+)", text)
        assert match is not None, text
        per_batch.setdefault(int(match.group(1)), []).append((int(match.group(2)), status, str(seq)))
    landed = max(per_batch, default=0)
    assert sorted(per_batch) == list(range(1, landed + 1))
    assert all(len(parts) == batch_size for parts in per_batch.values()), "a half-applied batch"
    assert acked <= landed <= acked + 1
    assert [int(seq) for seq, *_ in rows] == list(range(1, landed * batch_size + 1))
    for number, parts in per_batch.items():  # each batch retired its predecessor's first record
        statuses = {part: status for part, status, _ in parts}
        assert statuses[0] == ("superseded" if number < landed else "active")
        assert {status for part, status in statuses.items() if part} <= {"active"}
    assert fts == active
    return landed


async def test_a_writer_killed_mid_batch_leaves_no_half_applied_batch(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    batch_size = 20
    # SIGKILL itself inside batch 6's transaction, after 11 of its 20 inserts have run
    with _writer(data_dir, batch_size, "--kill-at-insert", str(5 * batch_size + 11)) as process:
        out, err = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, err
    assert _acks(out.splitlines()) == [1, 2, 3, 4, 5]

    landed = _assert_stream_consistent(data_dir / database_filename(STREAM), batch_size, acked=5)

    assert landed == 5
    store = SqliteMemoryStore(data_dir)
    try:
        assert len(await store.list(STREAM, 50, "b5")) == batch_size
        assert await store.list(STREAM, 50, "b6") == []
        assert await store.write(STREAM, [fact("after the crash")]) == WriteResult(inserted=1)
        assert ids(await store.list(STREAM, 1)) == [f"mem:{STREAM}:{5 * batch_size + 1}"]
    finally:
        await store.aclose()


async def test_a_writer_killed_from_outside_mid_stream_keeps_every_acknowledged_batch(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    batch_size = 40
    lines: list[str] = []
    with _writer(data_dir, batch_size) as process:
        assert process.stdout is not None
        while not lines or lines[-1] != "ack 8":
            line = process.stdout.readline()  # blocks this test only; the writer acks within ms
            assert line, "the writer exited before its 8th batch"
            lines.append(line.strip())
        await asyncio.sleep(random.uniform(0, 0.004))  # land somewhere inside the stream
        process.send_signal(signal.SIGKILL)
        rest, _ = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    acked = max(_acks(lines + rest.splitlines()))
    assert acked >= 8

    landed = _assert_stream_consistent(data_dir / database_filename(STREAM), batch_size, acked)

    store = SqliteMemoryStore(data_dir)
    try:
        # active rows: a batch's first record is retired by the next batch
        assert len(await store.list(STREAM, 50, f"b{acked}")) == batch_size - (acked < landed)
        assert len(await store.list(STREAM, 50, f"b{landed}")) == batch_size
    finally:
        await store.aclose()


# -- concurrency ---------------------------------------------------------------------------------------


async def test_two_stores_over_one_directory_serialize_their_writers(tmp_path: Path) -> None:
    one = SqliteMemoryStore(tmp_path / "memory")
    two = SqliteMemoryStore(tmp_path / "memory")
    try:
        batches = [[fact(f"batch {n} a"), fact(f"batch {n} b")] for n in range(20)]
        results = await asyncio.gather(
            *((one if n % 2 else two).write(ORG, b) for n, b in enumerate(batches))
        )
        assert all(result == WriteResult(inserted=2) for result in results)
        listed = await one.list(ORG, 50)
        assert sorted(ids(listed)) == sorted(rid(ORG, n) for n in range(1, 41))
    finally:
        await one.aclose()
        await two.aclose()


async def test_work_on_one_scope_is_serialized_across_worker_threads(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory", cap=1000, workers=4)
    try:
        for round_ in range(3):
            token = f"round{round_}"
            writes = [store.write(ORG, [fact(f"{token} {n} {m}") for m in range(10)]) for n in range(20)]
            reads = [store.retrieve(ORG, token, MAX_LIMIT) for _ in range(20)]
            outcomes = await asyncio.gather(*writes, *reads)
            assert all(outcome == WriteResult(inserted=10) for outcome in outcomes[:20])
            assert all(len(seen) % 10 == 0 for seen in outcomes[20:] if isinstance(seen, list))
        listed = await store.list(ORG, MAX_LIMIT, "round2")
        assert len(listed) == MAX_LIMIT
        with raw(store.database_path(ORG)) as connection:
            assert seqs_with_status(connection, "active") == set(range(1, 601))
    finally:
        await store.aclose()


async def test_stores_racing_to_create_a_scope_database_all_succeed(tmp_path: Path) -> None:
    stores = [SqliteMemoryStore(tmp_path / "memory") for _ in range(4)]
    try:
        for n in range(8):
            scope = f"user:slack:U{n}"
            results = await asyncio.gather(
                *(s.write(scope, [fact(f"from store {i}")]) for i, s in enumerate(stores))
            )
            assert all(result == WriteResult(inserted=1) for result in results)
            assert sorted(ids(await stores[0].list(scope, 10))) == sorted(rid(scope, k) for k in range(1, 5))
    finally:
        for store in stores:
            await store.aclose()


async def test_a_reader_on_another_connection_never_sees_half_a_batch(tmp_path: Path) -> None:
    writer = SqliteMemoryStore(tmp_path / "memory")
    reader = SqliteMemoryStore(tmp_path / "memory")
    seen: list[int] = []
    done = asyncio.Event()
    await writer.write(ORG, [fact("warm up")])

    async def read_while_writing() -> None:
        while not done.is_set():
            seen.append(len(await reader.retrieve(ORG, "wave", MAX_LIMIT)))
            seen.append(len(await reader.list(ORG, MAX_LIMIT, "wave")))

    try:
        reading = asyncio.create_task(read_while_writing())
        for _ in range(8):
            await writer.write(ORG, [fact(f"wave item {n}") for n in range(5)])
            await asyncio.sleep(0)
        done.set()
        await reading
    finally:
        await writer.aclose()
        await reader.aclose()
    assert seen
    assert all(count % 5 == 0 for count in seen), seen


async def test_sqlite_work_runs_off_the_event_loop_thread(
    store: SqliteMemoryStore, statements: Statements
) -> None:
    await store.write(ORG, [fact("deploy one")])
    await store.retrieve(ORG, "deploy", 5)
    await store.list(ORG, 5)
    assert await store.forget(ORG, rid(ORG, 1)) is True
    loop_thread = threading.get_ident()
    threads = {thread for _, _, thread in statements.seen}
    assert threads
    assert loop_thread not in threads


# -- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        ("", "non-empty"),
        ("org:" + "x" * 197, "at most 200"),
        ("org:acme corp", "whitespace or control"),
        ("org:a\tb", "whitespace or control"),
        ("org:a\nb", "whitespace or control"),
        ("org:a\x00b", "whitespace or control"),
        ("org:a\x7fb", "whitespace or control"),
    ],
)
async def test_bad_scope_keys_are_refused_naming_the_rule_and_nothing_is_written(
    tmp_path: Path, key: str, rule: str
) -> None:
    data_dir = tmp_path / "memory"
    store = SqliteMemoryStore(data_dir)
    try:
        with pytest.raises(ValueError, match=rule):
            await store.write(key, [fact("should not land")])
        with pytest.raises(ValueError, match=rule):
            await store.retrieve(key, "land", 5)
        with pytest.raises(ValueError, match=rule):
            await store.list(key, 5)
        with pytest.raises(ValueError, match=rule):
            await store.forget(key, f"mem:{key}:1")
    finally:
        await store.aclose()
    assert not data_dir.exists()


async def test_bad_candidates_are_refused_before_anything_is_written(store: SqliteMemoryStore) -> None:
    bad_kind = MemoryCandidate(kind="opinion", text="x", source_thread_key="t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"candidates\[1\]\.kind"):
        await store.write(ORG, [fact("fine"), bad_kind])
    with pytest.raises(ValueError, match=r"candidates\[0\]\.text"):
        await store.write(ORG, [fact("broken \ud800 surrogate"), fact("fine")])
    with pytest.raises(ValueError, match=r"candidates\[0\]\.keywords\[1\]"):
        await store.write(ORG, [fact("fine", keywords=("ok", "\udfff"))])
    assert not store.database_path(ORG).exists()


async def test_the_default_cap_is_the_scope_default(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    assert store.cap == DEFAULT_SCOPE_CAP == 500
    await store.aclose()


@pytest.mark.parametrize("cap", [0, -1, 10_001, True, 2.5])
async def test_a_cap_outside_1_to_10000_is_refused(tmp_path: Path, cap: object) -> None:
    with pytest.raises(ValueError, match="cap must be an integer from 1 to 10000"):
        SqliteMemoryStore(tmp_path, cap=cap)  # type: ignore[arg-type]
    store = SqliteMemoryStore(tmp_path)
    try:
        with pytest.raises(ValueError, match="cap must be an integer"):
            await store.write(ORG, [fact("x")], cap=cap)  # type: ignore[arg-type]
    finally:
        await store.aclose()


# -- failures ------------------------------------------------------------------------------------------


async def test_an_unreadable_database_raises_a_store_error(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    data_dir.mkdir()
    (data_dir / database_filename(ORG)).write_bytes(b"this is not a database" * 100)
    store = SqliteMemoryStore(data_dir)
    try:
        with pytest.raises(MemoryStoreError, match=f"scope {ORG}"):
            await store.list(ORG, 5)
        with pytest.raises(MemoryStoreError):
            await store.write(ORG, [fact("x")])
    finally:
        await store.aclose()


async def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    await store.write(ORG, [fact("x")])
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(MemoryStoreError, match="closed"):
        await store.list(ORG, 5)
    with pytest.raises(MemoryStoreError, match="closed"):
        await store.write(ORG, [fact("y")])


# -- the origin label's migration (issue 14) -------------------------------------------------------

# The schema as it was before origins were stored (main at 68a4e75), copied so the test keeps meaning
# what it says however the store's own DDL changes.
_PRE_ORIGIN_SCHEMA = """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE records (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        scope_key TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('fact', 'summary')),
        text TEXT NOT NULL,
        norm TEXT NOT NULL,
        keywords TEXT NOT NULL DEFAULT '[]',
        source_thread_key TEXT NOT NULL,
        source_run_id TEXT,
        created_at REAL NOT NULL,
        last_used_at REAL,
        use_count INTEGER NOT NULL DEFAULT 0,
        confidence REAL,
        supersedes TEXT,
        status TEXT NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted'))
    );
    CREATE INDEX records_status_norm ON records (status, norm);
    CREATE INDEX records_active_seq ON records (status, seq DESC);
    CREATE INDEX records_active_used ON records (status, last_used_at DESC, created_at DESC);
    CREATE VIRTUAL TABLE records_fts USING fts5(text, keywords, tokenize = 'ascii');
"""


def write_pre_origin_database(data_dir: Path, scope_key: str, texts: list[str]) -> Path:
    """A scope database exactly as today's store (before origins) leaves it, holding `texts`."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / database_filename(scope_key)
    with raw(path) as connection:
        connection.executescript(_PRE_ORIGIN_SCHEMA)
        connection.execute(
            "INSERT INTO meta (key, value) VALUES ('scope_key', ?), ('schema_version', '1')", (scope_key,)
        )
        for seq, text in enumerate(texts, start=1):
            connection.execute(
                "INSERT INTO records (seq, id, scope_key, kind, text, norm, source_thread_key, created_at)"
                " VALUES (?, ?, ?, 'fact', ?, ?, 'slack:C1:1.0', ?)",
                (seq, rid(scope_key, seq), scope_key, text, text.lower(), START),
            )
            connection.execute(
                "INSERT INTO records_fts (rowid, text, keywords) VALUES (?, ?, '')", (seq, text.lower())
            )
    return path


@pytest.mark.parametrize(
    ("scope_key", "label"),
    [
        ("org:acme", ("public", None)),
        ("repo:acme/api", ("public", None)),
        ("channel:slack:C0PRIV", ("private", "slack:C0PRIV")),
        ("user:slack:U0A", ("unknown", None)),
    ],
)
async def test_a_database_from_before_origins_migrates_in_place_with_conservative_labels(
    tmp_path: Path, scope_key: str, label: tuple[str, str | None]
) -> None:
    data_dir = tmp_path / "memory"
    path = write_pre_origin_database(data_dir, scope_key, ["deploy with make", "staging is eu-west-1"])
    store = SqliteMemoryStore(data_dir, clock=FakeClock())
    try:
        listed = await store.list(scope_key, 10)
        assert [(r.origin, r.origin_conversation) for r in listed] == [label, label]
        (found,) = await store.retrieve(scope_key, "deploy", 5)
        assert (found.text, found.origin, found.origin_conversation) == ("deploy with make", *label)
        # New writes carry their own label beside the migrated rows.
        await store.write(scope_key, [fact("a new fact", origin="public", origin_conversation="slack:C9")])
        newest = (await store.list(scope_key, 1))[0]
        assert (newest.text, newest.origin, newest.origin_conversation) == (
            "a new fact",
            "public",
            "slack:C9",
        )
    finally:
        await store.aclose()
    reopened = SqliteMemoryStore(data_dir, clock=FakeClock())  # the migration runs once, not per open
    try:
        labels = [(r.origin, r.origin_conversation) for r in await reopened.list(scope_key, 10)]
        assert labels == [("public", "slack:C9"), label, label]
    finally:
        await reopened.aclose()
    with raw(path) as connection:
        columns = {str(row[1]) for row in connection.execute("PRAGMA table_info(records)")}
    assert {"origin", "origin_conversation"} <= columns


# -- the scope index: a retrieve reads no records, and never serves a stale one ---------------------


async def test_a_retrieve_of_an_unchanged_scope_runs_only_the_freshness_check(
    store: SqliteMemoryStore, statements: Statements
) -> None:
    await fill(store, ORG, [f"deploy note {n}" for n in range(30)])
    await store.retrieve(ORG, "deploy", 5)  # builds the index
    statements.clear()

    found = await store.retrieve(ORG, "deploy note", 5)

    assert len(found) == 5
    assert statements.sql() == ["PRAGMA data_version"]


async def test_a_write_catches_the_index_up_by_reading_only_the_rows_it_changed(
    store: SqliteMemoryStore, statements: Statements
) -> None:
    await fill(store, ORG, [f"deploy note {n}" for n in range(30)])
    await store.retrieve(ORG, "deploy", 5)
    statements.clear()

    await store.write(ORG, [fact("deploy the new thing"), fact("old fact", supersedes=rid(ORG, 3))])

    sql = statements.sql()
    after = sql[len(sql) - sql[::-1].index("PRAGMA data_version") :]  # the catch-up after the commit
    reads = [statement for statement in after if statement.startswith("SELECT")]
    assert len(reads) == 2, reads  # the generation, then the changed rows by the `changed` index
    assert "r.changed > " in reads[1]
    with raw(store.database_path(ORG)) as connection:
        assert "records_changed" in plan(connection, reads[1])
    statements.clear()
    found = await store.retrieve(ORG, "deploy thing", 40)
    assert rid(ORG, 31) in ids(found) and rid(ORG, 3) not in ids(found)
    assert statements.sql() == ["PRAGMA data_version"]


async def test_a_forget_by_another_process_is_never_served_from_the_index(tmp_path: Path) -> None:
    ours = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock())
    theirs = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock())
    try:
        await ours.write(ORG, [fact("the vault code is in the wiki"), fact("deploy on fridays")])
        assert ids(await ours.retrieve(ORG, "vault wiki", 5)) == [rid(ORG, 1)]

        assert await theirs.forget(ORG, rid(ORG, 1))
        await theirs.write(ORG, [fact("the vault moved to the new wiki")])

        assert ids(await ours.retrieve(ORG, "vault wiki", 5)) == [rid(ORG, 3)]
        assert await ours.erase_scope(ORG, "channel_deleted") == 2
        assert await theirs.retrieve(ORG, "vault wiki", 5) == []
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_usage_bumped_by_another_process_reaches_the_index(tmp_path: Path) -> None:
    clock = FakeClock()
    ours = SqliteMemoryStore(tmp_path / "memory", clock=clock)
    try:
        await ours.write(ORG, [fact("deploy the api"), fact("deploy the worker")])
        assert ids(await ours.retrieve(ORG, "deploy", 1)) == [rid(ORG, 1)]  # equal scores: write order
        await ours.aclose()
        ours = SqliteMemoryStore(tmp_path / "memory", clock=clock)
        assert ids(await ours.retrieve(ORG, "api", 1)) == [rid(ORG, 1)]  # our index now holds both

        clock.advance(DAY)
        theirs = SqliteMemoryStore(tmp_path / "memory", clock=clock)
        try:
            assert ids(await theirs.retrieve(ORG, "worker", 1)) == [rid(ORG, 2)]
        finally:
            await theirs.aclose()  # their bump is written: record 2 was used a day later

        found = await ours.retrieve(ORG, "deploy", 1)
        assert ids(found) == [rid(ORG, 2)]  # the fresher use wins the tie on keywords
        assert found[0].use_count == 2
    finally:
        await ours.aclose()


async def test_an_origin_label_this_version_does_not_know_reads_back_as_unknown(tmp_path: Path) -> None:
    """A label a newer version wrote (as `external` once was): never read wider than dm."""
    store = SqliteMemoryStore(tmp_path)
    scope = "channel:slack:C7"
    await store.write(
        scope, [fact("the partner ships in March", origin="external", origin_conversation="slack:C7")]
    )
    await store.aclose()
    with closing(sqlite3.connect(store.database_path(scope))) as connection:
        connection.execute("UPDATE records SET origin = 'some-future-audience'")
        connection.commit()
    reopened = SqliteMemoryStore(tmp_path)
    try:
        (record,) = await reopened.list(scope, 5)
    finally:
        await reopened.aclose()
    assert (record.origin, record.origin_conversation) == ("unknown", "slack:C7")
