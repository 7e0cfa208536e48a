"""The start-up migration of DMs' old `channel:` scopes (memory/stores/dm_scopes.py).

A data directory is written the old way — the reflection of an older version put a DM's "channel"
facts in `channel:slack:D…`, some before origins were stored — then a fresh store is migrated: what
has one owner in the read audit moves into their user scope labelled `dm`; the rest is erased with
reason `migrated`; either way no byte of the old scope's text is left in its file.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

from structlog.testing import capture_logs

from memory.rules.restate import meaning_key
from memory.stores.build import memory_dir
from memory.stores.contract import MemoryStore, Progress, ScopeMaintenance
from memory.stores.dm_scopes import DmMigration, migrate_dm_scopes, migrate_dm_scopes_at_start
from memory.stores.http import HttpMemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate, ReadAudit, SourceLink
from tests.memory.postgres_support import temp_schema, unique_application_name
from tests.memory.service_support import TOKEN, memory_service_process

OWNED = "channel:slack:D1"  # UA's DM: the read audit names UA for its runs
LEGACY = "channel:slack:D4"  # UA's other DM, written before origins were stored; named by thread only
NOBODY = "channel:slack:D2"  # no audit left for it
TWO = "channel:slack:T1:D3"  # a multi-workspace DM the audit names two people for
RETIRED = "channel:slack:D5"  # only a superseded row is left, its text still in the row
PUBLIC = "channel:slack:C1"
UA = "user:slack:UA"

OWNED_WORD, LEGACY_WORD, NOBODY_WORD, TWO_WORD = "Quokkavale", "Tamarindo", "Zephyrlot", "Bramblequill"
RETIRED_WORD = "Cormorantix"


OBSERVED = 1_700_000_000.0  # when UA's DM conversations happened, long before the migration


def old_fact(text: str, conversation: str, run: str | None, thread: str) -> MemoryCandidate:
    return MemoryCandidate(
        "fact", text, thread, keywords=("runbook",), source_run_id=run, confidence=0.9,
        origin="dm", origin_conversation=conversation, observed_at=OBSERVED,
    )  # fmt: skip


async def written_the_old_way(store: MemoryStore) -> None:
    owned = [old_fact(f"step {i} of the deploy runbook is drafted here", "slack:D1", "run-d1", "slack:D1:1.0")
             for i in range(57)]  # fmt: skip
    owned.insert(
        20, old_fact(f"the {OWNED_WORD} cutover happens on a tuesday", "slack:D1", "run-d1", "slack:D1:1.0")
    )
    for start in range(0, len(owned), 50):
        await store.write(OWNED, owned[start : start + 50])
    await store.write(
        LEGACY, [old_fact(f"the {LEGACY_WORD} pager is mine this week", "slack:D4", None, "slack:D4:2.0")]
    )
    await store.write(
        NOBODY, [old_fact(f"the {NOBODY_WORD} key lives in the vault", "slack:D2", "run-d2", "slack:D2:3.0")]
    )
    await store.write(
        TWO, [old_fact(f"the {TWO_WORD} board meets monthly", "slack:T1:D3", "run-d3", "slack:T1:D3:4.0")]
    )
    await store.write(
        PUBLIC, [MemoryCandidate("fact", "deploys go through make ship", "slack:C1:5.0", origin="public")]
    )
    await store.write(
        RETIRED, [old_fact(f"the {RETIRED_WORD} pager rota is weekly", "slack:D5", None, "slack:D5:6.0")]
    )
    # Its successor erased alone (a forget erases the whole chain): the older version keeps its text.
    await store.link_sources(SourceLink("run-d5", (RETIRED,), ("slack:D5:7.0",)))
    newer = old_fact("the pager rota is now monthly", "slack:D5", "run-d5", "slack:D5:7.0")
    await store.write(RETIRED, [replace(newer, supersedes=f"mem:{RETIRED}:1")])
    assert await store.erase_sources(["slack:D5:7.0"], "source_deleted") == 1
    await store.record_read(
        ReadAudit("run-d1", "slack:D1:1.0", "slack:UA", ("org:acme", OWNED, UA), (), time.time())
    )
    await store.record_read(
        ReadAudit("run-d4", "slack:D4:2.0", "slack:UA", ("org:acme", LEGACY, UA), (), time.time())
    )
    for asker in ("slack:T1:UA", "slack:T1:UB"):  # fmt: skip
        await store.record_read(ReadAudit("run-d3", "slack:T1:D3:4.0", asker, (TWO,), (), time.time()))


def files_holding(data_dir: Path, word: str) -> list[str]:
    needle = word.lower().encode()
    return sorted(p.name for p in data_dir.rglob("*") if p.is_file() and needle in p.read_bytes().lower())


async def texts(store: MemoryStore, scope: str) -> set[str]:
    return {meaning_key(r.text) for r in await store.list(scope, 50, query=None)}


async def assert_migrated(store: MemoryStore, done: DmMigration) -> None:
    assert done == DmMigration(scopes=5, moved=59, erased=3)
    for scope in (OWNED, LEGACY, NOBODY, TWO, RETIRED):
        assert await store.list(scope, 50) == [], scope
    mine = await store.list(UA, 50, query=OWNED_WORD)
    assert [(r.origin, r.origin_conversation, r.source_run_id, r.observed_at) for r in mine] == [
        ("dm", "slack:D1", "run-d1", OBSERVED)  # still dated by its conversation, not by the move
    ]
    (legacy,) = await store.list(UA, 50, query=LEGACY_WORD)
    assert (legacy.origin, legacy.origin_conversation) == ("dm", "slack:D4")  # not the legacy `private`
    assert len(await store.list(UA, 50, query="runbook drafted")) == 50  # all 57 steps moved (a page shown)
    assert not any(NOBODY_WORD.lower() in t or TWO_WORD.lower() in t for t in await texts(store, UA))
    for user in ("user:slack:T1:UA", "user:slack:T1:UB"):
        assert await store.list(user, 50) == []  # two people named: neither gets it
    assert await texts(store, PUBLIC) == {"deploys go through make ship"}
    assert await migrate_dm_scopes(store) == DmMigration()  # a second start-up finds nothing


async def test_a_data_directory_with_old_dm_channel_scopes_is_migrated_and_scrubbed(tmp_path: Path) -> None:
    old = SqliteMemoryStore(tmp_path)
    await written_the_old_way(old)
    await old.aclose()
    legacy = old.database_path(LEGACY)
    with contextlib.closing(sqlite3.connect(legacy)) as connection:  # before origins were stored
        connection.execute("ALTER TABLE records DROP COLUMN origin")
        connection.execute("ALTER TABLE records DROP COLUMN origin_conversation")
        connection.commit()
    for word in (OWNED_WORD, LEGACY_WORD, NOBODY_WORD, TWO_WORD, RETIRED_WORD):
        assert files_holding(tmp_path, word), word  # the check can see them

    store = SqliteMemoryStore(tmp_path)
    try:
        await assert_migrated(store, await migrate_dm_scopes(store))
        own_file = store.database_path(UA).name
        for word in (OWNED_WORD, LEGACY_WORD):
            assert all(name.startswith(own_file) for name in files_holding(tmp_path, word)), word
        for word in (NOBODY_WORD, TWO_WORD, RETIRED_WORD):
            assert files_holding(tmp_path, word) == [], word
        with contextlib.closing(sqlite3.connect(store.database_path(OWNED))) as connection:
            reasons = connection.execute("SELECT DISTINCT erased_reason, status FROM records").fetchall()
        assert reasons == [("migrated", "forgotten")]

        await store.erase_scope(UA, "user_request")  # and an erasure of UA reaches all of it
        for word in (OWNED_WORD, LEGACY_WORD):
            assert files_holding(tmp_path, word) == [], word
    finally:
        await store.aclose()


async def test_postgres_migrates_the_same_way() -> None:
    with temp_schema() as schema:
        store = await PostgresMemoryStore.connect(schema.dsn, application_name=unique_application_name())
        try:
            await written_the_old_way(store)
            await assert_migrated(store, await migrate_dm_scopes(store))
        finally:
            await store.aclose()


async def test_a_store_that_cannot_list_its_scopes_has_nothing_to_migrate() -> None:
    store = InProcessMemoryStore()  # starts empty each process: no old scope can be in it
    await store.write(OWNED, [old_fact("a fact", "slack:D1", None, "slack:D1:1.0")])
    await migrate_dm_scopes_at_start(store)
    assert await migrate_dm_scopes(store) == DmMigration()


class BrokenStore(InProcessMemoryStore):
    def maintenance(self) -> ScopeMaintenance | None:
        return self

    async def scope_keys(self) -> list[str]:
        raise OSError("disk gone")

    async def reindex(self, scope_key: str, *, batch: int = 0, progress: Progress | None = None) -> int:
        return 0

    async def foreign_vectors(self) -> int:
        return 0


async def test_a_failed_migration_is_one_warning_not_a_refused_start() -> None:
    with capture_logs() as logs:
        await migrate_dm_scopes_at_start(BrokenStore())
    assert [(e["event"], e["error"]) for e in logs] == [("memory.dm_scope_migration_failed", "OSError")]


async def test_the_memory_service_migrates_its_own_store_when_it_starts(tmp_path: Path) -> None:
    """The bot's HTTP client does not migrate (it cannot list scopes): `memory-service` does, at start."""
    old = SqliteMemoryStore(memory_dir(tmp_path))
    await written_the_old_way(old)
    await old.aclose()
    with memory_service_process(tmp_path, args=("--embedder", "none")) as service:
        client = HttpMemoryStore(service.base_url, TOKEN)
        try:
            assert await client.list(OWNED, 50) == []
            (moved,) = await client.list(UA, 50, query=OWNED_WORD)
            assert (moved.origin, moved.origin_conversation) == ("dm", "slack:D1")
        finally:
            await client.aclose()
    assert files_holding(tmp_path, NOBODY_WORD) == []
