"""The writing and curating half of the memory service's client as a backend (`StoreBackend`): the
writes, the review queue, edits, history, the curation log and consolidation, over the service's data
and curation routes (memory/service/app.py, memory/service/curation_routes.py).

The front has validated and redacted every batch, checked the actor and the cap and deduplicated a
merge's ids. What stays here is the wire's own: a batch goes in requests of at most `MAX_BATCH`, a
merge in requests of at most `MAX_REFS`, and an edit's new words are redacted before they cross the
wire (the other backends redact them in `edit_candidate`, on their side).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from memory.rules.redact import redact_secrets
from memory.stores.http.calls import ServiceCalls
from memory.stores.http.replies import (
    array_of,
    count_of,
    dropped,
    flag_of,
    malformed,
    records_of,
    well_formed,
    write_result,
)
from memory.stores.writing import NO_CAP, Approval
from memory.types import (
    CurationEntry,
    MemoryCandidate,
    MemoryRecord,
    OriginLabel,
    RecordVersion,
    WriteResult,
)
from memory.wire import (
    MAX_BATCH,
    MAX_REFS,
    WireError,
    candidate_to_wire,
    entry_from_wire,
    entry_to_wire,
    record_from_wire,
    text_from_wire,
    typed_in_to_wire,
    version_from_wire,
)


class HttpWrites:
    """`StoreBackend`'s writing half over the service's routes; `_service` makes the round trips."""

    _service: ServiceCalls

    async def write(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        return await self._batches("/write", scope_key, batch, cap)

    async def write_pending(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        return await self._batches("/pending/write", scope_key, batch, cap)

    async def _batches(
        self, route: str, scope_key: str, batch: Sequence[MemoryCandidate], cap: int
    ) -> WriteResult:
        """The batch in requests of at most `MAX_BATCH` (what the service takes), each with the cap."""
        total = WriteResult()
        for start in range(0, len(batch), MAX_BATCH):
            body: dict[str, object] = {
                "scopeKey": scope_key,
                "records": [candidate_to_wire(c) for c in batch[start : start + MAX_BATCH]],
            }
            total += write_result(await self._service.post(route, _capped(body, cap)), route)
        return total

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        body: dict[str, object] = {"scopeKey": scope_key, "limit": limit}
        return records_of(await self._service.post("/pending/list", body), scope_key, "/pending/list")

    async def approve(self, scope_key: str, record_id: str, actor: str, cap: int) -> Approval | None:
        """The service answers with the record alone: folded when it is another one than the pending
        record; what it superseded and evicted are the service's to log."""
        body = _capped(_target(scope_key, record_id, actor), cap)
        record = _changed(
            await self._service.post("/pending/approve", body), "approved", "/pending/approve", scope_key
        )
        if record is None:
            return None
        return Approval(record, folded=record.id != record_id, superseded=None, evicted=None)

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        reply = await self._service.post("/pending/reject", _target(scope_key, record_id, actor))
        return flag_of(reply, "rejected", "/pending/reject")

    async def expire_pending(self, older_than: float, actor: str) -> int:
        body: dict[str, object] = {"olderThan": older_than, "actor": actor}
        return count_of(await self._service.post("/pending/expire", body), "expired", "/pending/expire")

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, typed_in: OriginLabel
    ) -> MemoryRecord | None:
        """The new words checked and redacted here, so a secret typed into an edit never crosses the
        wire (the service's store checks and redacts them again, as every store does)."""
        redacted = text_from_wire(redact_secrets(text_from_wire(text, "text")), "text")
        body = {
            **_target(scope_key, record_id, actor),
            "text": redacted,
            "typedIn": typed_in_to_wire(typed_in),
        }
        reply = await self._service.post("/records/edit", body)
        return _changed(reply, "edited", "/records/edit", scope_key)

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        """All of the chain or an error: a history with a version missing would tell another story."""
        route = "/records/history"
        reply = await self._service.post(route, {"scopeKey": scope_key, "id": record_id})
        raw = array_of(reply, "versions", route)
        try:
            versions = [version_from_wire(item, f"versions[{i}]") for i, item in enumerate(raw)]
        except WireError as exc:
            raise malformed(route, str(exc)) from None
        if any(version.scope_key != scope_key for version in versions):
            raise malformed(route, "a version of another scope")
        return versions

    async def append_entry(self, entry: CurationEntry) -> None:
        await self._service.post("/curation/record", entry_to_wire(entry))

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        body: dict[str, object] = {"scopeKey": scope_key, "id": record_id, "limit": limit}
        raw = array_of(await self._service.post("/curation/log", body), "entries", "/curation/log")
        entries = well_formed(raw, entry_from_wire, lambda entry: entry.scope_key == scope_key)
        dropped("/curation/log", len(raw) - len(entries), scope_key=scope_key)
        return entries

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        reply = await self._service.post("/records/active", {"scopeKey": scope_key})
        return records_of(reply, scope_key, "/records/active")

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        """In requests of at most `MAX_REFS` duplicates (each merge stands on its own)."""
        merged = 0
        for start in range(0, len(duplicate_ids), MAX_REFS):
            body: dict[str, object] = {
                "scopeKey": scope_key,
                "survivorId": survivor_id,
                "duplicateIds": builtins.list(duplicate_ids[start : start + MAX_REFS]),
                "actor": actor,
            }
            merged += count_of(await self._service.post("/records/merge", body), "merged", "/records/merge")
        return merged


def _capped(body: dict[str, object], cap: int) -> dict[str, object]:
    """The body with the cap, when there is one: a store built without one (`NO_CAP`) sends none,
    and the service applies its own default."""
    return body if cap == NO_CAP else {**body, "cap": cap}


def _target(scope_key: str, record_id: str, actor: str) -> dict[str, object]:
    """The body of an action on one record."""
    return {"scopeKey": scope_key, "id": record_id, "actor": actor}


def _changed(reply: dict[str, Any], name: str, route: str, scope_key: str) -> MemoryRecord | None:
    """An approve's or edit's record, None when there was nothing to change; a record of another
    scope than the one asked about is a malformed reply."""
    if not flag_of(reply, name, route):
        return None
    try:
        record = record_from_wire(reply.get("record"))
    except WireError as exc:
        raise malformed(route, str(exc)) from None
    if record.scope_key != scope_key:
        raise malformed(route, "a record of another scope")
    return record
