"""The store front: the whole store contract written once over a backend.

Every write and curating call is checked here (scope key, actor, cap, log limit, the candidates
validated and redacted off the loop), logged here as one structlog event with ids and counts (never
text), and handed to the backend as one transaction or one read (`StoreBackend` in
memory/stores/contract.py); every batch is planned by memory/stores/writing.py inside it (by the
memory service's own store, for its HTTP client). The reads, erasures, ledger, claims and maintenance
are the other half (`ReadFront`, memory/stores/front_reads.py). A backend keeps only storage: SQL, its
threads or its pool, or the service's routes, and turning its driver's failure into a
`MemoryStoreError`.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence

import structlog

from memory.rules.curation import SYSTEM_ACTOR, log_limit, validate_actor, validate_entry
from memory.rules.engine import prepare_batch, validate_cap
from memory.rules.scope import is_shared, validate_scope_key
from memory.stores.contract import CompactingStore, CuratedStore, EventClaims, ScopeMaintenance, StoreBackend
from memory.stores.front_reads import ReadFront
from memory.stores.front_reads import own_id as _own
from memory.stores.sql_common import log_evictions
from memory.stores.writing import NO_CAP
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


class StoreFront(ReadFront):
    """Mixed into a durable store: `_backend` is the storage it runs the calls on, `_cap`
    the store's per-scope cap, `_log_fields` what every event adds (e.g. which store)."""

    _cap: int | None
    _backend: StoreBackend

    # What every fronted store answers unless it says otherwise: it curates, shares its claims with
    # every process over the same storage, holds its scopes here, keeps no erased byte in its files
    # (its erasures rewrite them), and has nothing to verify at start or to release at the end.

    def curation(self) -> CuratedStore | None:
        return self

    def claims(self) -> EventClaims | None:
        return self

    def maintenance(self) -> ScopeMaintenance | None:
        return self

    def compaction(self) -> CompactingStore | None:
        return None

    async def open(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def _batch_cap(self, cap: int | None) -> int:
        """The call's cap, else the store's; a store built without one never evicts."""
        if cap is not None:
            return validate_cap(cap)
        return NO_CAP if self._cap is None else self._cap

    async def _prepared(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], cap: int | None
    ) -> tuple[builtins.list[MemoryCandidate], int]:
        """The batch validated and redacted (CPU work on untrusted text, off the loop), and its cap."""
        validate_scope_key(scope_key)
        batch_cap = self._batch_cap(cap)
        return await asyncio.to_thread(prepare_batch, candidates), batch_cap

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        """One batch in one transaction; `cap` overrides the store's cap for it (the memory
        service's per-request cap)."""
        batch, batch_cap = await self._prepared(scope_key, candidates, cap)
        if not batch:
            return WriteResult()
        result = await self._backend.write(scope_key, batch, batch_cap)
        log_evictions(scope_key, len(batch), result)
        return result

    async def write_pending(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        batch, batch_cap = await self._prepared(scope_key, candidates, cap)
        if not batch:
            return WriteResult()
        result = await self._backend.write_pending(scope_key, batch, batch_cap)
        if result.evicted:
            log.info(
                "memory.pending_expired", **self._log_fields, scope_key=scope_key, expired=result.evicted
            )
        return result

    async def review_scopes(self) -> builtins.list[str]:
        return sorted(key for key in await self._backend.scope_keys() if is_shared(key))

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if limit == 0:
            return []
        return await self._backend.pending(scope_key, limit)

    async def approve(
        self, scope_key: str, record_id: str, actor: str, *, cap: int | None = None
    ) -> MemoryRecord | None:
        validate_scope_key(scope_key)
        validate_actor(actor)
        batch_cap = self._batch_cap(cap)
        if not _own(scope_key, record_id):
            return None
        approval = await self._backend.approve(scope_key, record_id, actor, batch_cap)
        if approval is None:
            return None
        log.info(
            "memory.approve",
            **self._log_fields,
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
        if not _own(scope_key, record_id):
            return False
        rejected = await self._backend.reject(scope_key, record_id, actor)
        if rejected:
            log.info("memory.reject", **self._log_fields, scope_key=scope_key, id=record_id)
        return rejected

    async def expire_pending(self, older_than: float, actor: str = SYSTEM_ACTOR) -> int:
        validate_actor(actor)
        return await self._backend.expire_pending(float(older_than), actor)

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, *, typed_in: OriginLabel = MACHINE_LABEL
    ) -> MemoryRecord | None:
        validate_scope_key(scope_key)
        validate_actor(actor)
        if not _own(scope_key, record_id):
            return None
        edited = await self._backend.edit(scope_key, record_id, text, actor, typed_in)
        if edited is not None:
            log.info(
                "memory.edit",
                **self._log_fields,
                scope_key=scope_key,
                id=record_id,
                new_id=edited.id,
                status=edited.status,
            )
        return edited

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        validate_scope_key(scope_key)
        if not _own(scope_key, record_id):
            return []
        return await self._backend.history(scope_key, record_id)

    async def record_curation(self, entry: CurationEntry) -> None:
        await self._backend.append_entry(validate_entry(entry))

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if limit == 0:
            return []
        return await self._backend.curation_log(scope_key, record_id, limit)

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        return await self._backend.active_records(scope_key)

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        validate_scope_key(scope_key)
        validate_actor(actor)
        duplicates = builtins.list(dict.fromkeys(duplicate_ids))
        merged = await self._backend.merge(scope_key, survivor_id, duplicates, actor)
        if merged:
            log.info(
                "memory.merge", **self._log_fields, scope_key=scope_key, survivor=survivor_id, merged=merged
            )
        return merged
