"""The embedded durable store: one SQLite database per scope key, FTS5 prefilter, one transaction a batch.

The Python form of the spec's per-scope SQLite Durable Object (§15, §17, §18, §26–§28). Every decision
(ranking, dedup, supersede, eviction) comes from `memory.engine`; this module only persists it.

Threading: all SQLite work runs on the store's own small thread pool, never on the event loop. Each
scope has a lock held for the whole of an operation, so everything on one scope is serialized (the
Durable Object's single writer) while different scopes proceed in parallel; other processes over the
same directory are serialized by SQLite's own write lock (`BEGIN IMMEDIATE`, busy timeout 5 s); a
retrieve takes no write lock (its usage bumps follow in batches, memory/usage_bumps.py). A
cancelled caller does not cancel the work: a batch still commits whole or not at all.

FTS: the FTS5 table indexes the engine's own tokens (`[a-z0-9]+`, space-joined), never the raw text,
so the prefilter and the engine agree on what a token is — a non-ASCII record is found by exactly the
ASCII tokens the engine sees in it. Its rowid is the record's `seq`.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import hashlib
import json
import re
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, get_args

import structlog

from memory.ranking.embedder import Embedder, Matrix
from memory.ranking.fusion import DEFAULT_RANKING, Ranked, Ranking, prefilter_terms, rank
from memory.ranking.lexical import query_stems, record_stems, stems_of
from memory.ranking.scope_index import ScopeIndex
from memory.ranking.vectors import REINDEX_BATCH, Progress, from_blob, to_blob
from memory.rules.engine import (
    ERASE_KEEPS,
    candidate_cap,
    match_tokens,
    matches_filter,
    mint_record,
    normalize_text,
    parse_record_id,
    plan_eviction,
    plan_write,
    prepare_batch,
    validate_cap,
)
from memory.rules.engine import record_id as make_record_id
from memory.rules.retention import NO_RETENTION, Retention
from memory.rules.scope import validate_scope_key
from memory.rules.scorer import tokenize
from memory.rules.visibility import legacy_origin
from memory.stores.sqlite.usage_bumps import FLUSH_SECONDS, PendingBumps
from memory.types import (
    DEFAULT_SCOPE_CAP,
    MAX_LIMIT,
    AuditQuery,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    MemoryStoreError,
    Origin,
    ReadAudit,
    RecordKind,
    RecordStatus,
    SourceLink,
    WriteResult,
)

log = structlog.get_logger("memory")

Clock = Callable[[], float]
# (scope_key, sql) for every statement SQLite runs on a scope's connection: lets tests count real SQL.
StatementHook = Callable[[str, str], None]
T = TypeVar("T")

DEFAULT_MAX_OPEN = 64
DECODED_ROWS = 4096  # rows kept decoded for the spec ranking's retrieves (v2 reads the scope index)
# Worker threads: SQLite releases the GIL while it runs, so reads of different scopes overlap.
DEFAULT_WORKERS = 2
BUSY_TIMEOUT_SECONDS = 5.0
SCHEMA_VERSION = "1"
# Stay far below SQLite's bound-variable limit when an id list is long (eviction after a cap change).
_ID_CHUNK = 500
_PREFIX_LENGTH = 48
_UNSAFE = re.compile(r"[^a-z0-9_-]+")

_STATUSES: dict[str, RecordStatus] = {
    "active": "active",
    "superseded": "superseded",
    "forgotten": "forgotten",
    "evicted": "evicted",
}
_KINDS: dict[str, RecordKind] = {"fact": "fact", "summary": "summary"}
# An unrecognised stored origin reads as `unknown` (shown only to the owner): never wider.
_ORIGINS: dict[str, Origin] = {origin: origin for origin in get_args(Origin)}

# The one migration path: re-applied on every open, idempotent, safe over live data (§15).
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS records (
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
    )""",
    "CREATE INDEX IF NOT EXISTS records_status_norm ON records (status, norm)",
    "CREATE INDEX IF NOT EXISTS records_active_seq ON records (status, seq DESC)",
    "CREATE INDEX IF NOT EXISTS records_active_used ON records (status, last_used_at DESC, created_at DESC)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5(text, keywords, tokenize = 'ascii')",
    # Ranking v2 (issue 15): the engine's stems of text + keywords, exactly the active rows (rowid = seq),
    # and each stem's document frequency among them, kept in the same transaction as every change.
    "CREATE VIRTUAL TABLE IF NOT EXISTS records_stems USING fts5(stems, tokenize = 'ascii')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS records_stems_vocab USING fts5vocab(records_stems, 'row')",
    "CREATE TABLE IF NOT EXISTS term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID",
    # The change counter the in-process scope index follows (`_stamp` moves it on every change to a
    # record other than its usage counts, in whichever process makes it).
    "CREATE TABLE IF NOT EXISTS changes (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO changes (id, generation) VALUES (1, 0)",
)
# Columns added after the first release: (table, column, declaration), each added once if missing.
_COLUMNS_ADDED = (
    ("records", "embedding", "BLOB"),
    ("records", "embedding_model", "TEXT"),
    # Erasure (issue 17): why and when a row's text was scrubbed.
    ("records", "erased_reason", "TEXT"),
    ("records", "erased_at", "REAL"),
    # The change generation that last touched the row (`_stamp`).
    ("records", "changed", "INTEGER NOT NULL DEFAULT 0"),
)

# The term_df row that counts the active records themselves (no stem is empty).
_DOCUMENTS = ""

_COLUMNS = (
    "id, scope_key, kind, text, keywords, source_thread_key, source_run_id, "
    "created_at, last_used_at, use_count, confidence, supersedes, status, origin, origin_conversation"
)
_R_COLUMNS = ", ".join(f"r.{name.strip()}" for name in _COLUMNS.split(","))


def database_filename(scope_key: str) -> str:
    """A safe, collision-free file name for a scope: readable prefix + hash of the exact key.

    The prefix keeps only `[a-z0-9_-]` (no dots, no separators: no traversal); the hash tells apart
    keys that differ only in case or punctuation, even on a case-insensitive filesystem.
    """
    validate_scope_key(scope_key)
    prefix = _UNSAFE.sub("_", scope_key.lower()).strip("_")[:_PREFIX_LENGTH] or "scope"
    digest = hashlib.sha256(scope_key.encode("utf-8")).hexdigest()[:32]
    return f"{prefix}-{digest}.sqlite3"


def fts_match_query(query: str) -> str | None:
    """Quoted tokens OR-joined: user text never reaches the FTS5 parser as syntax. None: no tokens."""
    return fts_match_terms(match_tokens(query))


def fts_match_terms(terms: Sequence[str]) -> str | None:
    """Terms (`[a-z0-9]+` tokens or their stems) quoted and OR-joined; None when there are none."""
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


@dataclass
class _SyncedIndex:
    """A scope's index and the state of the database it reflects (touched only under the scope lock)."""

    index: ScopeIndex
    generation: int
    data_version: int = -1
    total_changes: int = -1
    usage_stale: bool = False  # a write of this process changed usage counts (a dedup)

    def current(self, data_version: int, total_changes: int) -> bool:
        return not self.usage_stale and (data_version, total_changes) == (
            self.data_version,
            self.total_changes,
        )


class SqliteMemoryStore:
    """The embedded default store: memory that survives restarts with zero set-up."""

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
        # Each open scope's active records as arrays (memory/scope_index.py), touched only under that
        # scope's lock and kept in step with the database by `_synced_index`.
        self._indexes: dict[str, _SyncedIndex] = {}
        self._max_open = max_open
        self._on_statement = on_statement
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sqlite-memory")
        # The LRU of open connections and the per-scope locks, shared by the worker threads. A scope's
        # connection is only touched while holding its scope lock; `_lock` guards the two maps.
        self._lock = threading.Lock()
        self._connections: OrderedDict[str, sqlite3.Connection] = OrderedDict()
        self._scope_locks: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
        self._closed = False
        # Usage bumps not yet written (memory/usage_bumps.py); a scope's entry is touched only under
        # its scope lock. The timers and tasks that write them live on the event loop.
        self._bumps: dict[str, PendingBumps] = {}
        self._flush_timers: dict[str, asyncio.TimerHandle] = {}
        self._flushes: set[asyncio.Task[None]] = set()
        # A retrieve reads the same candidate rows again and again: an unchanged row (every column
        # equal, so a bump or a forget is a different key) decodes to the same record.
        self._decode = functools.lru_cache(maxsize=DECODED_ROWS)(_record)
        self._retention = retention
        # The ledger (read audit + run sources) is one more database in the directory, not a scope.
        self._ledger_lock = threading.Lock()
        self._ledger: sqlite3.Connection | None = None

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
        return self._data_dir / database_filename(scope_key)

    def open_scope_count(self) -> int:
        """How many scope databases are open right now (at most `max_open` once the pool is idle)."""
        with self._lock:
            return len(self._connections)

    # -- the MemoryStore protocol -------------------------------------------------------------------

    async def retrieve(self, scope_key: str, query: str, limit: int) -> builtins.list[MemoryRecord]:
        """At most MAX_LIMIT (50) records, like the memory service. A read: its usage bumps are
        written in batches (memory/usage_bumps.py) and laid over later reads until then."""
        validate_scope_key(scope_key)
        limit = min(limit, MAX_LIMIT)
        terms = prefilter_terms(self._ranking, query)
        if limit <= 0 or not terms:
            return []
        nothing: builtins.list[Ranked] = []
        cutoff = self._retention.cutoff(scope_key, self._clock())
        ranked = await self._run(
            scope_key,
            lambda c: self._retrieve(c, scope_key, query, terms, limit, cutoff=cutoff),
            nothing,
            flush=False,
        )
        self._flush_soon(scope_key)
        return [item.record for item in ranked]

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """Several scopes in ONE hop to the store's thread, each under its own lock in turn and ranked as
        its own retrieve ranks it; the query is embedded once; bumps are batched as `retrieve` batches."""
        keys = builtins.list(dict.fromkeys(scope_keys))
        for key in keys:
            validate_scope_key(key)
        limit = min(limit, MAX_LIMIT)
        terms = prefilter_terms(self._ranking, query)
        if limit <= 0 or not terms or not keys:
            return {}
        if self._closed:
            raise MemoryStoreError("the sqlite memory store is closed")
        loop = asyncio.get_running_loop()
        job = functools.partial(self._retrieve_each, keys, query, terms, limit)
        try:
            found = await loop.run_in_executor(self._executor, job)
        except sqlite3.Error as error:
            raise MemoryStoreError(
                f"sqlite memory store failed for scopes {', '.join(keys)}: {error}"
            ) from error
        for key in found:
            self._flush_soon(key)
        return found

    def _retrieve_each(
        self, keys: Sequence[str], query: str, terms: Sequence[str], limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        found: dict[str, builtins.list[Ranked]] = {}
        nothing: builtins.list[Ranked] = []
        embed = self._embedder is not None and self._ranking.stemmed
        query_vector = self._embedder.embed_query(query) if embed and self._embedder is not None else None
        for key in keys:
            work = functools.partial(self._retrieve_in, key, query, terms, limit, query_vector)
            try:
                ranked = self._in_scope(key, work, nothing, False, False)
            except sqlite3.Error as error:  # one scope's database failing costs that scope only
                log.warning("memory.retrieve_failed", scope_key=key, error=type(error).__name__)
                continue
            if ranked:
                found[key] = ranked
        return found

    def _retrieve_in(
        self,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        limit: int,
        query_vector: Matrix | None,
        connection: sqlite3.Connection,
    ) -> builtins.list[Ranked]:
        cutoff = self._retention.cutoff(scope_key, self._clock())
        return self._retrieve(connection, scope_key, query, terms, limit, query_vector, cutoff)

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        """Apply one batch in one transaction. `cap` overrides the store's cap for this batch."""
        validate_scope_key(scope_key)
        batch_cap = self._cap if cap is None else validate_cap(cap)
        batch = await self._prepare(candidates)
        if not batch:
            return WriteResult()
        cutoff = self._retention.cutoff(scope_key, self._clock())

        def work(connection: sqlite3.Connection) -> WriteResult:
            result, expired = self._write(connection, scope_key, batch, batch_cap, cutoff)
            synced = self._indexes.get(scope_key)
            if synced is not None and result.deduped:  # a dedup bumps a use count: no stamp marks it
                synced.usage_stale = True
            if expired:
                _scrub_files(connection)
                log.info("memory.store.expired", scope_key=scope_key, erased=expired)
            return result

        result = await self._run(scope_key, work, WriteResult(), create=True)
        if result.evicted:
            log.info(
                "memory.store.evicted", scope_key=scope_key, candidates=len(batch), evicted=result.evicted
            )
        return result

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> builtins.list[MemoryRecord]:
        """Newest first, at most MAX_LIMIT (50); a query filters through the FTS prefilter and the
        whole-token gate before the limit. Never bumps usage."""
        validate_scope_key(scope_key)
        limit = min(limit, MAX_LIMIT)
        if limit <= 0 or (query is not None and fts_match_query(query) is None):
            return []
        cutoff = self._retention.cutoff(scope_key, self._clock())
        return await self._run(scope_key, lambda c: _list(c, limit, query, cutoff), [])

    async def forget(self, scope_key: str, record_id: str) -> bool:
        validate_scope_key(scope_key)
        parsed = parse_record_id(record_id) if isinstance(record_id, str) else None
        if parsed is None or parsed[0] != scope_key:
            return False  # not an id of this scope: its database cannot hold it
        now = self._clock()
        forgotten = await self._run(scope_key, lambda c: _forget(c, record_id, now), False)
        log.info("memory.store.forget", scope_key=scope_key, id=record_id, forgotten=forgotten)
        return forgotten

    async def scope_keys(self) -> builtins.list[str]:
        """Every scope that has a database under the data directory (for `switchboard memory reindex`)."""
        return await asyncio.to_thread(_scope_keys_in, self._data_dir)

    async def reindex(
        self, scope_key: str, *, batch: int = REINDEX_BATCH, progress: Progress | None = None
    ) -> int:
        """Vectors for the scope's active records that have none of this embedder's, a batch per
        transaction: safe to interrupt and to run again (it resumes where it stopped). Returns how many."""
        validate_scope_key(scope_key)
        if self._embedder is None:
            return 0
        done = 0
        while True:
            made, left = await self._run(scope_key, lambda c: self._reindex_batch(c, batch), (0, 0))
            done += made
            if progress is not None:
                progress(scope_key, done, done + left)
            if made == 0 or left == 0:
                return done

    def _reindex_batch(self, connection: sqlite3.Connection, batch: int) -> tuple[int, int]:
        embedder = self._embedder
        assert embedder is not None
        missing = "status = 'active' AND (embedding IS NULL OR embedding_model IS NOT ?)"
        rows = connection.execute(
            f"SELECT seq, text FROM records WHERE {missing} ORDER BY seq LIMIT ?", (embedder.name, batch)
        ).fetchall()
        if rows:
            vectors = embedder.embed([str(text) for _, text in rows])
            with _transaction(connection):
                for (seq, _), vector in zip(rows, vectors, strict=True):
                    _store_vector(connection, int(seq), vector, embedder.name)
        left = int(
            connection.execute(f"SELECT COUNT(*) FROM records WHERE {missing}", (embedder.name,)).fetchone()[
                0
            ]
        )
        return len(rows), left

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        validate_scope_key(scope_key)
        now = self._clock()
        erased = await self._run(scope_key, lambda c: _erase(c, "1 = 1", (), reason, now), 0)
        log.info("memory.store.erased", scope_key=scope_key, reason=reason, erased=erased)
        return erased

    async def erase_expired(self) -> int:
        """Every scope database in the directory, one at a time (start-up; no sweeper runs later)."""
        if not self._retention.expires:
            return 0
        total = 0
        for scope_key in await self.scope_keys():
            cutoff = self._retention.cutoff(scope_key, self._clock())
            if cutoff is None:
                continue
            now = self._clock()
            total += await self._run(scope_key, functools.partial(_erase_expired, cutoff=cutoff, now=now), 0)
        if total:
            log.info("memory.store.expired", erased=total)
        return total

    async def link_sources(self, link: SourceLink) -> None:
        if not link.messages or not link.scope_keys:
            return
        for key in link.scope_keys:
            validate_scope_key(key)
        await self._run_ledger(lambda c: _link_sources(c, link, self._clock()))

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        wanted = builtins.list(dict.fromkeys(messages))
        if not wanted:
            return 0
        if not await asyncio.to_thread(self._ledger_path().exists):
            return 0
        runs = await self._run_ledger(lambda c: _linked_runs(c, wanted))
        total = 0
        for scope_key, run_ids in runs.items():
            where = f"source_run_id IN ({_placeholders(len(run_ids))})"
            erase = functools.partial(_erase, where=where, params=run_ids, reason=reason, now=self._clock())
            total += await self._run(scope_key, erase, 0)
        log.info("memory.store.sources_erased", messages=len(wanted), reason=reason, erased=total)
        return total

    async def fetch(self, scope_key: str, record_ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        ids = builtins.list(dict.fromkeys(record_ids))[:MAX_LIMIT]
        if not ids:
            return []
        return await self._run(scope_key, lambda c: _fetch(c, ids), [])

    async def record_read(self, entry: ReadAudit) -> None:
        cutoff = self._retention.audit_cutoff(self._clock())
        await self._run_ledger(lambda c: _record_read(c, entry, cutoff))

    async def read_audit(self, query: AuditQuery) -> builtins.list[ReadAudit]:
        if not await asyncio.to_thread(self._ledger_path().exists):
            return []
        cutoff = self._retention.audit_cutoff(self._clock())
        return await self._run_ledger(lambda c: _read_audit(c, query, cutoff))

    async def aclose(self) -> None:
        """Finish in-flight work, then close every connection."""
        if self._closed:
            return
        self._closed = True
        for timer in self._flush_timers.values():
            timer.cancel()
        self._flush_timers.clear()
        await asyncio.to_thread(self._shutdown)  # writes every pending bump before closing

    # -- off the event loop --------------------------------------------------------------------------

    async def _prepare(self, candidates: Sequence[MemoryCandidate]) -> builtins.list[MemoryCandidate]:
        """`prepare_batch` (validation, redaction: CPU work on untrusted text) on the store's pool."""
        if self._closed:
            raise MemoryStoreError("the sqlite memory store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, prepare_batch, candidates)

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
        if self._closed:
            raise MemoryStoreError("the sqlite memory store is closed")
        loop = asyncio.get_running_loop()
        job = functools.partial(self._in_scope, scope_key, work, missing, create, flush)
        try:
            return await loop.run_in_executor(self._executor, job)
        except sqlite3.Error as error:
            raise MemoryStoreError(f"sqlite memory store failed for scope {scope_key}: {error}") from error

    def _in_scope(
        self, scope_key: str, work: Callable[[sqlite3.Connection], T], missing: T, create: bool, flush: bool
    ) -> T:
        with self._scope_lock(scope_key):
            connection = self._checkout(scope_key, create)
            if connection is None:
                return missing
            if flush:
                self._write_bumps(connection, scope_key)
            result = work(connection)
            if flush and scope_key in self._indexes:
                # What this operation changed reaches the index now: an erased record's text does not
                # wait in memory for the scope's next read.
                self._synced_index(connection, scope_key)
            return result

    # -- usage bumps, written in batches (memory/usage_bumps.py) -------------------------------------

    def _flush_soon(self, scope_key: str) -> None:
        """Make sure the scope's pending bumps are written within FLUSH_SECONDS (event loop side)."""
        if scope_key not in self._bumps or scope_key in self._flush_timers or self._closed:
            return
        loop = asyncio.get_running_loop()
        self._flush_timers[scope_key] = loop.call_later(FLUSH_SECONDS, self._start_flush, scope_key)

    def _start_flush(self, scope_key: str) -> None:
        self._flush_timers.pop(scope_key, None)
        if self._closed:
            return
        task = asyncio.get_running_loop().create_task(self._flush(scope_key))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self, scope_key: str) -> None:
        with contextlib.suppress(MemoryStoreError):  # closed meanwhile: the shutdown writes them
            await self._run(scope_key, lambda connection: None, None)

    def _bump_later(self, scope_key: str, records: Sequence[MemoryRecord], used_at: float) -> None:
        """Record a retrieve's bumps; the caller holds the scope lock."""
        now = time.monotonic()
        pending = self._bumps.setdefault(scope_key, PendingBumps(since=now))
        pending.add([record.id for record in records], used_at)

    def _write_bumps(self, connection: sqlite3.Connection, scope_key: str) -> None:
        """The scope's pending bumps in one transaction; the caller holds the scope lock."""
        pending = self._bumps.pop(scope_key, None)
        if pending is None:
            return
        synced = self._indexes.get(scope_key)
        in_step = synced is not None and synced.total_changes == connection.total_changes
        try:
            with _transaction(connection):
                connection.executemany(
                    "UPDATE records SET last_used_at = ?, use_count = use_count + ? WHERE id = ?",
                    pending.rows(),
                )
            if synced is not None and in_step:  # the index held these bumps already
                synced.total_changes = connection.total_changes
        except sqlite3.Error as error:  # usage counts only: the records themselves are untouched
            if synced is not None:
                synced.usage_stale = True
            log.warning(
                "memory.store.bumps_lost",
                scope_key=scope_key,
                records=len(pending.uses),
                error=type(error).__name__,
            )

    def _scope_lock(self, scope_key: str) -> threading.Lock:
        with self._lock:
            return self._scope_lock_locked(scope_key)

    def _scope_lock_locked(self, scope_key: str) -> threading.Lock:
        lock = self._scope_locks.get(scope_key)
        if lock is None:
            lock = threading.Lock()
            self._scope_locks[scope_key] = lock
        return lock

    def _checkout(self, scope_key: str, create: bool) -> sqlite3.Connection | None:
        """The scope's connection, opened on first use; the caller holds the scope lock."""
        with self._lock:
            connection = self._connections.get(scope_key)
            if connection is not None:
                self._connections.move_to_end(scope_key)
                return connection
        path = self.database_path(scope_key)
        if not create and not path.exists():
            return None
        self._data_dir.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            _prepare(connection, scope_key)
        except BaseException:
            connection.close()
            raise
        if self._on_statement is not None:
            hook = self._on_statement
            connection.set_trace_callback(lambda sql: hook(scope_key, sql))
        with self._lock:
            self._connections[scope_key] = connection
            surplus = self._take_surplus_locked(scope_key)
        for key, lock, oldest in surplus:
            self._write_bumps(oldest, key)
            oldest.close()
            lock.release()
        return connection

    def _take_surplus_locked(
        self, keep: str
    ) -> builtins.list[tuple[str, threading.Lock, sqlite3.Connection]]:
        """Least recently used connections beyond `max_open` that no thread is using right now;
        each is returned with its scope lock held, to be closed outside the map lock."""
        surplus: builtins.list[tuple[str, threading.Lock, sqlite3.Connection]] = []
        excess = len(self._connections) - self._max_open
        for key in builtins.list(self._connections):
            if excess <= 0:
                break
            if key == keep:
                continue
            lock = self._scope_lock_locked(key)
            if lock.acquire(blocking=False):  # busy scopes stay open until a later checkout
                surplus.append((key, lock, self._connections.pop(key)))
                self._indexes.pop(key, None)
                excess -= 1
        return surplus

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            connections = builtins.list(self._connections.items())
            self._connections.clear()
            self._indexes.clear()
        for scope_key, connection in connections:
            self._write_bumps(connection, scope_key)
            connection.close()
        with self._ledger_lock:
            if self._ledger is not None:
                self._ledger.close()
                self._ledger = None

    def _ledger_path(self) -> Path:
        return self._data_dir / LEDGER_FILENAME

    async def _run_ledger(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise MemoryStoreError("the sqlite memory store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, functools.partial(self._in_ledger, work))
        except sqlite3.Error as error:
            raise MemoryStoreError(f"sqlite memory ledger failed: {error}") from error

    def _in_ledger(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._ledger_lock:
            if self._ledger is None:
                self._data_dir.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(
                    self._ledger_path(),
                    timeout=BUSY_TIMEOUT_SECONDS,
                    isolation_level=None,
                    check_same_thread=False,
                )
                try:
                    _prepare_ledger(connection)
                except BaseException:
                    connection.close()
                    raise
                self._ledger = connection
            return work(self._ledger)

    def _retrieve(
        self,
        connection: sqlite3.Connection,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        limit: int,
        query_vector: Matrix | None = None,
        cutoff: float | None = None,
    ) -> builtins.list[Ranked]:
        if not self._ranking.stemmed:
            return self._retrieve_spec(connection, scope_key, query, terms, limit, cutoff)
        index = self._synced_index(connection, scope_key)
        embedder = self._embedder
        if embedder is not None and query_vector is None:
            query_vector = embedder.embed_query(query)
        stems = query_stems(query)
        wanted = frozenset(terms)
        now = self._clock()
        chosen = index.select(stems, wanted, query_vector, now, self._ranking, limit, cutoff)
        if embedder is not None and any(c.cosine is None for c in chosen):
            # Vectors made on use (rows older than the embedder): for the prefilter's worth of the best
            # candidates, stored (never into a row erased meanwhile), then the scope caught up and
            # scored again — as `rank` would score them once they all have vectors.
            wide = index.select(stems, wanted, query_vector, now, self._ranking, candidate_cap(limit), cutoff)
            unvectored = [c for c in wide if c.cosine is None]
            vectors = embedder.embed([c.record.text for c in unvectored])
            self._store_vectors(connection, [(c.seq, v) for c, v in zip(unvectored, vectors, strict=True)])
            index = self._synced_index(connection, scope_key)
            chosen = index.select(stems, wanted, query_vector, now, self._ranking, limit, cutoff)
        bumped = self._used(connection, scope_key, [Ranked(c.record, c.relevance) for c in chosen], now)
        for c, item in zip(chosen, bumped, strict=True):  # what the database holds once bumps are written
            index.set_record(c.seq, item.record)
        return bumped

    def _retrieve_spec(
        self,
        connection: sqlite3.Connection,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        limit: int,
        cutoff: float | None,
    ) -> builtins.list[Ranked]:
        """The seed's read (`memory.ranking = "spec"`): the FTS5 bm25 prefilter, then the spec scorer."""
        match = fts_match_terms(terms)
        if match is None:
            return []
        with _snapshot(connection):  # a read: the usage bump is written later (memory/usage_bumps.py)
            rows = connection.execute(
                f"SELECT r.seq, {_R_COLUMNS} FROM ("
                "  SELECT rowid, bm25(records_fts) AS score FROM records_fts"
                "  WHERE records_fts MATCH ? ORDER BY score LIMIT ?"
                ") AS f JOIN records AS r ON r.seq = f.rowid WHERE r.status = 'active'",
                (match, candidate_cap(limit)),
            ).fetchall()
        # bm25 only chose who reaches the engine; seq order makes ties rank as in every store.
        rows.sort(key=lambda row: int(row[0]))
        now = self._clock()
        records = [self._decode(tuple(row[1:])) for row in rows]
        pending = self._bumps.get(scope_key)
        if pending is not None:  # what an immediate bump would have left in the rows
            records = [pending.overlay(record) for record in records]
        records = _unexpired(records, cutoff)  # expired: never returned, erased on the next write
        return self._used(connection, scope_key, rank(records, query, limit, now, self._ranking), now)

    def _used(
        self, connection: sqlite3.Connection, scope_key: str, ranked: Sequence[Ranked], now: float
    ) -> builtins.list[Ranked]:
        """A read's results as their usage bumps leave them; the bumps themselves are held back and
        written in batches (memory/usage_bumps.py). The caller holds the scope lock."""
        if not ranked:
            return []
        self._bump_later(scope_key, [item.record for item in ranked], now)
        if self._bumps[scope_key].due(time.monotonic()):
            self._write_bumps(connection, scope_key)
        return [
            Ranked(replace(r.record, last_used_at=now, use_count=r.record.use_count + 1), r.relevance)
            for r in ranked
        ]

    # -- the scope index, in step with the database ---------------------------------------------------

    def _synced_index(self, connection: sqlite3.Connection, scope_key: str) -> ScopeIndex:
        """The scope's index as of now; the caller holds the scope lock.

        Unchanged since the last look (no commit by another connection — `PRAGMA data_version` — and
        none by this one — `total_changes`), it is used as it is: no other SQL. Otherwise the records
        changed since its generation are read again (`_stamp` marks each changed row), and after another
        connection's commit the active set itself is reconciled (`_reconcile_active`): a writer that
        stamps nothing — a process of an earlier release during a rolling upgrade — still cannot leave a
        forgotten record in the index.
        """
        synced = self._indexes.get(scope_key)
        data_version = int(connection.execute("PRAGMA data_version").fetchone()[0])
        if synced is not None and synced.current(data_version, connection.total_changes):
            return synced.index
        with _snapshot(connection):
            generation = _change_generation(connection)
            if synced is None:
                synced = _SyncedIndex(self._load_index(connection, scope_key, None, ScopeIndex()), generation)
                self._indexes[scope_key] = synced
            else:
                if generation != synced.generation:
                    self._load_index(connection, scope_key, synced.generation, synced.index)
                if synced.usage_stale or data_version != synced.data_version:
                    self._reconcile_active(connection, scope_key, synced.index)
        synced.generation = generation
        synced.data_version = data_version
        synced.total_changes = connection.total_changes
        synced.usage_stale = False
        return synced.index

    def _load_index(
        self,
        connection: sqlite3.Connection,
        scope_key: str,
        since: int | None,
        index: ScopeIndex,
        *,
        seqs: Sequence[int] = (),
    ) -> ScopeIndex:
        """Every active record into a new index (`since` None), the rows changed after generation
        `since`, or the rows `seqs` names, into an existing one: an active row is (re)indexed, any
        other leaves it."""
        # A full load scans the active rows; a catch-up reads the changed ones by `records_changed`.
        if seqs:
            where, params = f"r.seq IN ({_placeholders(len(seqs))})", tuple(seqs)
        elif since is None:
            where, params = "r.status = 'active'", ()
        else:
            where, params = "r.changed > ?", (since,)
        rows = connection.execute(
            f"SELECT r.seq, {_R_COLUMNS}, r.embedding, r.embedding_model, s.stems FROM records AS r "
            f"LEFT JOIN records_stems AS s ON s.rowid = r.seq WHERE {where}",
            params,
        ).fetchall()
        rows.sort(key=lambda row: int(row[0]))  # slots in seq order, as a full load leaves them
        model = None if self._embedder is None else self._embedder.name
        pending = self._bumps.get(scope_key)
        for row in rows:
            seq = int(row[0])
            record = _record(row[1:16])
            if record.status != "active":
                index.remove(seq)
                continue
            embedding, embedding_model, stems = row[16], row[17], row[18]
            vector = from_blob(embedding) if embedding is not None and embedding_model == model else None
            found = frozenset(str(stems).split()) if stems is not None else record_stems(record)
            if pending is not None:
                record = pending.overlay(record)
            index.add(seq, record, found, vector)
        return index

    def _reconcile_active(self, connection: sqlite3.Connection, scope_key: str, index: ScopeIndex) -> None:
        """The index's records are exactly the database's active rows, with their usage counts as the
        database holds them and this process's pending bumps laid over (another connection bumped,
        forgot, superseded or inserted; or a dedup of this one bumped)."""
        pending = self._bumps.get(scope_key)
        rows = connection.execute(
            "SELECT seq, last_used_at, use_count FROM records WHERE status = 'active'"
        ).fetchall()
        active: set[int] = set()
        missing: builtins.list[int] = []
        for seq, last_used_at, use_count in rows:
            active.add(int(seq))
            record = index.record(int(seq))
            if record is None:
                missing.append(int(seq))
                continue
            fresh = replace(
                record,
                last_used_at=None if last_used_at is None else float(last_used_at),
                use_count=int(use_count),
            )
            if pending is not None:
                fresh = pending.overlay(fresh)
            if fresh != record:
                index.set_record(int(seq), fresh)
        for seq in index.seqs():
            if seq not in active:
                index.remove(seq)
        for chunk in _chunks(missing):
            self._load_index(connection, scope_key, None, index, seqs=chunk)

    def _store_vectors(self, connection: sqlite3.Connection, fresh: Sequence[tuple[int, Matrix]]) -> None:
        embedder = self._embedder
        assert embedder is not None
        with _transaction(connection):
            for seq, vector in fresh:
                _store_vector(connection, seq, vector, embedder.name)

    def _embed_batch(self, batch: Sequence[MemoryCandidate]) -> Matrix | None:
        return None if self._embedder is None else self._embedder.embed([c.text for c in batch])

    def _write(
        self,
        connection: sqlite3.Connection,
        scope_key: str,
        batch: Sequence[MemoryCandidate],
        cap: int,
        expired_before: float | None = None,
    ) -> tuple[WriteResult, int]:
        inserted = deduped = superseded = expired = 0
        vectors = self._embed_batch(batch)  # before the transaction: the write lock is not held for it
        with _transaction(connection):
            now = self._clock()
            if expired_before is not None:  # the scope is being written: its expired records go now
                expired = _erase_rows(connection, "created_at < ?", (expired_before,), "expired", now)
            seq = int(connection.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0])
            for index, candidate in enumerate(batch):
                plan = plan_write(scope_key, candidate, _write_pool(connection, candidate))
                if plan.action == "dedup":
                    connection.execute(
                        "UPDATE records SET use_count = use_count + 1 WHERE id = ?", (plan.dedup_id,)
                    )
                    deduped += 1
                    continue
                if plan.supersede_id is not None:
                    flipped = connection.execute(
                        "UPDATE records SET status = 'superseded' WHERE id = ? AND status = 'active' "
                        "RETURNING seq",
                        (plan.supersede_id,),
                    ).fetchall()
                    _delete_fts(connection, [int(row[0]) for row in flipped])
                    superseded += len(flipped)
                seq += 1
                _insert(connection, seq, mint_record(scope_key, seq, candidate, now, plan.supersede_id))
                if vectors is not None and self._embedder is not None:
                    _store_vector(connection, seq, vectors[index], self._embedder.name)
                inserted += 1
            evicted = _evict_over_cap(connection, scope_key, cap)
        result = WriteResult(inserted=inserted, deduped=deduped, superseded=superseded, evicted=evicted)
        return result, expired


# -- SQL helpers (worker threads, scope lock held) ---------------------------------------------------


def _scope_keys_in(data_dir: Path) -> builtins.list[str]:
    """The scope key each database file under `data_dir` names (read-only; unreadable files skipped)."""
    keys: builtins.list[str] = []
    for path in sorted(data_dir.glob("*.sqlite3")) if data_dir.is_dir() else []:
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
                row = connection.execute("SELECT value FROM meta WHERE key = 'scope_key'").fetchone()
        except sqlite3.Error:
            continue
        if row is not None:
            keys.append(str(row[0]))
    return keys


def _rows_by_seq(connection: sqlite3.Connection, seqs: Sequence[int]) -> builtins.list[Any]:
    return connection.execute(
        f"SELECT seq, {_COLUMNS} FROM records WHERE status = 'active' "
        f"AND seq IN ({_placeholders(len(seqs))})",
        builtins.list(seqs),
    ).fetchall()


def _store_vector(connection: sqlite3.Connection, seq: int, vector: Matrix, model: str) -> None:
    """Only into a row still active and not erased: the vector was made outside the transaction, and
    another process may have erased the row meanwhile (its vector must not come back)."""
    stored = connection.execute(
        "UPDATE records SET embedding = ?, embedding_model = ? "
        "WHERE seq = ? AND status = 'active' AND erased_at IS NULL RETURNING seq",
        (to_blob(vector), model, seq),
    ).fetchall()
    _stamp(connection, [int(row[0]) for row in stored])


def _change_generation(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT generation FROM changes WHERE id = 1").fetchone()
    return 0 if row is None else int(row[0])


def _stamp(connection: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Inside a transaction: move the change generation on and stamp the rows with it. Every change to
    a record but its usage counts calls this (insert, leaving the active set, a new vector, a relabel),
    so another process's scope index finds what changed (`SqliteMemoryStore._synced_index`)."""
    if not seqs:
        return
    connection.execute("UPDATE changes SET generation = generation + 1 WHERE id = 1")
    for chunk in _chunks(seqs):
        connection.execute(
            "UPDATE records SET changed = (SELECT generation FROM changes WHERE id = 1) "
            f"WHERE seq IN ({_placeholders(len(chunk))})",
            chunk,
        )


def _list(
    connection: sqlite3.Connection, limit: int, query: str | None, cutoff: float | None = None
) -> builtins.list[MemoryRecord]:
    if query is None:
        rows = connection.execute(
            f"SELECT {_COLUMNS} FROM records WHERE status = 'active' AND created_at >= ? "
            "ORDER BY seq DESC LIMIT ?",
            (_NO_CUTOFF if cutoff is None else cutoff, limit),
        ).fetchall()
        return [_record(row) for row in rows]
    match = fts_match_query(query)
    if match is None:
        return []
    cursor = connection.execute(
        f"SELECT {_R_COLUMNS} FROM records_fts AS f JOIN records AS r ON r.seq = f.rowid "
        "WHERE records_fts MATCH ? AND r.status = 'active' ORDER BY r.seq DESC",
        (match,),
    )
    found: builtins.list[MemoryRecord] = []
    for row in cursor:  # the whole-token gate, then the limit
        record = _record(row)
        if matches_filter(record, query) and (cutoff is None or record.created_at >= cutoff):
            found.append(record)
            if len(found) >= limit:
                break
    cursor.close()
    return found


def _forget(connection: sqlite3.Connection, record_id: str, now: float) -> bool:
    """Forgetting erases: the active record's text, keywords and vector leave the row and the index."""
    return _erase(connection, "id = ? AND status = 'active'", (record_id,), "forgotten", now) > 0


def _prepare(connection: sqlite3.Connection, scope_key: str) -> None:
    """WAL, the schema (idempotent), the scope identity check, and FTS reconciliation."""
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    # Freed cells and pages are zeroed, so an erased record leaves nothing in the file (per connection).
    connection.execute("PRAGMA secure_delete = ON")
    _enable_wal(connection)
    # WAL + NORMAL: a commit survives a process crash (SIGKILL); only an OS crash may lose the last ones.
    connection.execute("PRAGMA synchronous = NORMAL")
    with _transaction(connection):
        for statement in _SCHEMA:
            connection.execute(statement)
        for table, column, declaration in _COLUMNS_ADDED:
            ensure_column(connection, table, column, declaration)
        connection.execute("CREATE INDEX IF NOT EXISTS records_changed ON records (changed)")
        _migrate_origin(connection, scope_key)
        row = connection.execute("SELECT value FROM meta WHERE key = 'scope_key'").fetchone()
        if row is None:
            connection.execute(
                "INSERT INTO meta (key, value) VALUES ('scope_key', ?), ('schema_version', ?)",
                (scope_key, SCHEMA_VERSION),
            )
        elif row[0] != scope_key:
            raise MemoryStoreError(f"database file for scope {scope_key} belongs to another scope")
        _reconcile_fts(connection, scope_key)
        _reconcile_stems(connection, scope_key)


def ensure_column(connection: sqlite3.Connection, table: str, column: str, declaration: str) -> bool:
    """The one way a column is added: idempotent, so every open of an older database migrates it.
    True when this call added it (a migration that must label the older rows does it then)."""
    present = {str(row[1]) for row in connection.execute(f"PRAGMA table_info({table})")}
    if column in present:
        return False
    connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    return True


def _migrate_origin(connection: sqlite3.Connection, scope_key: str) -> None:
    """The origin label (issue 14). Rows written before it existed get the conservative label of
    their scope (`legacy_origin`), once, in the transaction that adds the columns."""
    added = ensure_column(connection, "records", "origin", "TEXT NOT NULL DEFAULT 'unknown'")
    ensure_column(connection, "records", "origin_conversation", "TEXT")
    if added:
        origin, conversation = legacy_origin(scope_key)
        labelled = connection.execute(
            "UPDATE records SET origin = ?, origin_conversation = ? RETURNING seq", (origin, conversation)
        ).fetchall()
        _stamp(connection, [int(row[0]) for row in labelled])
        if labelled:
            log.info(
                "memory.store.origin_migrated", scope_key=scope_key, origin=origin, records=len(labelled)
            )


def _enable_wal(connection: sqlite3.Connection) -> None:
    """Switch to WAL (persistent in the file). The switch does not wait on SQLite's busy handler, so
    a database another connection is creating right now is retried until the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
            continue
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"could not switch the database to WAL (got {mode})")
        return


def _reconcile_fts(connection: sqlite3.Connection, scope_key: str) -> None:
    """Make the FTS table hold exactly the active rows: drop dead entries, restore missing ones."""
    dead = connection.execute(
        "DELETE FROM records_fts WHERE rowid NOT IN (SELECT seq FROM records WHERE status = 'active')"
    ).rowcount
    missing = connection.execute(
        "SELECT seq, text, keywords FROM records WHERE status = 'active' "
        "AND seq NOT IN (SELECT rowid FROM records_fts)"
    ).fetchall()
    for seq, text, keywords in missing:
        connection.execute(
            "INSERT INTO records_fts (rowid, text, keywords) VALUES (?, ?, ?)",
            (int(seq), _fts_text(str(text)), _fts_keywords(_load_keywords(str(keywords)))),
        )
    if dead > 0 or missing:
        log.info("memory.store.reconciled", scope_key=scope_key, removed=max(dead, 0), restored=len(missing))


def _reconcile_stems(connection: sqlite3.Connection, scope_key: str) -> None:
    """The stem index holds exactly the active rows, and term_df counts it; a database from before
    ranking v2 gets both here, on its first open."""
    dead = connection.execute(
        "DELETE FROM records_stems WHERE rowid NOT IN (SELECT seq FROM records WHERE status = 'active')"
    ).rowcount
    missing = connection.execute(
        "SELECT seq, text, keywords FROM records WHERE status = 'active' "
        "AND seq NOT IN (SELECT rowid FROM records_stems)"
    ).fetchall()
    for seq, text, keywords in missing:
        connection.execute(
            "INSERT INTO records_stems (rowid, stems) VALUES (?, ?)",
            (int(seq), _stems_text(str(text), _load_keywords(str(keywords)))),
        )
    counted = connection.execute("SELECT df FROM term_df WHERE term = ?", (_DOCUMENTS,)).fetchone()
    active = int(connection.execute("SELECT COUNT(*) FROM records_stems").fetchone()[0])
    if dead > 0 or missing or counted is None or int(counted[0]) != active:
        # fts5vocab counts each stem's rows: the counts table rebuilt from the index in one statement.
        connection.execute("DELETE FROM term_df")
        connection.execute("INSERT INTO term_df (term, df) SELECT term, doc FROM records_stems_vocab")
        connection.execute("INSERT INTO term_df (term, df) VALUES (?, ?)", (_DOCUMENTS, active))
    if dead > 0 or missing:
        log.info("memory.store.stems_reconciled", scope_key=scope_key, removed=dead, restored=len(missing))


def _count_terms(connection: sqlite3.Connection, stems: Iterable[str], delta: int) -> None:
    """Add `delta` to each stem's document frequency (a record's distinct stems, plus the record count)."""
    connection.executemany(
        "INSERT INTO term_df (term, df) VALUES (?, ?) ON CONFLICT (term) DO UPDATE SET df = df + excluded.df",
        [(stem, delta) for stem in (_DOCUMENTS, *stems)],
    )


@contextmanager
def _snapshot(connection: sqlite3.Connection) -> Iterator[None]:
    """A read transaction (BEGIN DEFERRED): several SELECTs see one state, no write lock taken."""
    connection.execute("BEGIN")
    try:
        yield
    finally:
        connection.execute("COMMIT")


@contextmanager
def _transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any error: a batch lands whole or not at all."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _write_pool(connection: sqlite3.Connection, candidate: MemoryCandidate) -> builtins.list[MemoryRecord]:
    """Exactly what plan_write reads (§18): same-norm actives in seq order (an indexed hit on
    records_status_norm) and, when the candidate names one, the active row it supersedes."""
    rows = connection.execute(
        f"SELECT {_COLUMNS} FROM records WHERE status = 'active' AND norm = ? ORDER BY seq",
        (normalize_text(candidate.text),),
    ).fetchall()
    pool = [_record(row) for row in rows]
    if candidate.supersedes:  # the same truthiness test as plan_write: "" names nothing
        target = connection.execute(
            f"SELECT {_COLUMNS} FROM records WHERE id = ? AND status = 'active'", (candidate.supersedes,)
        ).fetchone()
        if target is not None:
            pool.append(_record(target))
    return pool


def _insert(connection: sqlite3.Connection, seq: int, record: MemoryRecord) -> None:
    connection.execute(
        "INSERT INTO records (seq, id, scope_key, kind, text, norm, keywords, source_thread_key, "
        "source_run_id, created_at, last_used_at, use_count, confidence, supersedes, status, origin, "
        "origin_conversation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            seq,
            record.id,
            record.scope_key,
            record.kind,
            record.text,
            normalize_text(record.text),
            json.dumps(builtins.list(record.keywords)),
            record.source_thread_key,
            record.source_run_id,
            record.created_at,
            record.last_used_at,
            record.use_count,
            record.confidence,
            record.supersedes,
            record.status,
            record.origin,
            record.origin_conversation,
        ),
    )
    connection.execute(
        "INSERT INTO records_fts (rowid, text, keywords) VALUES (?, ?, ?)",
        (seq, _fts_text(record.text), _fts_keywords(record.keywords)),
    )
    _stamp(connection, [seq])
    stems = _stems_text(record.text, record.keywords)
    connection.execute("INSERT INTO records_stems (rowid, stems) VALUES (?, ?)", (seq, stems))
    _count_terms(connection, set(stems.split()), 1)


def _evict_over_cap(connection: sqlite3.Connection, scope_key: str, cap: int) -> int:
    """Inside the batch's transaction: the active set is fetched only when the indexed count is over."""
    count = int(connection.execute("SELECT COUNT(*) FROM records WHERE status = 'active'").fetchone()[0])
    if count <= cap:
        return 0
    # plan_eviction reads only status and recency, so the fetch is a covering scan of
    # records_active_used; rows are re-sorted by seq so full ties break as in every store.
    rows = sorted(
        connection.execute(
            "SELECT seq, created_at, last_used_at FROM records WHERE status = 'active'"
        ).fetchall()
    )
    seqs = {make_record_id(scope_key, int(row[0])): int(row[0]) for row in rows}
    active = [
        MemoryRecord(
            id=make_record_id(scope_key, int(seq)),
            scope_key=scope_key,
            kind="fact",
            text="",
            source_thread_key="",
            created_at=float(created_at),
            last_used_at=None if last_used_at is None else float(last_used_at),
        )
        for seq, created_at, last_used_at in rows
    ]
    doomed = plan_eviction(active, cap)
    for chunk in _chunks(doomed):
        connection.execute(
            f"UPDATE records SET status = 'evicted' WHERE id IN ({_placeholders(len(chunk))})", chunk
        )
    _delete_fts(connection, [seqs[record_id] for record_id in doomed])
    return len(doomed)


def _delete_fts(connection: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Every soft delete (supersede, forget, evict) takes the row out of the FTS table (§15), and
    stamps it changed."""
    _stamp(connection, seqs)
    for chunk in _chunks(seqs):
        connection.execute(f"DELETE FROM records_fts WHERE rowid IN ({_placeholders(len(chunk))})", chunk)
        marks = _placeholders(len(chunk))
        gone = connection.execute(
            f"SELECT stems FROM records_stems WHERE rowid IN ({marks})", chunk
        ).fetchall()
        for (stems,) in gone:
            _count_terms(connection, set(str(stems).split()), -1)
        connection.execute(f"DELETE FROM records_stems WHERE rowid IN ({marks})", chunk)


def _chunks(values: Sequence[T]) -> Iterator[builtins.list[T]]:
    for start in range(0, len(values), _ID_CHUNK):
        yield builtins.list(values[start : start + _ID_CHUNK])


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def _fts_text(text: str) -> str:
    return " ".join(tokenize(text))


def _fts_keywords(keywords: Iterable[str]) -> str:
    return " ".join(token for keyword in keywords for token in tokenize(keyword))


def _stems_text(text: str, keywords: Iterable[str]) -> str:
    """What the stem index holds for a record: its distinct stems, space-joined (the engine's own)."""
    return " ".join(sorted(stems_of(text, keywords)))


def _load_keywords(raw: str) -> tuple[str, ...]:
    if raw == "[]":
        return ()
    value = json.loads(raw)
    if not isinstance(value, builtins.list):
        return ()
    return tuple(str(item) for item in value)


def _record(row: Sequence[Any]) -> MemoryRecord:
    (
        record_id,
        scope_key,
        kind,
        text,
        keywords,
        source_thread_key,
        source_run_id,
        created_at,
        last_used_at,
        use_count,
        confidence,
        supersedes,
        status,
        origin,
        origin_conversation,
    ) = row
    return MemoryRecord(
        id=str(record_id),
        scope_key=str(scope_key),
        kind=_KINDS[str(kind)],
        text=str(text),
        keywords=_load_keywords(str(keywords)),
        source_thread_key=str(source_thread_key),
        source_run_id=None if source_run_id is None else str(source_run_id),
        created_at=float(created_at),
        last_used_at=None if last_used_at is None else float(last_used_at),
        use_count=int(use_count),
        confidence=None if confidence is None else float(confidence),
        supersedes=None if supersedes is None else str(supersedes),
        status=_STATUSES[str(status)],
        origin=_ORIGINS.get(str(origin), "unknown"),
        origin_conversation=None if origin_conversation is None else str(origin_conversation),
    )


# -- erasure: the text leaves the row, the FTS index and the file ------------------------------------

LEDGER_FILENAME = "_ledger.sqlite3"  # never a scope's name: those never start with "_"
_NO_CUTOFF = float("-inf")
# What an erased row keeps: identity, scope, origin, provenance, dates, status, reason. Every other
# column — text, norm, keywords, and whatever later columns hold (stems, term counts, a vector) — is
# scrubbed: NULL where the column allows it, else its default, else ''.
_KEPT_COLUMNS = ERASE_KEEPS


def _scrub_assignments(connection: sqlite3.Connection) -> str:
    parts = []
    for _, name, _type, notnull, default, _pk in connection.execute("PRAGMA table_info(records)"):
        if name in _KEPT_COLUMNS:
            continue
        value = "NULL" if not notnull else (str(default) if default is not None else "''")
        parts.append(f"{name} = {value}")
    return ", ".join(parts)


def _erase_rows(
    connection: sqlite3.Connection, where: str, params: Sequence[object], reason: EraseReason, now: float
) -> int:
    """Inside a transaction: scrub every not-yet-erased row matching `where`; an active one becomes
    `forgotten` (invisible to retrieval, list and dedup). Returns how many rows were erased."""
    seqs = [
        int(row[0])
        for row in connection.execute(
            f"SELECT seq FROM records WHERE erased_at IS NULL AND ({where})", tuple(params)
        ).fetchall()
    ]
    if not seqs:
        return 0
    scrub = _scrub_assignments(connection)
    for chunk in _chunks(seqs):
        connection.execute(
            f"UPDATE records SET {scrub}, erased_reason = ?, erased_at = ?, "
            "status = CASE WHEN status = 'active' THEN 'forgotten' ELSE status END "
            f"WHERE seq IN ({_placeholders(len(chunk))})",
            (reason, now, *chunk),
        )
    _delete_fts(connection, seqs)
    # A stem no active record holds any more leaves the document frequencies, and FTS5 keeps a deleted
    # row's terms in its old segments until they merge: merge both indexes now.
    connection.execute("DELETE FROM term_df WHERE df <= 0 AND term != ?", (_DOCUMENTS,))
    connection.execute("INSERT INTO records_fts (records_fts) VALUES ('optimize')")
    connection.execute("INSERT INTO records_stems (records_stems) VALUES ('optimize')")
    return len(seqs)


def _erase(
    connection: sqlite3.Connection, where: str, params: Sequence[object], reason: EraseReason, now: float
) -> int:
    with _transaction(connection):
        erased = _erase_rows(connection, where, params, reason, now)
    if erased:
        _scrub_files(connection)
    return erased


def _erase_expired(connection: sqlite3.Connection, cutoff: float, now: float) -> int:
    return _erase(connection, "created_at < ?", (cutoff,), "expired", now)


def _scrub_files(connection: sqlite3.Connection) -> None:
    """Copy the WAL into the main file and truncate it: the pre-erase page images in the WAL are gone,
    and secure_delete already zeroed the freed space they are copied over."""
    busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:  # another process holds a read snapshot: the next erase or checkpoint finishes the job
        log.warning("memory.store.checkpoint_incomplete")


def _unexpired(records: builtins.list[MemoryRecord], cutoff: float | None) -> builtins.list[MemoryRecord]:
    return records if cutoff is None else [r for r in records if r.created_at >= cutoff]


def _fetch(connection: sqlite3.Connection, ids: Sequence[str]) -> builtins.list[MemoryRecord]:
    rows = connection.execute(
        f"SELECT {_COLUMNS} FROM records WHERE erased_at IS NULL AND id IN ({_placeholders(len(ids))}) "
        "ORDER BY seq",
        tuple(ids),
    ).fetchall()
    return [_record(row) for row in rows]


# -- the ledger: run sources and the read audit (ids only, never text) -------------------------------

_LEDGER_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS run_sources (
        message TEXT NOT NULL,
        run_id TEXT NOT NULL,
        scope_key TEXT NOT NULL,
        linked_at REAL NOT NULL,
        PRIMARY KEY (message, run_id, scope_key)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS read_audit (
        audit_id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        thread_key TEXT NOT NULL,
        asker TEXT,
        scope_keys TEXT NOT NULL,
        at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS read_audit_records (
        audit_id INTEGER NOT NULL REFERENCES read_audit (audit_id) ON DELETE CASCADE,
        record_id TEXT NOT NULL,
        rank INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS read_audit_run ON read_audit (run_id)",
    "CREATE INDEX IF NOT EXISTS read_audit_thread ON read_audit (thread_key, at DESC)",
    "CREATE INDEX IF NOT EXISTS read_audit_asker ON read_audit (asker, at DESC)",
    "CREATE INDEX IF NOT EXISTS read_audit_at ON read_audit (at)",
    "CREATE INDEX IF NOT EXISTS read_audit_records_id ON read_audit_records (record_id)",
    "CREATE INDEX IF NOT EXISTS read_audit_records_audit ON read_audit_records (audit_id)",
)


def _prepare_ledger(connection: sqlite3.Connection) -> None:
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    connection.execute("PRAGMA secure_delete = ON")
    connection.execute("PRAGMA foreign_keys = ON")
    _enable_wal(connection)
    connection.execute("PRAGMA synchronous = NORMAL")
    with _transaction(connection):
        for statement in _LEDGER_SCHEMA:
            connection.execute(statement)


def _link_sources(connection: sqlite3.Connection, link: SourceLink, now: float) -> None:
    with _transaction(connection):
        connection.executemany(
            "INSERT OR IGNORE INTO run_sources (message, run_id, scope_key, linked_at) VALUES (?, ?, ?, ?)",
            [(message, link.run_id, key, now) for message in link.messages for key in link.scope_keys],
        )


def _linked_runs(connection: sqlite3.Connection, messages: Sequence[str]) -> dict[str, builtins.list[str]]:
    runs: dict[str, builtins.list[str]] = {}
    for chunk in _chunks(messages):
        for run_id, scope_key in connection.execute(
            "SELECT DISTINCT run_id, scope_key FROM run_sources "
            f"WHERE message IN ({_placeholders(len(chunk))}) ORDER BY scope_key, run_id",
            chunk,
        ):
            found = runs.setdefault(str(scope_key), [])
            if str(run_id) not in found:
                found.append(str(run_id))
    return runs


def _record_read(connection: sqlite3.Connection, entry: ReadAudit, cutoff: float) -> None:
    with _transaction(connection):
        connection.execute("DELETE FROM read_audit WHERE at < ?", (cutoff,))
        audit_id = connection.execute(
            "INSERT INTO read_audit (run_id, thread_key, asker, scope_keys, at) VALUES (?, ?, ?, ?, ?) "
            "RETURNING audit_id",
            (
                entry.run_id,
                entry.thread_key,
                entry.asker,
                json.dumps(builtins.list(entry.scope_keys)),
                entry.at,
            ),
        ).fetchone()[0]
        connection.executemany(
            "INSERT INTO read_audit_records (audit_id, record_id, rank) VALUES (?, ?, ?)",
            [(audit_id, record_id, rank) for record_id, rank in entry.records],
        )


def _read_audit(connection: sqlite3.Connection, query: AuditQuery, cutoff: float) -> builtins.list[ReadAudit]:
    value: str | None
    if query.record_id is not None:
        where, value = (
            "audit_id IN (SELECT audit_id FROM read_audit_records WHERE record_id = ?)",
            query.record_id,
        )
    elif query.run_id is not None:
        where, value = "run_id = ?", query.run_id
    elif query.user_id is not None:
        where, value = "asker = ?", query.user_id
    else:
        where, value = "thread_key = ?", query.thread_key
    rows = connection.execute(
        f"SELECT audit_id, run_id, thread_key, asker, scope_keys, at FROM read_audit WHERE {where} "
        "AND at >= ? ORDER BY at DESC, audit_id DESC LIMIT ?",
        (value, cutoff, query.limit),
    ).fetchall()
    entries: builtins.list[ReadAudit] = []
    for audit_id, run_id, thread_key, asker, scope_keys, at in rows:
        records = connection.execute(
            "SELECT record_id, rank FROM read_audit_records WHERE audit_id = ? ORDER BY rank, record_id",
            (audit_id,),
        ).fetchall()
        entries.append(
            ReadAudit(
                run_id=str(run_id),
                thread_key=str(thread_key),
                asker=None if asker is None else str(asker),
                scope_keys=tuple(str(key) for key in json.loads(str(scope_keys))),
                records=tuple((str(record_id), int(rank)) for record_id, rank in records),
                at=float(at),
            )
        )
    return entries
