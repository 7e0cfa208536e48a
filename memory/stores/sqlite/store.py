"""The embedded durable store: one SQLite database per scope key, FTS5 prefilter, one transaction a batch.

The Python form of the spec's per-scope SQLite Durable Object. Every decision (ranking, dedup,
supersede, eviction) comes from `memory.rules.engine`; the package's modules only persist it, and this
facade puts each operation on the right thread, under the right lock.

Threading: every SQLite statement and every file-system look runs on the store's own small thread pool,
never on the event loop; only the shutdown, which waits for that pool to finish, runs on a thread of its
own. Each scope has a lock held for the whole of an operation (memory/stores/sqlite/connections.py), so
everything on one scope is serialized while different scopes proceed in parallel. A retrieve takes no
write lock (its usage bumps follow in batches, memory.stores.usage_bumps.py). A cancelled caller
does not cancel the work: a batch still commits whole or not at all.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import structlog

from memory.ranking.embedder import Embedder
from memory.ranking.fusion import DEFAULT_RANKING, Ranked, Ranking
from memory.rules.curation import edit_candidate
from memory.rules.engine import validate_cap
from memory.rules.person import PersonRename
from memory.rules.retention import NO_RETENTION, Retention
from memory.stores.contract import CompactingStore
from memory.stores.front import StoreFront
from memory.stores.sqlite import claims, curation_log, erasure, ledger, person, reads, review, versions
from memory.stores.sqlite.connections import ScopeConnections, StatementHook
from memory.stores.sqlite.erasure import scrub_files
from memory.stores.sqlite.index import OpenScopes, SyncedIndex
from memory.stores.sqlite.retrieve import Retriever
from memory.stores.sqlite.schema import ScopeFiles, database_filename, scope_keys_in
from memory.stores.sqlite.sql import fts_match_query, placeholders, transaction
from memory.stores.sqlite.writes import foreign_vectors, reindex_batch, write_batch
from memory.stores.usage_bumps import FlushTimers
from memory.stores.writing import Approval
from memory.types import (
    DEFAULT_SCOPE_CAP,
    AuditQuery,
    CurationEntry,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    MemoryStoreError,
    OriginLabel,
    ReadAudit,
    RecordVersion,
    SourceLink,
    WriteResult,
)

__all__ = ["SqliteMemoryStore", "database_filename", "fts_match_query"]

log = structlog.get_logger("memory")

Clock = Callable[[], float]
T = TypeVar("T")

DEFAULT_MAX_OPEN = 64
# Worker threads: SQLite releases the GIL while it runs, so reads of different scopes overlap.
DEFAULT_WORKERS = 2


class SqliteMemoryStore(StoreFront):
    """The embedded default store: memory that survives restarts with zero set-up; curating too
    (its storage below, under memory/stores/front.py)."""

    _cap: int

    def __init__(
        self,
        data_dir: str | Path,
        cap: int = DEFAULT_SCOPE_CAP,
        clock: Clock = time.time,
        *,
        ranking: Ranking = DEFAULT_RANKING,
        embedder: Embedder | None = None,
        max_open: int = DEFAULT_MAX_OPEN,
        workers: int = DEFAULT_WORKERS,
        on_statement: StatementHook | None = None,
        retention: Retention = NO_RETENTION,
    ) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, got {max_open!r}")
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers!r}")
        self._data_dir = Path(data_dir)
        self._cap = validate_cap(cap)
        self._clock = clock
        self._ranking = ranking
        self._embedder = embedder
        self._retention = retention
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sqlite-memory")
        self._closed = False
        # Each open scope's index (memory/ranking/scope_index.py) and pending usage bumps.
        self._scopes = OpenScopes(embedder)
        self._indexes: dict[str, SyncedIndex] = self._scopes.indexes
        self._connections = ScopeConnections(self._data_dir, max_open, self._scopes, on_statement)
        self._retriever = Retriever(self._scopes, self._connections, ranking, embedder, clock, retention)
        self._flushes = FlushTimers(self._flush)
        self._ledger = ledger.Ledger(self._data_dir)
        self._backend = SqliteBackend(self)

    @property
    def data_dir(self) -> Path:
        return self._data_dir

    @property
    def cap(self) -> int:
        return self._cap

    @property
    def ranking(self) -> Ranking:
        return self._ranking

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    def database_path(self, scope_key: str) -> Path:
        return self._connections.path(scope_key)

    def open_scope_count(self) -> int:
        """How many scope databases are open right now (at most `max_open` once the pool is idle)."""
        return self._connections.open_count()

    def compaction(self) -> CompactingStore | None:
        """None: every erasure rewrites the scope's file and checkpoints its WAL already."""
        return None

    async def aclose(self) -> None:
        """Finish in-flight work, then close every connection."""
        if self._closed:
            return
        self._closed = True
        self._flushes.close()
        # Not on the pool: the shutdown waits for the pool's threads to finish.
        await asyncio.to_thread(self._shutdown)  # writes every pending bump before closing

    async def open(self) -> None:
        """Nothing to verify (build_memory_store already proved the directory writable); a person's
        scope move a crash left half done is finished (memory/stores/sqlite/person.py)."""
        await self._on_pool(functools.partial(person.settle_moves, self._data_dir), "sqlite memory store")

    # -- on the store's pool -------------------------------------------------------------------------

    async def _on_pool(self, job: Callable[[], T], failure: str) -> T:
        """`job` on one of the store's worker threads; a SQLite error becomes a `MemoryStoreError`
        that starts with `failure`."""
        if self._closed:
            raise MemoryStoreError("the sqlite memory store is closed")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, job)
        except sqlite3.Error as error:
            raise MemoryStoreError(f"{failure}: {error}") from error

    async def _run(
        self,
        scope_key: str,
        work: Callable[[sqlite3.Connection], T],
        missing: T,
        *,
        create: bool = False,
        flush: bool = True,
    ) -> T:
        """Run `work` on a worker thread holding the scope's lock; `missing` when a read finds no
        database (reads never create files). The scope's pending bumps are written first unless
        `flush` is False (a retrieve lays them over what it reads instead)."""
        job = functools.partial(self._connections.run, scope_key, work, missing, create, flush)
        return await self._on_pool(job, f"sqlite memory store failed for scope {scope_key}")

    async def _flush(self, scope_key: str) -> None:
        """Write the scope's pending bumps (what any operation on the scope does first)."""
        with contextlib.suppress(MemoryStoreError):  # closed meanwhile: the shutdown writes them
            await self._run(scope_key, lambda connection: None, None)

    async def _ledger_exists(self) -> bool:
        return await self._on_pool(self._ledger.exists, "sqlite memory ledger failed")

    async def _run_ledger(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._on_pool(functools.partial(self._ledger.run, work), "sqlite memory ledger failed")

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        self._connections.close_all()
        self._ledger.close()


class SqliteReads:
    """The reads and erasures of one `SqliteMemoryStore` (`ReadBackend`), on its runners. A read
    never creates a scope's database: a scope without one has nothing."""

    _store: SqliteMemoryStore

    async def rank(
        self, scope_key: str, query: str, terms: Sequence[str], limit: int
    ) -> builtins.list[Ranked]:
        """Its usage bumps written in batches (memory/stores/usage_bumps.py), laid over later reads."""
        store = self._store
        cutoff = store._retention.cutoff(scope_key, store._clock())
        read = functools.partial(store._retriever.read, scope_key, query, terms, limit, None, cutoff)
        ranked = await store._on_pool(read, f"sqlite memory store failed for scope {scope_key}")
        store._flushes.soon(scope_key, store._scopes.has_bumps(scope_key))
        return ranked

    async def rank_many(
        self, scope_keys: Sequence[str], query: str, terms: Sequence[str], limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """ONE hop to the store's thread, each scope under its own lock in turn. Each scope is its own
        file, so one that fails is left out with a warning and costs that scope only."""
        store = self._store
        job = functools.partial(store._retriever.read_each, scope_keys, query, terms, limit)
        found = await store._on_pool(job, f"sqlite memory store failed for scopes {', '.join(scope_keys)}")
        for key in found:
            store._flushes.soon(key, store._scopes.has_bumps(key))
        return found

    async def list_records(
        self, scope_key: str, limit: int, query: str | None, cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        """A query filters through the FTS prefilter and the whole-token gate before the limit."""
        if query is not None and fts_match_query(query) is None:
            return []
        return await self._store._run(scope_key, lambda c: reads.list_records(c, limit, query, cutoff), [])

    async def fetch(
        self, scope_key: str, record_ids: Sequence[str], cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        return await self._store._run(scope_key, lambda c: reads.fetch_records(c, record_ids, cutoff), [])

    async def forget(self, scope_key: str, record_id: str) -> bool:
        now = self._store._clock()
        return await self._store._run(scope_key, lambda c: versions.forget(c, record_id, now), False)

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        now = self._store._clock()
        return await self._store._run(scope_key, lambda c: erasure.erase(c, "1 = 1", (), reason, now), 0)

    async def erase_expired(self) -> int:
        """Every scope database in the directory, one at a time."""
        store, total = self._store, 0
        for scope_key in await self.scope_keys():
            cutoff = store._retention.cutoff(scope_key, store._clock())
            if cutoff is not None:
                erase = functools.partial(erasure.erase_expired, cutoff=cutoff, now=store._clock())
                total += await store._run(scope_key, erase, 0)
        return total

    async def link_sources(self, link: SourceLink) -> None:
        await self._store._run_ledger(lambda c: ledger.link_sources(c, link, self._store._clock()))

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        store = self._store
        if not await store._ledger_exists():
            return 0
        total = 0
        for scope_key, run_ids in (
            await store._run_ledger(lambda c: ledger.linked_runs(c, messages))
        ).items():
            where = f"source_run_id IN ({placeholders(len(run_ids))})"
            erase = functools.partial(
                erasure.erase, where=where, params=run_ids, reason=reason, now=store._clock()
            )
            total += await store._run(scope_key, erase, 0)
        return total

    async def pseudonymize(self, rename: PersonRename) -> int:
        """The person's own scope moves to the pseudonym (memory/stores/sqlite/person.py), then every
        scope's curation log and the ledger's read audit rename them (memory/rules/person.py). The
        ledger notes the pseudonym until the end: a run again after a failure takes the same one."""
        store = self._store
        rename = await store._run_ledger(lambda c: ledger.begin_erasure(c, rename))
        renamed = await store._on_pool(functools.partial(self._move_scope, rename), "sqlite memory store")
        rename_actor = functools.partial(
            curation_log.rename_actor, person_key=rename.person_key, pseudonym_key=rename.pseudonym_key
        )
        for scope_key in await self.scope_keys():
            renamed += await store._run(scope_key, rename_actor, 0)
        renamed += await store._run_ledger(lambda c: ledger.rename_person(c, rename))
        await store._run_ledger(lambda c: ledger.end_erasure(c, rename.person_key))
        return renamed

    def _move_scope(self, rename: PersonRename) -> int:
        """On a worker thread: the moves a crash left first, then the person's scope file's."""
        store = self._store
        person.settle_moves(store._data_dir)
        path = store._connections.path(rename.person_key)

        def move(connection: sqlite3.Connection) -> int:
            person.mark_move(path)
            return person.move_rows(connection, rename, store._clock())

        moved = store._connections.retire(rename.person_key, move, 0)
        person.finish_move(path, person.marker_of(path))
        return moved

    async def record_read(self, entry: ReadAudit, cutoff: float) -> None:
        await self._store._run_ledger(lambda c: ledger.record_read(c, entry, cutoff))

    async def read_audit(self, query: AuditQuery, cutoff: float) -> builtins.list[ReadAudit]:
        if not await self._store._ledger_exists():
            return []
        return await self._store._run_ledger(lambda c: ledger.read_audit(c, query, cutoff))

    async def claim(self, key: str, ttl_seconds: float) -> bool:
        """Once per key across every process over this data directory (the ledger's table)."""
        now = self._store._clock()
        return await self._store._run_ledger(lambda c: claims.claim(c, key, ttl_seconds, now))

    async def scope_keys(self) -> builtins.list[str]:
        """Every scope that has a database under the data directory; each file that cannot be read is
        one `memory.store.unreadable_scope` warning naming it (`unreadable_scopes` lists them)."""
        found = await self._scope_files()
        for name, reason in found.unreadable:
            log.warning("memory.store.unreadable_scope", store="sqlite", file=name, error=reason)
        return found.keys

    async def unreadable_scopes(self) -> builtins.list[str]:
        return [name for name, _ in (await self._scope_files()).unreadable]

    async def _scope_files(self) -> ScopeFiles:
        store = self._store
        return await store._on_pool(functools.partial(scope_keys_in, store._data_dir), "sqlite memory store")

    async def reindex_batch(self, scope_key: str, embedder: Embedder, batch: int) -> tuple[int, int]:
        return await self._store._run(scope_key, lambda c: reindex_batch(c, embedder, batch), (0, 0))

    async def foreign_vectors(self, model: str) -> int:
        """Over every scope database (start-up)."""
        total = 0
        for scope_key in await self.scope_keys():
            total += await self._store._run(scope_key, lambda c: foreign_vectors(c, model), 0)
        return total


class SqliteBackend(SqliteReads):
    """The writes and curation calls of one `SqliteMemoryStore` (`StoreBackend`), on its runners."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    def _log_cutoff(self) -> float:
        """The curation log keeps its entries as long as the read audit keeps its rows."""
        return self._store._retention.audit_cutoff(self._store._clock())

    def _since(self, scope_key: str) -> float | None:
        return self._store._retention.cutoff(scope_key, self._store._clock())

    async def write(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        store, cutoff = self._store, self._since(scope_key)

        def work(connection: sqlite3.Connection) -> WriteResult:
            result, expired = write_batch(
                connection, scope_key, batch, cap, store._embedder, store._clock, cutoff, self._log_cutoff()
            )
            if result.deduped:
                store._scopes.usage_changed(scope_key)
            if expired:
                erasure.scrub_files(connection)
                log.info("memory.store.expired", scope_key=scope_key, erased=expired)
            return result

        return await store._run(scope_key, work, WriteResult(), create=True)

    async def write_pending(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        store, cutoff = self._store, self._since(scope_key)

        def work(connection: sqlite3.Connection) -> WriteResult:
            result, erased = review.write_pending(
                connection, scope_key, batch, cap, store._clock, cutoff, self._log_cutoff()
            )
            if result.deduped:
                store._scopes.usage_changed(scope_key)
            if erased:
                scrub_files(connection)
            return result

        return await store._run(scope_key, work, WriteResult(), create=True)

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        read = functools.partial(
            reads.status_records,
            status="pending",
            cutoff=self._since(scope_key),
            newest_first=True,
            limit=limit,
        )
        return await self._store._run(scope_key, read, [])

    async def approve(self, scope_key: str, record_id: str, actor: str, cap: int) -> Approval | None:
        store = self._store

        def work(connection: sqlite3.Connection) -> Approval | None:
            approval = review.approve(
                connection,
                scope_key,
                record_id,
                actor,
                cap,
                store._embedder,
                store._clock,
                self._log_cutoff(),
            )
            if approval is not None and approval.folded:
                store._scopes.usage_changed(scope_key)
            return approval

        return await store._run(scope_key, work, None)

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        now = self._store._clock()
        reject = functools.partial(
            review.reject, record_id=record_id, actor=actor, now=now, log_cutoff=self._log_cutoff()
        )
        return await self._store._run(scope_key, reject, False)

    async def expire_pending(self, older_than: float, actor: str) -> int:
        """Every scope database in the directory, one at a time."""
        total = 0
        for scope_key in await self._store.scope_keys():
            now = self._store._clock()
            expire = functools.partial(
                review.expire, older_than=older_than, actor=actor, now=now, log_cutoff=self._log_cutoff()
            )
            expired = await self._store._run(scope_key, expire, 0)
            if expired:
                log.info("memory.pending_expired", scope_key=scope_key, expired=expired)
            total += expired
        return total

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, typed_in: OriginLabel
    ) -> MemoryRecord | None:
        store, since = self._store, self._since(scope_key)

        def work(connection: sqlite3.Connection) -> MemoryRecord | None:
            old = versions.find(connection, record_id, "active", "pending", since=since)
            if old is None:
                return None
            candidate = edit_candidate(old, text, typed_in)  # validated and redacted on the store's thread
            now = store._clock()
            return versions.edit(
                connection, record_id, candidate, store._embedder, now, actor, self._log_cutoff(), since
            )

        return await store._run(scope_key, work, None)

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        return await self._store._run(
            scope_key, lambda c: versions.history(c, record_id, self._log_cutoff()), []
        )

    async def append_entry(self, entry: CurationEntry) -> None:
        def work(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                curation_log.append(connection, [entry], self._log_cutoff())

        await self._store._run(entry.scope_key, work, None, create=True)

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        cutoff = self._log_cutoff()
        return await self._store._run(
            scope_key, lambda c: curation_log.naming(c, record_id, limit, cutoff), []
        )

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        read = functools.partial(
            reads.status_records, status="active", cutoff=self._since(scope_key), newest_first=False
        )
        return await self._store._run(scope_key, read, [])

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        store = self._store

        def work(connection: sqlite3.Connection) -> int:
            now = store._clock()
            merged = versions.merge(
                connection, scope_key, survivor_id, duplicate_ids, now, actor, self._log_cutoff()
            )
            if merged:
                store._scopes.usage_changed(scope_key)
            return merged

        return await store._run(scope_key, work, 0)
