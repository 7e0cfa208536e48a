"""The PostgreSQL store's curation methods (`CuratingStore`): arguments checked, a lost server made one
clear error, every action a structlog event with ids and counts (never text). The work is in
`review` (the pending queue), `editing` (edits and merges) and `curation` (the log and history)."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence

import psycopg
import structlog

from memory.ranking.embedder import Embedder
from memory.rules.engine import prepare_batch
from memory.rules.retention import Retention
from memory.rules.scope import validate_scope_key
from memory.stores.postgres import curation, editing, review
from memory.stores.postgres.connection import ServerPool, failure
from memory.stores.postgres.erasure import ScrubList
from memory.stores.postgres.rows import NO_CUTOFF, own_seq
from memory.types import (
    CURATION_ACTIONS,
    MAX_LIMIT,
    MAX_REF_CHARS,
    CurationEntry,
    MemoryCandidate,
    MemoryRecord,
    RecordVersion,
    WriteResult,
)

log = structlog.get_logger("memory")


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    return limit


def _actor(actor: str) -> str:
    if not isinstance(actor, str) or not actor.strip() or len(actor) > MAX_REF_CHARS:
        raise ValueError(f"actor must be a non-empty string of at most {MAX_REF_CHARS} characters")
    return actor


def _checked_entry(entry: CurationEntry) -> CurationEntry:
    validate_scope_key(entry.scope_key)
    if entry.action not in CURATION_ACTIONS:
        raise ValueError(f"action must be one of {sorted(CURATION_ACTIONS)}, got {entry.action!r}")
    _actor(entry.actor)
    for name, value in (("record_id", entry.record_id), ("related_id", entry.related_id)):
        if value is not None and (not isinstance(value, str) or not value or len(value) > MAX_REF_CHARS):
            raise ValueError(f"{name} must be a non-empty string of at most {MAX_REF_CHARS} characters")
    if isinstance(entry.at, bool) or not isinstance(entry.at, int | float):
        raise ValueError("at must be epoch seconds")
    return entry


class PostgresCuration:
    """The curation half of `PostgresMemoryStore` (its pool, cap, clock, embedder, retention, scrub)."""

    _pool: ServerPool
    _cap: int
    _clock: Callable[[], float]
    _embedder: Embedder | None
    _retention: Retention
    _scrub: ScrubList

    def _since(self, scope_key: str) -> float:
        cutoff = self._retention.cutoff(scope_key, self._clock())
        return NO_CUTOFF if cutoff is None else cutoff

    async def write_pending(self, scope_key: str, candidates: Sequence[MemoryCandidate]) -> WriteResult:
        validate_scope_key(scope_key)
        batch = await asyncio.to_thread(prepare_batch, candidates)
        if not batch:
            return WriteResult()
        pool = await self._pool.ready()
        try:
            result = await review.write_pending(pool, scope_key, batch, self._cap, self._clock, self._scrub)
        except psycopg.Error as error:
            raise failure("write_pending", scope_key, error) from error
        log.info(
            "memory.pending.written",
            store="postgres",
            scope_key=scope_key,
            inserted=result.inserted,
            deduped=result.deduped,
            expired=result.evicted,
        )
        return result

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        pool = await self._pool.ready()
        try:
            return await review.pending_records(pool, scope_key, _limit(limit), self._since(scope_key))
        except psycopg.Error as error:
            raise failure("pending", scope_key, error) from error

    async def approve(self, scope_key: str, record_id: str, actor: str) -> MemoryRecord | None:
        validate_scope_key(scope_key)
        _actor(actor)
        seq = own_seq(scope_key, record_id)
        if seq is None:
            return None
        pool = await self._pool.ready()
        try:
            record = await review.approve(
                pool, scope_key, seq, record_id, actor, self._cap, self._embedder, self._clock
            )
        except psycopg.Error as error:
            raise failure("approve", scope_key, error) from error
        log.info(
            "memory.approve", store="postgres", scope_key=scope_key, id=record_id, approved=record is not None
        )
        return record

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        validate_scope_key(scope_key)
        _actor(actor)
        seq = own_seq(scope_key, record_id)
        if seq is None:
            return False
        pool = await self._pool.ready()
        try:
            rejected = await review.reject(pool, self._scrub, scope_key, seq, record_id, actor, self._clock())
        except psycopg.Error as error:
            raise failure("reject", scope_key, error) from error
        log.info("memory.reject", store="postgres", scope_key=scope_key, id=record_id, rejected=rejected)
        return rejected

    async def expire_pending(self, older_than: float, actor: str = "system") -> int:
        _actor(actor)
        pool = await self._pool.ready()
        try:
            expired = await review.expire_pending(pool, self._scrub, float(older_than), actor, self._clock())
        except psycopg.Error as error:
            raise failure("expire_pending", "-", error) from error
        if expired:
            log.info("memory.pending.expired", store="postgres", expired=expired)
        return expired

    async def edit(self, scope_key: str, record_id: str, text: str, actor: str) -> MemoryRecord | None:
        validate_scope_key(scope_key)
        _actor(actor)
        seq = own_seq(scope_key, record_id)
        if seq is None:
            return None
        pool = await self._pool.ready()
        try:
            new = await editing.edit(
                pool, scope_key, seq, record_id, text, actor, self._embedder, self._clock
            )
        except psycopg.Error as error:
            raise failure("edit", scope_key, error) from error
        log.info(
            "memory.edit",
            store="postgres",
            scope_key=scope_key,
            id=record_id,
            new_id=None if new is None else new.id,
        )
        return new

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        validate_scope_key(scope_key)
        seq = own_seq(scope_key, record_id)
        if seq is None:
            return []
        pool = await self._pool.ready()
        try:
            async with pool.connection() as conn:
                return await curation.read_history(conn, scope_key, seq, record_id)
        except psycopg.Error as error:
            raise failure("history", scope_key, error) from error

    async def record_curation(self, entry: CurationEntry) -> None:
        _checked_entry(entry)
        pool = await self._pool.ready()
        try:
            async with pool.connection() as conn, conn.transaction():
                await curation.append_entries(conn, [entry])
        except psycopg.Error as error:
            raise failure("record_curation", entry.scope_key, error) from error

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        validate_scope_key(scope_key)
        pool = await self._pool.ready()
        try:
            async with pool.connection() as conn:
                return await curation.read_log(conn, scope_key, record_id, _limit(limit))
        except psycopg.Error as error:
            raise failure("curation_log", scope_key, error) from error

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        pool = await self._pool.ready()
        try:
            return await editing.active_records(pool, scope_key, self._since(scope_key))
        except psycopg.Error as error:
            raise failure("active_records", scope_key, error) from error

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        validate_scope_key(scope_key)
        _actor(actor)
        pool = await self._pool.ready()
        try:
            merged = await editing.merge(
                pool, self._scrub, scope_key, survivor_id, duplicate_ids, actor, self._clock
            )
        except psycopg.Error as error:
            raise failure("merge", scope_key, error) from error
        log.info("memory.merge", store="postgres", scope_key=scope_key, id=survivor_id, merged=merged)
        return merged
