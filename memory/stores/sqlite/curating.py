"""The SQLite store's curating half (`CuratingStore`): each action on the store's threads under the
scope's lock, as every other operation runs (memory/stores/sqlite/store.py); the SQL lives in
review.py, versions.py and curation_log.py."""

from __future__ import annotations

import builtins
import functools
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import structlog

from memory.ranking.embedder import Embedder
from memory.rules.curation import SYSTEM_ACTOR, edit_candidate, log_limit, validate_actor, validate_entry
from memory.rules.engine import prepare_batch, validate_cap
from memory.rules.retention import Retention
from memory.rules.scope import validate_scope_key
from memory.stores.sqlite import curation_log, reads, review, versions
from memory.stores.sqlite.erasure import scrub_files
from memory.stores.sqlite.index_sync import OpenScopes
from memory.stores.sqlite.sql import transaction
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

T = TypeVar("T")


class SqliteCuration:
    """Mixed into `SqliteMemoryStore`, whose state and runners it uses."""

    _cap: int
    _clock: Callable[[], float]
    _retention: Retention
    _embedder: Embedder | None
    _scopes: OpenScopes

    if TYPE_CHECKING:

        async def _run(
            self,
            scope_key: str,
            work: Callable[[sqlite3.Connection], T],
            missing: T,
            *,
            create: bool = False,
            flush: bool = True,
        ) -> T: ...

        async def _on_pool(self, job: Callable[[], T], failure: str) -> T: ...

        async def scope_keys(self) -> builtins.list[str]: ...

    async def write_pending(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        validate_scope_key(scope_key)
        batch_cap = self._cap if cap is None else validate_cap(cap)
        batch = await self._on_pool(functools.partial(prepare_batch, candidates), "sqlite memory store")
        if not batch:
            return WriteResult()
        cutoff = self._retention.cutoff(scope_key, self._clock())

        def work(connection: sqlite3.Connection) -> WriteResult:
            result, erased = review.write_pending(
                connection, scope_key, batch, batch_cap, self._clock, cutoff, self._log_cutoff()
            )
            if result.deduped:
                self._scopes.usage_changed(scope_key)
            if erased:
                scrub_files(connection)
            return result

        result = await self._run(scope_key, work, WriteResult(), create=True)
        if result.evicted:
            log.info("memory.pending_expired", scope_key=scope_key, expired=result.evicted)
        return result

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if limit == 0:
            return []
        cutoff = self._retention.cutoff(scope_key, self._clock())
        read = functools.partial(
            reads.status_records, status="pending", cutoff=cutoff, newest_first=True, limit=limit
        )
        return await self._run(scope_key, read, [])

    async def approve(
        self, scope_key: str, record_id: str, actor: str, *, cap: int | None = None
    ) -> MemoryRecord | None:
        validate_scope_key(scope_key)
        validate_actor(actor)
        batch_cap = self._cap if cap is None else validate_cap(cap)

        def work(connection: sqlite3.Connection) -> review.Approval | None:
            approval = review.approve(
                connection,
                scope_key,
                record_id,
                actor,
                batch_cap,
                self._embedder,
                self._clock,
                self._log_cutoff(),
            )
            if approval is not None and approval.folded:
                self._scopes.usage_changed(scope_key)
            return approval

        approval = await self._run(scope_key, work, None)
        if approval is None:
            return None
        log.info(
            "memory.approve",
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
        now = self._clock()
        rejected = await self._run(
            scope_key, lambda c: review.reject(c, record_id, actor, now, self._log_cutoff()), False
        )
        if rejected:
            log.info("memory.reject", scope_key=scope_key, id=record_id)
        return rejected

    async def expire_pending(self, older_than: float, actor: str = SYSTEM_ACTOR) -> int:
        """Every scope database in the directory, one at a time."""
        validate_actor(actor)
        total = 0
        for scope_key in await self.scope_keys():
            now = self._clock()
            expire = functools.partial(
                review.expire, older_than=older_than, actor=actor, now=now, log_cutoff=self._log_cutoff()
            )
            expired = await self._run(scope_key, expire, 0)
            if expired:
                log.info("memory.pending_expired", scope_key=scope_key, expired=expired)
            total += expired
        return total

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, *, typed_in: OriginLabel = MACHINE_LABEL
    ) -> MemoryRecord | None:
        validate_scope_key(scope_key)
        validate_actor(actor)

        def work(connection: sqlite3.Connection) -> MemoryRecord | None:
            old = versions.find(connection, record_id, "active", "pending")
            if old is None:
                return None
            candidate = edit_candidate(old, text, typed_in)  # validated and redacted on the store's thread
            now = self._clock()
            return versions.edit(
                connection, record_id, candidate, self._embedder, now, actor, self._log_cutoff()
            )

        edited = await self._run(scope_key, work, None)
        if edited is not None:
            log.info("memory.edit", scope_key=scope_key, id=record_id, new_id=edited.id, status=edited.status)
        return edited

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        validate_scope_key(scope_key)
        return await self._run(scope_key, lambda c: versions.history(c, record_id, self._log_cutoff()), [])

    async def record_curation(self, entry: CurationEntry) -> None:
        validate_entry(entry)

        def work(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                curation_log.append(connection, [entry], self._log_cutoff())

        await self._run(entry.scope_key, work, None, create=True)

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if limit == 0:
            return []
        cutoff = self._log_cutoff()
        return await self._run(scope_key, lambda c: curation_log.naming(c, record_id, limit, cutoff), [])

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        cutoff = self._retention.cutoff(scope_key, self._clock())
        read = functools.partial(reads.status_records, status="active", cutoff=cutoff, newest_first=False)
        return await self._run(scope_key, read, [])

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        validate_scope_key(scope_key)
        validate_actor(actor)
        duplicates = builtins.list(dict.fromkeys(duplicate_ids))

        def work(connection: sqlite3.Connection) -> int:
            now = self._clock()
            merged = versions.merge(
                connection, scope_key, survivor_id, duplicates, now, actor, self._log_cutoff()
            )
            if merged:
                self._scopes.usage_changed(scope_key)
            return merged

        merged = await self._run(scope_key, work, 0)
        if merged:
            log.info("memory.merge", scope_key=scope_key, survivor=survivor_id, merged=merged)
        return merged

    def _log_cutoff(self) -> float:
        """The curation log keeps its entries as long as the read audit keeps its rows."""
        return self._retention.audit_cutoff(self._clock())
