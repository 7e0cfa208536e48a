"""The PostgreSQL store's curating half (`CuratingStore`), mixed into `PostgresMemoryStore`: arguments
checked by memory/rules/curation.py, a lost server made one clear error, every action a structlog
event with ids and counts (never text). The SQL is in `review` (the pending queue), `editing` (edits
and merges) and `curation` (the log, chains and histories)."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence

import psycopg
import structlog
from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder
from memory.rules.curation import SYSTEM_ACTOR, log_limit, validate_actor, validate_entry
from memory.rules.engine import prepare_batch, validate_cap
from memory.rules.retention import Retention
from memory.rules.scope import validate_scope_key
from memory.stores.postgres import curation, editing, review
from memory.stores.postgres.connection import ServerPool, failure
from memory.stores.postgres.erasure import ScrubList
from memory.stores.postgres.retrieve import Retriever
from memory.stores.postgres.rows import NO_CUTOFF, Connection, own_seq
from memory.types import (
    MACHINE_LABEL,
    CurationEntry,
    MemoryCandidate,
    MemoryRecord,
    OriginLabel,
    RecordVersion,
    WriteResult,
)

log = structlog.get_logger("memory")


class PostgresCuration:
    """Mixed into `PostgresMemoryStore`, whose pool, cap, clock, embedder, retention and scrub it uses."""

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

    async def write_pending(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        validate_scope_key(scope_key)
        batch_cap = self._cap if cap is None else validate_cap(cap)
        batch = await asyncio.to_thread(prepare_batch, candidates)
        if not batch:
            return WriteResult()
        pool = await self._settled()
        try:
            result = await review.write_pending(
                pool, scope_key, batch, batch_cap, self._clock, self._retention, self._scrub
            )
        except psycopg.Error as error:
            raise failure("write_pending", scope_key, error) from error
        if result.evicted:
            log.info("memory.pending_expired", store="postgres", scope_key=scope_key, expired=result.evicted)
        return result

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if limit == 0:
            return []
        pool = await self._settled()
        try:
            return await review.pending_records(pool, scope_key, limit, self._since(scope_key))
        except psycopg.Error as error:
            raise failure("pending", scope_key, error) from error

    async def approve(
        self, scope_key: str, record_id: str, actor: str, *, cap: int | None = None
    ) -> MemoryRecord | None:
        validate_scope_key(scope_key)
        validate_actor(actor)
        batch_cap = self._cap if cap is None else validate_cap(cap)
        seq = own_seq(scope_key, record_id)
        if seq is None:
            return None
        pool = await self._settled()
        try:
            approval = await review.approve(
                pool,
                scope_key,
                seq,
                record_id,
                actor,
                batch_cap,
                self._embedder,
                self._clock,
                self._retention,
                self._scrub,
            )
        except psycopg.Error as error:
            raise failure("approve", scope_key, error) from error
        if approval is None:
            return None
        log.info(
            "memory.approve",
            store="postgres",
            scope_key=scope_key,
            id=record_id,
            active_id=approval.record.id,
            superseded=approval.superseded,
            evicted=approval.evicted,
        )
        return approval.record

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        validate_scope_key(scope_key)
        validate_actor(actor)
        seq = own_seq(scope_key, record_id)
        if seq is None:
            return False
        now = self._clock()
        pool = await self._settled()
        try:
            rejected = await review.reject(
                pool, self._scrub, scope_key, seq, record_id, actor, now, self._log_cutoff(now)
            )
        except psycopg.Error as error:
            raise failure("reject", scope_key, error) from error
        if rejected:
            log.info("memory.reject", store="postgres", scope_key=scope_key, id=record_id)
        return rejected

    async def expire_pending(self, older_than: float, actor: str = SYSTEM_ACTOR) -> int:
        """Every scope in one transaction."""
        validate_actor(actor)
        now = self._clock()
        pool = await self._settled()
        try:
            expired = await review.expire_pending(
                pool, self._scrub, float(older_than), actor, now, self._log_cutoff(now)
            )
        except psycopg.Error as error:
            raise failure("expire_pending", "-", error) from error
        if expired:
            log.info("memory.pending_expired", store="postgres", expired=expired)
        return expired

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, *, typed_in: OriginLabel = MACHINE_LABEL
    ) -> MemoryRecord | None:
        validate_scope_key(scope_key)
        validate_actor(actor)
        seq = own_seq(scope_key, record_id)
        if seq is None:
            return None
        pool = await self._settled()
        try:
            edited = await editing.edit(
                pool,
                scope_key,
                seq,
                record_id,
                text,
                typed_in,
                actor,
                self._embedder,
                self._clock,
                self._log_cutoff,
                self._scrub,
            )
        except psycopg.Error as error:
            raise failure("edit", scope_key, error) from error
        if edited is not None:
            log.info(
                "memory.edit",
                store="postgres",
                scope_key=scope_key,
                id=record_id,
                new_id=edited.id,
                status=edited.status,
            )
        return edited

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        validate_scope_key(scope_key)
        seq = own_seq(scope_key, record_id)
        if seq is None:
            return []
        pool = await self._settled()
        try:
            async with pool.connection() as conn:
                since = self._log_cutoff(self._clock())
                return await curation.read_history(conn, scope_key, seq, record_id, since)
        except psycopg.Error as error:
            raise failure("history", scope_key, error) from error

    async def record_curation(self, entry: CurationEntry) -> None:
        validate_entry(entry)
        pool = await self._settled()
        try:
            async with pool.connection() as conn, conn.transaction():
                await curation.append_entries(conn, [entry], self._log_cutoff(self._clock()))
        except psycopg.Error as error:
            raise failure("record_curation", entry.scope_key, error) from error

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if limit == 0:
            return []
        pool = await self._settled()
        try:
            async with pool.connection() as conn:
                since = self._log_cutoff(self._clock())
                return await curation.read_log(conn, scope_key, record_id, limit, since)
        except psycopg.Error as error:
            raise failure("curation_log", scope_key, error) from error

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        pool = await self._settled()
        try:
            return await editing.active_records(pool, scope_key, self._since(scope_key))
        except psycopg.Error as error:
            raise failure("active_records", scope_key, error) from error

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        validate_scope_key(scope_key)
        validate_actor(actor)
        duplicates = builtins.list(dict.fromkeys(duplicate_ids))
        pool = await self._settled()
        try:
            merged = await editing.merge(
                pool, self._scrub, scope_key, survivor_id, duplicates, actor, self._clock, self._log_cutoff
            )
        except psycopg.Error as error:
            raise failure("merge", scope_key, error) from error
        if merged:
            log.info(
                "memory.merge", store="postgres", scope_key=scope_key, survivor=survivor_id, merged=merged
            )
        return merged
