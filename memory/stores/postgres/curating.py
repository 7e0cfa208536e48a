"""The PostgreSQL store's curation storage (`CurationBackend` under memory/stores/front.py): each call
on the store's settled pool, a lost server made one clear error. The SQL is in `review` (the pending
queue), `versions` (edits, merges, chains and histories) and `curation_log`."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import psycopg
import structlog
from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.rules.retention import Retention
from memory.stores.postgres import curation_log, review, versions, writes
from memory.stores.postgres.connection import ServerPool, failure
from memory.stores.postgres.erasure import ScrubList
from memory.stores.postgres.retrieve import Retriever
from memory.stores.postgres.rows import NO_CUTOFF, Connection, own_seq
from memory.stores.writing import Approval
from memory.types import CurationEntry, MemoryCandidate, MemoryRecord, RecordVersion, WriteResult

if TYPE_CHECKING:
    from memory.stores.postgres.store import PostgresMemoryStore

T = TypeVar("T")
Pool = AsyncConnectionPool[Connection]

log = structlog.get_logger("memory")


class SettledPool:
    """Mixed into `PostgresMemoryStore`: the pool each operation runs on, with this replica's held
    usage bumps written first, and the cutoffs the retention sets."""

    _pool: ServerPool
    _cap: int
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


class PostgresCuration:
    """The curation calls of one `PostgresMemoryStore`, on its pool."""

    def __init__(self, store: PostgresMemoryStore) -> None:
        self._store = store

    async def _guarded(self, action: str, scope_key: str, work: Callable[[Pool], Awaitable[T]]) -> T:
        """`work` on the settled pool; a lost server or a failed statement one clear error."""
        pool = await self._store._settled()
        try:
            return await work(pool)
        except psycopg.Error as error:
            raise failure(action, scope_key, error) from error

    async def write_pending(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        s = self._store
        return await self._guarded(
            "write_pending",
            scope_key,
            lambda pool: writes.write_batch(
                pool, scope_key, batch, cap, None, s._clock, s._retention, s._scrub, pending=True
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

    async def edit(self, scope_key: str, record_id: str, text: str, actor: str) -> MemoryRecord | None:
        s, seq = self._store, _seq(scope_key, record_id)
        return await self._guarded(
            "edit",
            scope_key,
            lambda pool: versions.edit(
                pool, scope_key, seq, record_id, text, actor, s._embedder, s._clock, s._log_cutoff, s._scrub
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
