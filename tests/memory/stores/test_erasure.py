"""Forgetting that erases: the forgotten text is gone from the bytes on disk, not just hidden.

SQLite: the scope's main database file and its WAL are read as raw bytes and grepped, after `memory
forget`, after a source message's deletion and after expiry. PostgreSQL: after the erase and a VACUUM,
no tuple of the table's heap pages (read with pageinspect) holds the text.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from memory.ranking.embedder import CachedEmbedder
from memory.ranking.fusion import DEFAULT_RANKING, SPEC, Ranking
from memory.ranking.lexical import _query_stems, _stems, forget_cached_texts
from memory.rules.retention import Retention
from memory.rules.scorer import clean_memory_field
from memory.stores.in_process.store import InProcessMemoryStore
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.stores.usage_bumps import FLUSH_SECONDS
from memory.types import MemoryCandidate, MemoryRecord, SourceLink
from tests.memory.embedders import ConceptEmbedder
from tests.memory.postgres_support import admin_connect, temp_schema, unique_application_name
from tests.memory.store_contract import DAY, FakeClock

ORG = "org:acme"
ROOT = str(Path(__file__).resolve().parents[3])
FORGET_IN_ANOTHER_PROCESS = """
import asyncio, sys
from pathlib import Path
from memory.stores.sqlite.store import SqliteMemoryStore

async def main():
    store = SqliteMemoryStore(Path(sys.argv[1]))
    assert await store.forget("org:acme", "mem:org:acme:31")
    await store.aclose()

asyncio.run(main())
"""
SECRET = "Quokkaflight"  # the distinctive word of the text that must leave the disk
SECRET_TEXT = f"The vault door code is {SECRET} seven seven three one"


def candidate(text: str, run: str = "run-1") -> MemoryCandidate:
    return MemoryCandidate(
        kind="fact",
        text=text,
        source_thread_key="slack:C1:1700000000.000100",
        keywords=(SECRET.lower(), "vault") if SECRET in text else ("deploy",),
        source_run_id=run,
        confidence=0.9,
    )


def filler(n: int, start: int = 0) -> list[MemoryCandidate]:
    return [
        candidate(f"deploys happen from the release branch number {i}", run="run-other")
        for i in range(start, start + n)
    ]


def disk_bytes(store: SqliteMemoryStore, scope_key: str) -> bytes:
    """The scope's main file and its WAL (when there is one), lower-cased for a case-blind grep."""
    main = store.database_path(scope_key)
    data = main.read_bytes()
    wal = Path(f"{main}-wal")
    if wal.exists():
        data += wal.read_bytes()
    return data.lower()


def assert_gone(store: SqliteMemoryStore, scope_key: str) -> None:
    assert SECRET.lower().encode() not in disk_bytes(store, scope_key)


async def written(store: SqliteMemoryStore | InProcessMemoryStore) -> None:
    await store.write(ORG, filler(30))
    await store.write(ORG, [candidate(SECRET_TEXT)])
    await store.write(ORG, filler(5, start=30))
    assert await store.retrieve(ORG, SECRET, 5)  # it is really there, and matched through FTS
    if isinstance(store, SqliteMemoryStore):
        assert SECRET.lower().encode() in disk_bytes(store, ORG)  # the check can see it


async def test_after_forget_neither_the_main_file_nor_the_wal_holds_the_text(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await written(store)
        assert await store.forget(ORG, "mem:org:acme:31") is True
        assert_gone(store, ORG)
        assert len(await store.list(ORG, 50)) == 35
    finally:
        await store.aclose()
    assert_gone(SqliteMemoryStore(tmp_path), ORG)  # and after close (the last checkpoint) as well


def records_holding_the_text() -> int:
    """How many records anywhere in this process still hold the secret text."""
    gc.collect()
    return sum(1 for held in gc.get_objects() if isinstance(held, MemoryRecord) and SECRET in held.text)


@contextlib.asynccontextmanager
async def forgotten(tmp_path: Path, ranking: Ranking) -> AsyncIterator[SqliteMemoryStore]:
    """A store whose scope held the secret text, read through, and has just forgotten it."""
    store = SqliteMemoryStore(tmp_path, ranking=ranking)
    try:
        await written(store)
        assert await store.forget(ORG, "mem:org:acme:31") is True
        yield store
    finally:
        await store.aclose()


@pytest.mark.parametrize("ranking", [DEFAULT_RANKING, SPEC])
async def test_after_forget_no_copy_of_the_record_waits_in_the_process_for_the_next_read(
    tmp_path: Path, ranking: Ranking
) -> None:
    async with forgotten(tmp_path, ranking):
        assert records_holding_the_text() == 0


@pytest.mark.parametrize("ranking", [DEFAULT_RANKING, SPEC])
async def test_after_forget_no_copy_of_the_record_stays_in_the_process(
    tmp_path: Path, ranking: Ranking
) -> None:
    async with forgotten(tmp_path, ranking) as store:
        assert await store.retrieve(ORG, "deploys release", 5)  # the scope is read again since
        assert records_holding_the_text() == 0


async def test_after_another_process_forgets_no_copy_stays_in_the_process_past_the_next_read(
    tmp_path: Path,
) -> None:
    store, other = SqliteMemoryStore(tmp_path, ranking=SPEC), SqliteMemoryStore(tmp_path, ranking=SPEC)
    try:
        await written(store)
        assert await other.forget(ORG, "mem:org:acme:31") is True
        await other.aclose()
        assert records_holding_the_text() > 0  # this store cannot know yet

        assert await store.retrieve(ORG, "deploys release", 5)

        assert records_holding_the_text() == 0
    finally:
        await other.aclose()
        await store.aclose()


def caches_hold_the_text(*, forget: bool = True) -> bool:
    """Whether the process-wide caches keyed by text (the stems memoized by text, the cleaned fields)
    still hold the secret record's: a lookup of its key that is a hit. The lookups put it back: they
    are let go again (`forget`), or left for a read that must let go of them."""
    keywords = candidate(SECRET_TEXT).keywords
    stems_before, fields_before = _stems.cache_info().hits, clean_memory_field.cache_info().hits
    _stems(" ".join((SECRET_TEXT, *keywords)))
    clean_memory_field(SECRET_TEXT)
    hits = _stems.cache_info().hits - stems_before + clean_memory_field.cache_info().hits - fields_before
    if forget:
        forget_cached_texts()
    return hits > 0


async def read_and_render(store: SqliteMemoryStore | InProcessMemoryStore) -> None:
    """A read that stems the secret record and a view that cleans its text (as `memory why` does)."""
    found = await store.retrieve(ORG, f"{SECRET} vault door", 5)
    assert any(SECRET in record.text for record in found)
    for record in found:
        clean_memory_field(record.text)


@pytest.mark.parametrize("kind", ["sqlite", "in-process"])
async def test_after_forget_the_caches_keyed_by_text_let_go_of_it(tmp_path: Path, kind: str) -> None:
    store = SqliteMemoryStore(tmp_path) if kind == "sqlite" else InProcessMemoryStore()
    try:
        await written(store)
        await read_and_render(store)
        assert caches_hold_the_text()
        await read_and_render(store)

        assert await store.forget(ORG, "mem:org:acme:31") is True

        assert not caches_hold_the_text()
    finally:
        await store.aclose()


async def test_after_forget_the_caches_keyed_by_a_question_let_go_of_it(tmp_path: Path) -> None:
    """The message that taught a record is asked with its words (every message is a read's query):
    the query caches (its stems, its vector) are keyed by them and let go of them at a forget too."""
    embedder = CachedEmbedder("concept-test", ConceptEmbedder().embed)
    store = SqliteMemoryStore(tmp_path, embedder=embedder)
    try:
        await written(store)
        assert await store.retrieve(ORG, SECRET_TEXT, 5)
        assert any(SECRET in key for key in embedder._queries)  # the check can see it

        assert await store.forget(ORG, "mem:org:acme:31") is True

        assert not any(SECRET in key for key in embedder._queries)
        before = _query_stems.cache_info().hits
        _query_stems(SECRET_TEXT)
        assert _query_stems.cache_info().hits == before
    finally:
        await store.aclose()


async def test_after_another_process_forgets_the_caches_keyed_by_text_let_go_at_the_next_read(
    tmp_path: Path,
) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await written(store)
        await read_and_render(store)
        # The read's usage flush (a catch-up of the scope, FLUSH_SECONDS later) runs now: run after the
        # other process's forget it would itself let go of the caches, before the read the test makes.
        await asyncio.sleep(2 * FLUSH_SECONDS)
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            FORGET_IN_ANOTHER_PROCESS,
            str(tmp_path),
            env={**os.environ, "PYTHONPATH": ROOT},
        )
        assert await asyncio.wait_for(child.wait(), 60) == 0
        assert caches_hold_the_text(forget=False)  # this process cannot know yet

        assert await store.retrieve(ORG, "deploys release", 5)

        assert not caches_hold_the_text()
    finally:
        await store.aclose()


async def test_after_a_source_deletion_the_files_do_not_hold_the_text(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await store.link_sources(SourceLink("run-1", (ORG,), ("slack:C1:1700000000.000100",)))
        await written(store)
        assert await store.erase_sources(["slack:C1:1700000000.000100"], "source_deleted") == 1
        assert_gone(store, ORG)
    finally:
        await store.aclose()


async def test_after_expiry_the_files_do_not_hold_the_text(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path, clock=clock, retention=Retention(ttl_days=10))
    try:
        await written(store)
        clock.advance(11 * DAY)
        assert await store.erase_expired() == 36
        assert_gone(store, ORG)
    finally:
        await store.aclose()


async def test_expiry_on_the_scopes_next_write_leaves_nothing_on_disk(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path, clock=clock, retention=Retention(ttl_days=10))
    try:
        await store.write(ORG, [candidate(SECRET_TEXT)])
        clock.advance(11 * DAY)
        await store.write(ORG, filler(1))
        assert_gone(store, ORG)
    finally:
        await store.aclose()


async def test_an_erased_row_keeps_its_identity_provenance_dates_status_and_reason(tmp_path: Path) -> None:
    import sqlite3

    store = SqliteMemoryStore(tmp_path)
    try:
        await store.write(ORG, [candidate(SECRET_TEXT)])
        await store.forget(ORG, "mem:org:acme:1")
        path = store.database_path(ORG)
    finally:
        await store.aclose()
    with contextlib.closing(sqlite3.connect(path)) as connection:
        row = connection.execute(
            "SELECT id, scope_key, text, norm, keywords, source_thread_key, source_run_id, status,"
            " erased_reason, erased_at IS NOT NULL, created_at IS NOT NULL FROM records"
        ).fetchone()
        fts = connection.execute("SELECT COUNT(*) FROM records_fts").fetchone()[0]
    assert row == (
        "mem:org:acme:1",
        ORG,
        "",
        "",
        "[]",
        "slack:C1:1700000000.000100",
        "run-1",
        "forgotten",
        "forgotten",
        1,
        1,
    )
    assert fts == 0


async def test_an_existing_database_without_the_erasure_columns_migrates_in_place(tmp_path: Path) -> None:
    import sqlite3

    store = SqliteMemoryStore(tmp_path)
    await store.write(ORG, [candidate("deploys freeze on fridays")])
    path = store.database_path(ORG)
    await store.aclose()
    with contextlib.closing(sqlite3.connect(path)) as connection:  # as today's main wrote it
        connection.execute("ALTER TABLE records DROP COLUMN erased_reason")
        connection.execute("ALTER TABLE records DROP COLUMN erased_at")
        connection.commit()
    again = SqliteMemoryStore(tmp_path)
    try:
        assert [r.id for r in await again.list(ORG, 10)] == ["mem:org:acme:1"]
        assert await again.forget(ORG, "mem:org:acme:1") is True
        assert await again.list(ORG, 10) == []
    finally:
        await again.aclose()


# --- PostgreSQL: updated in place; after a VACUUM no heap tuple holds the text -----------------------


def _heap_tuples(conn: psycopg.Connection[tuple[object, ...]], table: str) -> list[bytes]:
    """The live tuples of every heap page of the table (of each of its partitions, when it has them),
    raw, lower-cased: never updated or deleted (`t_xmax` 0), or only locked (HEAP_XMAX_LOCK_ONLY,
    0x0080: an erase locks its rows FOR UPDATE, and the new version keeps that lock) or left by an
    aborted updater (HEAP_XMAX_INVALID, 0x0800)."""
    leaves = conn.execute(
        "SELECT relid::text, pg_relation_size(relid) / current_setting('block_size')::int"
        " FROM pg_partition_tree(%s::regclass) WHERE isleaf",
        (table,),
    ).fetchall()
    found: list[bytes] = []
    for leaf, pages in leaves:
        for page in range(int(str(pages))):
            for (data,) in conn.execute(
                "SELECT t_data FROM heap_page_items(get_raw_page(%s, %s))"
                " WHERE t_xmax = '0' OR (t_infomask & (128 | 2048)) <> 0",
                (leaf, page),
            ).fetchall():
                if data is not None:
                    assert isinstance(data, bytes)
                    found.append(data.lower())
    return found


@pytest.fixture
def pageinspect() -> None:
    with admin_connect() as conn, contextlib.suppress(psycopg.errors.UniqueViolation):
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")


async def test_postgres_forget_updates_in_place_and_a_vacuum_leaves_no_copy_in_the_heap(
    pageinspect: None,
) -> None:
    with temp_schema() as schema:
        store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
        try:
            await store.write(ORG, [candidate("deploys happen on tuesdays")])
            await store.write(ORG, [candidate(SECRET_TEXT)])
            table = f"{schema.name}.memory_records"
            with admin_connect() as conn:
                assert any(SECRET.lower().encode() in t for t in _heap_tuples(conn, table))
            assert await store.forget(ORG, "mem:org:acme:2") is True
            with admin_connect() as conn:
                conn.execute(f"VACUUM {table}")
                tuples = _heap_tuples(conn, table)
                live = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert live == (2,)  # the row stayed (id, scope, provenance, status, reason)
            assert not any(SECRET.lower().encode() in t for t in tuples)
            assert any(b"tuesdays" in t for t in tuples)  # the check can see live text
        finally:
            await store.aclose()


async def test_postgres_erasure_scrubs_a_column_another_replica_added_after_this_one_opened() -> None:
    """A rolling upgrade: a newer replica adds a text column while this one runs, after this one's
    first erasure read the table's columns; this one's next erasure scrubs the new column too."""
    with temp_schema() as schema:
        store = await PostgresMemoryStore.connect(schema.dsn, application_name=unique_application_name())
        try:
            await store.write(ORG, [candidate("deploys happen on tuesdays")])
            await store.write(ORG, [candidate(SECRET_TEXT)])
            assert await store.forget(ORG, "mem:org:acme:1") is True  # the columns read, before the new one
            with admin_connect() as conn:
                conn.execute(f"ALTER TABLE {schema.name}.memory_records ADD COLUMN summary_of_text text")
                conn.execute(
                    f"UPDATE {schema.name}.memory_records SET summary_of_text = %s WHERE seq = 2",
                    (SECRET_TEXT,),
                )
            assert await store.forget(ORG, "mem:org:acme:2") is True
            with admin_connect() as conn:
                left = conn.execute(
                    f"SELECT seq, summary_of_text FROM {schema.name}.memory_records ORDER BY seq"
                )
                assert left.fetchall() == [(1, None), (2, None)]
        finally:
            await store.aclose()
