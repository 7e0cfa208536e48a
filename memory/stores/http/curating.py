"""The curating half of the HTTP memory client: the review queue, edits, history, the curation log and
consolidation, over the memory service's curation routes (memory/service/curation_routes.py).

Every one of these is asked for by a person (an admin's review, an edit, a history) or by a pass whose
caller reports what failed (reflection's pending writes, the expiry sweep, consolidation), so each
failure raises `MemoryStoreError` with the service's status — never an empty queue or history that
only looks empty. Text is validated and redacted here before it crosses the wire, as on a write.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import structlog

from memory.rules.curation import log_limit, validate_actor, validate_entry
from memory.rules.engine import prepare_batch
from memory.rules.redact import redact_secrets
from memory.rules.scope import is_shared, validate_scope_key
from memory.stores.http.replies import (
    CallFailed,
    count_of,
    entries_of,
    records_of,
    well_formed,
    write_result,
)
from memory.types import (
    MACHINE_LABEL,
    CurationEntry,
    MemoryCandidate,
    MemoryRecord,
    MemoryStoreError,
    OriginLabel,
    RecordVersion,
    WriteResult,
)
from memory.wire import (
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

log = structlog.get_logger("memory.http_store")


class CurationClient:
    """The CuratingStore methods of `HttpMemoryStore`, which supplies the round trip and the cap."""

    @property
    def cap(self) -> int | None:
        raise NotImplementedError

    async def _checked(self, route: str, body: dict[str, object]) -> dict[str, Any]:
        raise NotImplementedError

    # --- the review queue --------------------------------------------------------------------------

    async def write_pending(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        """Validated and redacted here like a write's batch. The cap (this call's, else the
        configured one) goes with it, and with an approval, as with a write."""
        batch = prepare_batch(candidates)
        if not batch:
            return WriteResult()
        body: dict[str, object] = {"scopeKey": scope_key, "records": [candidate_to_wire(c) for c in batch]}
        if (cap := self.cap if cap is None else cap) is not None:
            body["cap"] = cap
        return write_result(await self._checked("/pending/write", body), "/pending/write")

    async def review_scopes(self) -> builtins.list[str]:
        """The service's shared scopes; a malformed key in the reply is dropped (and said)."""
        reply = await self._checked("/pending/scopes", {})
        raw = reply.get("scopeKeys")
        if not isinstance(raw, builtins.list):
            raise MemoryStoreError("memory service /pending/scopes: reply has no scopeKeys array", status=200)
        keys = well_formed(raw, _shared_scope_key)
        if len(keys) < len(raw):
            dropped = len(raw) - len(keys)
            log.warning("memory.curation_dropped_scopes", route="/pending/scopes", dropped=dropped)
        return keys

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        limit = log_limit(limit)  # a page as every store takes it: at most MAX_LIMIT
        if not limit:
            return []
        reply = await self._checked("/pending/list", {"scopeKey": scope_key, "limit": limit})
        return _records(reply, scope_key, "/pending/list")

    async def approve(
        self, scope_key: str, record_id: str, actor: str, *, cap: int | None = None
    ) -> MemoryRecord | None:
        body = _target(scope_key, record_id, actor)
        if (cap := self.cap if cap is None else cap) is not None:  # an approval evicts, as a write does
            body["cap"] = cap
        reply = await self._checked("/pending/approve", body)
        return _changed(reply, "approved", "/pending/approve", scope_key)

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        body = _target(scope_key, record_id, actor)
        return _flag(await self._checked("/pending/reject", body), "rejected", "/pending/reject")

    async def expire_pending(self, older_than: float, actor: str = "system") -> int:
        body: dict[str, object] = {"olderThan": older_than, "actor": validate_actor(actor)}
        reply = await self._checked("/pending/expire", body)
        return count_of(reply, "expired", "/pending/expire")

    # --- edits, history, the curation log ------------------------------------------------------------

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, *, typed_in: OriginLabel = MACHINE_LABEL
    ) -> MemoryRecord | None:
        """The new text redacted here, so a secret typed into an edit never crosses the wire."""
        redacted = text_from_wire(redact_secrets(text_from_wire(text, "text")), "text")
        body = {
            **_target(scope_key, record_id, actor),
            "text": redacted,
            "typedIn": typed_in_to_wire(typed_in),
        }
        return _changed(await self._checked("/records/edit", body), "edited", "/records/edit", scope_key)

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        reply = await self._checked("/records/history", {"scopeKey": scope_key, "id": record_id})
        raw = reply.get("versions")
        if not isinstance(raw, builtins.list):
            raise MemoryStoreError("memory service /records/history: reply has no versions array", status=200)
        try:  # a history with a version missing would tell a different story: all of it or none
            versions = [version_from_wire(item, f"versions[{i}]") for i, item in enumerate(raw)]
        except WireError as exc:
            raise MemoryStoreError(f"memory service /records/history: {exc}", status=200) from None
        if any(version.scope_key != scope_key for version in versions):
            raise MemoryStoreError("memory service /records/history: a version of another scope", status=200)
        return versions

    async def record_curation(self, entry: CurationEntry) -> None:
        """Refused here (ValueError naming the field) by the stores' own rule, before any request."""
        await self._checked("/curation/record", entry_to_wire(validate_entry(entry)))

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        limit = log_limit(limit)
        if not limit:
            return []
        body: dict[str, object] = {"scopeKey": scope_key, "id": record_id, "limit": limit}
        raw = entries_of(await self._checked("/curation/log", body), "/curation/log")
        entries = well_formed(raw, entry_from_wire, lambda entry: entry.scope_key == scope_key)
        if dropped := len(raw) - len(entries):
            log.warning("memory.curation_log_dropped_entries", scope_key=scope_key, dropped=dropped)
        return entries

    # --- consolidation -------------------------------------------------------------------------------

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        reply = await self._checked("/records/active", {"scopeKey": scope_key})
        return _records(reply, scope_key, "/records/active")

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        """In requests of at most `MAX_REFS` duplicates (each merge stands on its own)."""
        ids = builtins.list(dict.fromkeys(duplicate_ids))
        merged = 0
        for start in range(0, len(ids), MAX_REFS):
            body: dict[str, object] = {
                "scopeKey": scope_key,
                "survivorId": survivor_id,
                "duplicateIds": ids[start : start + MAX_REFS],
                "actor": validate_actor(actor),
            }
            merged += count_of(await self._checked("/records/merge", body), "merged", "/records/merge")
        return merged


def _shared_scope_key(value: object) -> str:
    """A shared scope's key from a reply; WireError for anything else (a person's own among them)."""
    try:
        key = validate_scope_key(value)
    except ValueError as error:
        raise WireError(str(error)) from None
    if not is_shared(key):
        raise WireError("a person's own scope is never a review scope")
    return key


def _target(scope_key: str, record_id: str, actor: str) -> dict[str, object]:
    """The body of an action on one record; the actor refused here as every store refuses it."""
    return {"scopeKey": scope_key, "id": record_id, "actor": validate_actor(actor)}


def _records(reply: dict[str, Any], scope_key: str, route: str) -> builtins.list[MemoryRecord]:
    try:
        records, dropped = records_of(reply, scope_key)
    except CallFailed as failure:
        raise MemoryStoreError(f"memory service {route}: {failure.reason}", status=200) from None
    if dropped:
        log.warning("memory.curation_dropped_records", route=route, scope_key=scope_key, dropped=dropped)
    return records


def _flag(reply: dict[str, Any], name: str, route: str) -> bool:
    value = reply.get(name)
    if not isinstance(value, bool):
        raise MemoryStoreError(f"memory service {route}: reply has no boolean '{name}'", status=200)
    return value


def _changed(reply: dict[str, Any], name: str, route: str, scope_key: str) -> MemoryRecord | None:
    """An approve's or edit's record, None when there was nothing to change."""
    if not _flag(reply, name, route):
        return None
    try:
        record = record_from_wire(reply.get("record"))
    except WireError as exc:
        raise MemoryStoreError(f"memory service {route}: {exc}", status=200) from None
    if record.scope_key != scope_key:
        raise MemoryStoreError(f"memory service {route}: a record of another scope", status=200)
    return record
