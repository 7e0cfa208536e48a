"""The SQLite store's curation storage (`CurationBackend` under memory/stores/front.py): each call on
the store's threads under the scope's lock, as every other operation runs (memory/stores/sqlite/
store.py); the SQL lives in review.py, versions.py and curation_log.py."""

from __future__ import annotations

import builtins
import functools
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from memory.rules.curation import edit_candidate
from memory.stores.sqlite import curation_log, reads, review, versions
from memory.stores.sqlite.erasure import scrub_files
from memory.stores.sqlite.sql import transaction
from memory.stores.writing import Approval
from memory.types import CurationEntry, MemoryCandidate, MemoryRecord, RecordVersion, WriteResult

if TYPE_CHECKING:
    from memory.stores.sqlite.store import SqliteMemoryStore

log = structlog.get_logger("memory")


class SqliteCuration:
    """The curation calls of one `SqliteMemoryStore`, on its runners."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    def _log_cutoff(self) -> float:
        """The curation log keeps its entries as long as the read audit keeps its rows."""
        return self._store._retention.audit_cutoff(self._store._clock())

    def _since(self, scope_key: str) -> float | None:
        return self._store._retention.cutoff(scope_key, self._store._clock())

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

    async def edit(self, scope_key: str, record_id: str, text: str, actor: str) -> MemoryRecord | None:
        store = self._store

        def work(connection: sqlite3.Connection) -> MemoryRecord | None:
            old = versions.find(connection, record_id, "active", "pending")
            if old is None:
                return None
            candidate = edit_candidate(old, text)  # validated and redacted on the store's thread
            now = store._clock()
            return versions.edit(
                connection, record_id, candidate, store._embedder, now, actor, self._log_cutoff()
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
