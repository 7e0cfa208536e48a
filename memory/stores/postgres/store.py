"""The PostgreSQL memory store: one shared database for several bot and memory-service replicas.

Everything that is per-scope in the SQLite store (one database file per scope) is per-`scope_key` rows
here: every statement is filtered by `scope_key`, and a batch runs in one transaction under a per-scope
transaction-level advisory lock — one writer per scope, across replicas. Ranking, dedup, supersede and
eviction are decided by `memory.rules.engine`; the package's modules only persist, and this facade
turns a lost server into one clear error (or, for the advisory retrieve, no memory).

The full-text column is generated from the engine's own tokens of text and keywords (`tokens`, computed
with `memory.rules.scorer.record_tokens`), so a record matches a query token in SQL exactly when the
engine would say it does — no PostgreSQL parser or dictionary stands between them.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import psycopg
import structlog
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.ranking.fusion import DEFAULT_RANKING, Ranked, Ranking
from memory.rules.engine import validate_cap
from memory.rules.person import PersonRename
from memory.rules.retention import NO_RETENTION, Retention
from memory.stores.contract import CompactingStore
from memory.stores.front import StoreFront
from memory.stores.postgres import curation_log, ledger, person, reads, review, versions, writes
from memory.stores.postgres.claims import ClaimTable
from memory.stores.postgres.compaction import (
    DEFAULT_COMPACT_AFTER_SECONDS,
    CompactionTarget,
    Compactor,
    compact_now,
)
from memory.stores.postgres.connections import DSN_SETTING, ServerPool
from memory.stores.postgres.erasure import ScrubList, erase, expiry_filters
from memory.stores.postgres.failures import failure, once_more_on_conflict, out_of_reach, unavailable
from memory.stores.postgres.retrieve import Retriever
from memory.stores.postgres.rows import NO_CUTOFF, Connection, match_query, own_seq, tsquery_of
from memory.stores.postgres.versions import forget_chain
from memory.stores.usage_bumps import FlushTimers
from memory.stores.writing import Approval
from memory.types import (
    DEFAULT_SCOPE_CAP,
    AuditQuery,
    CompactionReport,
    CurationEntry,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    OriginLabel,
    ReadAudit,
    RecordVersion,
    SourceLink,
    WriteResult,
)

__all__ = ["DSN_SETTING", "PostgresMemoryStore", "match_query", "tsquery_of"]

log = structlog.get_logger("memory")

T = TypeVar("T")
Pool = AsyncConnectionPool[Connection]

Clock = Callable[[], float]


class SettledPool:
    """Mixed into `PostgresMemoryStore`: the pool each operation runs on, with this replica's held
    usage bumps written first, and the cutoffs the retention sets."""

    _pool: ServerPool
    _clock: Callable[[], float]
    _embedder: Embedder | None
    _retention: Retention
    _scrub: ScrubList
    _retriever: Retriever

    async def _settled(self) -> AsyncConnectionPool[Connection]:
        """The ready pool, this replica's held-back usage bumps written first: every operation but a
        retrieve sees them in the database (no round trip when none is pending)."""
        pool = await self._pool.ready()
        await self._write_held_bumps()
        return pool

    async def _write_held_bumps(self) -> None:
        unwritten = self._retriever.indexes.bumps.unwritten_scopes()
        if unwritten:
            await self._retriever.write_bumps(self._pool, unwritten)

    def _since(self, scope_key: str) -> float:
        cutoff = self._retention.cutoff(scope_key, self._clock())
        return NO_CUTOFF if cutoff is None else cutoff

    def _log_cutoff(self, now: float) -> float:
        """The curation log keeps its entries as long as the read audit keeps its rows."""
        return self._retention.audit_cutoff(now)


class PostgresMemoryStore(SettledPool, StoreFront):
    """A `MemoryStore` and `CuratingStore` on PostgreSQL (psycopg 3 async, one connection pool).

    The constructor only checks its arguments (a malformed DSN fails there); `await open()` — or the
    first operation — verifies the server, applies the schema and starts the pool. Call `open()` at
    start-up so an unreachable server is one clear line naming the setting, not a later surprise.
    """

    _cap: int
    _log_fields: ClassVar[Mapping[str, str]] = {"store": "postgres"}

    def __init__(
        self,
        dsn: str,
        cap: int = DEFAULT_SCOPE_CAP,
        *,
        clock: Clock = time.time,
        ranking: Ranking = DEFAULT_RANKING,
        embedder: Embedder | None = None,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,
        reconnect_timeout: float = 10.0,
        application_name: str | None = None,
        connection_class: type[Connection] = AsyncConnection,
        retention: Retention = NO_RETENTION,
        compact_after_seconds: float = DEFAULT_COMPACT_AFTER_SECONDS,
    ) -> None:
        """`connection_class` makes every connection (a subclass may observe the statements run);
        `compact_after_seconds`: an erasure's words are rewritten out of the files within that long."""
        self._pool = ServerPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            reconnect_timeout=reconnect_timeout,
            application_name=application_name,
            connection_class=connection_class,
            on_open=self._opened,
        )
        self._dsn = dsn
        self._cap = validate_cap(cap)
        self._clock = clock
        self._ranking = ranking
        self._embedder = embedder
        self._retention = retention
        self._retriever = Retriever(ranking, embedder, clock, retention)
        self._flushes = FlushTimers(self._write_bumps)
        self._scrub = ScrubList()  # the erase's SET list, from the live table's columns
        self._claims = ClaimTable()
        self._backend = PostgresBackend(self)
        self._compaction = CompactionTarget(dsn, self._pool.application_name)
        self._compactor = Compactor(self._compaction, compact_after_seconds)

    @classmethod
    async def connect(cls, dsn: str, cap: int = DEFAULT_SCOPE_CAP, **options: Any) -> PostgresMemoryStore:
        """A store that is open and ready, or a `MemoryStoreError` naming the DSN setting."""
        store = cls(dsn, cap, **options)
        await store.open()
        return store

    @property
    def cap(self) -> int:
        return self._cap

    @property
    def where(self) -> str:
        """host:port/dbname of the server (for logs: never the password)."""
        return self._pool.where

    @property
    def application_name(self) -> str:
        """The `application_name` of every pooled connection (what `pg_stat_activity` shows)."""
        return self._pool.application_name

    async def open(self) -> None:
        """Verify the server, apply the schema, start the pool; idempotent.

        Raises `MemoryStoreError` naming DATABASE_URL / --database-url when the server cannot be used.
        """
        await self._pool.open()

    def _opened(self) -> None:
        self._compactor.start()
        log.info("memory.store.opened", store="postgres", where=self._pool.where, cap=self._cap)

    async def aclose(self) -> None:
        """Every held-back usage bump written, then the pool closed."""
        self._flushes.close()
        await self._compactor.aclose()
        await self._write_held_bumps()
        await self._pool.close()

    async def _write_bumps(self, scope_key: str) -> None:
        await self._retriever.write_bumps(self._pool, [scope_key])

    def compaction(self) -> CompactingStore | None:
        return self

    async def compact(self) -> CompactionReport:
        """Every table that held erased text rewritten now, once another replica's compaction ends."""
        await self._pool.ready()  # the schema applied: every table is there to rewrite
        try:
            return await compact_now(self._compaction)
        except psycopg.Error as error:
            raise failure("compact", "-", error) from error


class PostgresReads:
    """The reads and erasures of one `PostgresMemoryStore` (`ReadBackend`), on its pool."""

    _store: PostgresMemoryStore

    async def _guarded(
        self,
        action: str,
        scope_key: str,
        work: Callable[[Pool], Awaitable[T]],
        *,
        settled: bool = True,
        retry: bool = True,
    ) -> T:
        """`work` on the pool (settled: this replica's held usage bumps written first, what every
        operation on records wants); a lost server or a failed statement one clear error
        (memory/stores/postgres/failures.py). Run once more when the server rolled it back for a
        deadlock or a serialization failure (`retry`): every operation here is one transaction, or
        idempotent, but the claim, which says whether this call took it."""
        store = self._store
        pool = await (store._settled() if settled else store._pool.ready())
        try:
            if retry:
                return await once_more_on_conflict(action, lambda: work(pool))
            return await work(pool)
        except psycopg.Error as error:
            raise failure(action, scope_key, error) from error

    async def rank(
        self, scope_key: str, query: str, terms: Sequence[str], limit: int
    ) -> builtins.list[Ranked]:
        """The scope caught up and ranked whole (the spec ranking: its FTS prefilter by rank)."""
        return (await self.rank_many([scope_key], query, terms, limit)).get(scope_key, [])

    async def rank_many(
        self, scope_keys: Sequence[str], query: str, terms: Sequence[str], limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """On one connection; every scope's usage bump held back and written within FLUSH_SECONDS in
        ONE transaction (even a read that failed later held some)."""
        store, tsquery = self._store, tsquery_of(terms)
        if tsquery is None:
            return {}
        try:
            pool = await store._pool.ready()
            return await store._retriever.retrieve_scopes(pool, scope_keys, query, terms, tsquery, limit)
        except psycopg.Error as error:
            if out_of_reach(error):  # the front warns once, and the retrieve reads as no memory
                raise unavailable(error) from error
            raise failure("retrieve", ",".join(scope_keys), error) from error
        finally:
            for key in scope_keys:
                store._flushes.soon(key, store._retriever.indexes.bumps.has_pending(key))

    async def list_records(
        self, scope_key: str, limit: int, query: str | None, cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        """Through the same FTS prefilter as a retrieve when there is a query."""
        statement = reads.list_statement(scope_key, limit, query, cutoff)
        if statement is None:
            return []
        return await self._guarded("list", scope_key, lambda pool: reads.list_records(pool, statement, query))

    async def fetch(
        self, scope_key: str, record_ids: Sequence[str], cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        return await self._guarded(
            "fetch", scope_key, lambda pool: reads.fetch_records(pool, scope_key, record_ids, cutoff)
        )

    async def forget(self, scope_key: str, record_id: str) -> bool:
        """The record's text and every version of its chain's, in one transaction."""
        s, seq = self._store, _seq(scope_key, record_id)
        return await self._guarded(
            "forget",
            scope_key,
            lambda pool: forget_chain(pool, s._scrub, scope_key, seq, record_id, s._clock()),
        )

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        return await self._erase("scope_key = %s", (scope_key,), reason)

    async def erase_expired(self) -> int:
        """The configured ttl for all but the scopes with their own, then each of those."""
        filters = expiry_filters(self._store._retention, self._store._clock())
        return sum([await self._erase(where, params, "expired") for where, params in filters])

    async def link_sources(self, link: SourceLink) -> None:
        now = self._store._clock()
        await self._guarded(
            "link_sources", "-", lambda pool: ledger.link_sources(pool, link, now), settled=False
        )

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        return await self._erase(ledger.SOURCES_WHERE, (messages,), reason)

    async def pseudonymize(self, rename: PersonRename) -> int:
        """The person's scope moves to the pseudonym with the logs (memory/stores/postgres/person.py);
        this replica's index of it goes with it."""
        s = self._store
        renamed = await self._guarded(
            "pseudonymize_person", "-", lambda pool: person.pseudonymize(pool, s._scrub, rename, s._clock())
        )
        s._retriever.indexes.drop(rename.person_key)
        return renamed

    async def record_read(self, entry: ReadAudit, cutoff: float) -> None:
        await self._guarded(
            "record_read", "-", lambda pool: ledger.record_read(pool, entry, cutoff), settled=False
        )

    async def read_audit(self, query: AuditQuery, cutoff: float) -> builtins.list[ReadAudit]:
        return await self._guarded(
            "read_audit", "-", lambda pool: ledger.read_audit(pool, query, cutoff), settled=False
        )

    async def claim(self, key: str, ttl_seconds: float) -> bool:
        """Once per key across every replica on this database. Never run twice: a second try after
        the first took the claim would answer that someone else had."""
        s = self._store
        return await self._guarded(
            "claim_event",
            "-",
            lambda pool: s._claims.claim(pool, key, ttl_seconds, s._clock()),
            settled=False,
            retry=False,
        )

    async def scope_keys(self) -> builtins.list[str]:
        return await self._guarded("scope_keys", "-", reads.scope_keys, settled=False)

    async def unreadable_scopes(self) -> builtins.list[str]:
        """None: every scope is rows of the one database, read or failed together."""
        return []

    async def reindex_batch(self, scope_key: str, embedder: Embedder, batch: int) -> tuple[int, int]:
        return await self._guarded(
            "reindex",
            scope_key,
            lambda pool: writes.reindex_batch(pool, embedder, scope_key, batch),
            settled=False,
        )

    async def foreign_vectors(self, model: str) -> int:
        return await self._guarded(
            "foreign_vectors", "-", lambda pool: reads.count_foreign_vectors(pool, model), settled=False
        )

    async def _erase(self, where: str, params: Sequence[object], reason: EraseReason) -> int:
        """One UPDATE in place over the not-yet-erased rows matching `where`: text, norm, keywords,
        tokens and any later content column (a vector) scrubbed; an active row becomes `forgotten`."""
        s = self._store
        return await self._guarded(
            "erase", "-", lambda pool: erase(pool, s._scrub, where, params, reason, s._clock)
        )


class PostgresBackend(PostgresReads):
    """The writes and curation calls of one `PostgresMemoryStore` (`StoreBackend`), on its pool."""

    def __init__(self, store: PostgresMemoryStore) -> None:
        self._store = store

    async def write(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        """One transaction per batch under the scope's advisory lock: plan, apply, evict — or nothing."""
        return await self._write("write", scope_key, batch, cap, pending=False)

    async def write_pending(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        return await self._write("write_pending", scope_key, batch, cap, pending=True)

    async def _write(
        self, action: str, scope_key: str, batch: Sequence[MemoryCandidate], cap: int, *, pending: bool
    ) -> WriteResult:
        """A pending record gets its vector when it is approved, not before."""
        s = self._store
        embedder = None if pending else s._embedder
        return await self._guarded(
            action,
            scope_key,
            lambda pool: writes.write_batch(
                pool, scope_key, batch, cap, embedder, s._clock, s._retention, s._scrub, pending=pending
            ),
        )

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        since = self._store._since(scope_key)
        return await self._guarded(
            "pending", scope_key, lambda pool: review.pending_records(pool, scope_key, limit, since)
        )

    async def approve(self, scope_key: str, record_id: str, actor: str, cap: int) -> Approval | None:
        s, seq = self._store, _seq(scope_key, record_id)
        return await self._guarded(
            "approve",
            scope_key,
            lambda pool: review.approve(
                pool, scope_key, seq, record_id, actor, cap, s._embedder, s._clock, s._retention, s._scrub
            ),
        )

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        s, seq = self._store, _seq(scope_key, record_id)
        now = s._clock()
        return await self._guarded(
            "reject",
            scope_key,
            lambda pool: review.reject(
                pool, s._scrub, scope_key, seq, record_id, actor, now, s._log_cutoff(now)
            ),
        )

    async def expire_pending(self, older_than: float, actor: str) -> int:
        """Every scope in one transaction."""
        s = self._store
        now = s._clock()
        expired = await self._guarded(
            "expire_pending",
            "-",
            lambda pool: review.expire_pending(pool, s._scrub, older_than, actor, now, s._log_cutoff(now)),
        )
        if expired:
            log.info("memory.pending_expired", store="postgres", expired=expired)
        return expired

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, typed_in: OriginLabel
    ) -> MemoryRecord | None:
        s, seq = self._store, _seq(scope_key, record_id)
        return await self._guarded(
            "edit",
            scope_key,
            lambda pool: versions.edit(
                pool,
                scope_key,
                seq,
                record_id,
                text,
                typed_in,
                actor,
                s._embedder,
                s._clock,
                s._log_cutoff,
                s._scrub,
                s._since(scope_key),
            ),
        )

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        s, seq = self._store, _seq(scope_key, record_id)

        async def work(pool: Pool) -> builtins.list[RecordVersion]:
            async with pool.connection() as conn:
                since = s._log_cutoff(s._clock())
                return await versions.read_history(conn, scope_key, seq, record_id, since)

        return await self._guarded("history", scope_key, work)

    async def append_entry(self, entry: CurationEntry) -> None:
        s = self._store

        async def work(pool: Pool) -> None:
            async with pool.connection() as conn, conn.transaction():
                await curation_log.append_entries(conn, [entry], s._log_cutoff(s._clock()))

        await self._guarded("record_curation", entry.scope_key, work)

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        s = self._store

        async def work(pool: Pool) -> builtins.list[CurationEntry]:
            async with pool.connection() as conn:
                since = s._log_cutoff(s._clock())
                return await curation_log.read_log(conn, scope_key, record_id, limit, since)

        return await self._guarded("curation_log", scope_key, work)

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        since = self._store._since(scope_key)
        return await self._guarded(
            "active_records", scope_key, lambda pool: versions.active_records(pool, scope_key, since)
        )

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        s = self._store
        return await self._guarded(
            "merge",
            scope_key,
            lambda pool: versions.merge(
                pool, s._scrub, scope_key, survivor_id, duplicate_ids, actor, s._clock, s._log_cutoff
            ),
        )


def _seq(scope_key: str, record_id: str) -> int:
    """The front passes only ids of this scope (memory/stores/front.py)."""
    seq = own_seq(scope_key, record_id)
    if seq is None:
        raise ValueError(f"{record_id} is not a record id of {scope_key}")
    return seq
