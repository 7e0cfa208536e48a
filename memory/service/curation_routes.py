"""The memory service's curation routes: the review queue, edits and their history, the curation log,
consolidation's reads and merges.

Each runs behind the same endpoint as every data route (bearer token, size fence, one
`memory.service.request` log line and the request metrics), validates its whole body before it touches
the store, and is refused with a 501 naming the store when the service's store is not a CuratingStore:
a store that cannot keep a review queue must not seem to have an empty one.

Record text leaves redacted, like every other reply's, but is never put in the redaction cache: these
are rare reads by an admin, and text that is pending or superseded must not outlive its erasure in
memory. Each change drops what the cache holds for the records it changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memory.rules.curation import validate_entry
from memory.rules.redact import redact_record, redact_secrets
from memory.service import checks
from memory.service.checks import Handler, LogFields, Refusal
from memory.service.redact_cache import RedactionCache
from memory.stores.contract import CuratingStore, MemoryStore
from memory.types import MemoryRecord, RecordVersion, WriteResult
from memory.wire import (
    MAX_REFS,
    JsonObject,
    actor_from_wire,
    entry_from_wire,
    entry_to_wire,
    epoch_from_wire,
    record_to_wire,
    text_from_wire,
    typed_in_from_wire,
    version_to_wire,
    write_result_to_wire,
)
from ops.metrics import Metrics

Endpoint = Callable[[Request], Awaitable[Response]]
Body = dict[str, object]


class CurationRoutes:
    """The curation routes over the service's store; `routes(endpoint)` mounts them."""

    def __init__(self, store: MemoryStore, metrics: Metrics, redaction: RedactionCache) -> None:
        self._store = store.curation()
        self._store_name = type(store).__name__
        self._metrics = metrics
        self._redaction = redaction

    def routes(self, endpoint: Callable[[str, Handler], Endpoint]) -> list[Route]:
        handlers: dict[str, Handler] = {
            "/pending/write": self.write_pending,
            "/pending/list": self.pending,
            "/pending/scopes": self.review_scopes,
            "/pending/approve": self.approve,
            "/pending/reject": self.reject,
            "/pending/expire": self.expire_pending,
            "/records/edit": self.edit,
            "/records/history": self.history,
            "/records/active": self.active_records,
            "/records/merge": self.merge,
            "/curation/record": self.record_curation,
            "/curation/log": self.curation_log,
        }
        return [Route(path, endpoint(path, handler), methods=["POST"]) for path, handler in handlers.items()]

    def _curating(self) -> CuratingStore:
        """The store, once the body is valid; a 501 naming it when it cannot curate."""
        if self._store is None:
            raise Refusal(501, f"{self._store_name} cannot curate memory (review, edit, history, merge)")
        return self._store

    @staticmethod
    def _cap(cap: int | None, fields: LogFields) -> int | None:
        """A write carries the caller's per-scope cap; so do a pending write and an approval (both
        may evict). None: the store's own."""
        if cap is not None:
            fields["cap"] = cap
        return cap

    def _count(self, action: str, n: int = 1) -> None:
        if n:
            self._metrics.memory_curations.labels(action).inc(n)

    # --- the review queue --------------------------------------------------------------------------

    async def write_pending(self, body: Body, fields: LogFields) -> Body:
        scope_key = checks.scope_key(body, fields)
        candidates = checks.candidates(body)
        cap = checks.cap(body.get("cap"))
        fields["candidates"] = len(candidates)
        store = self._curating()
        try:  # a restatement folds into an active record; a pending one beyond the cap expires
            result: WriteResult = await store.write_pending(scope_key, candidates, cap=self._cap(cap, fields))
        finally:
            self._redaction.forget_scope(scope_key)
        self._metrics.memory_writes.labels("pending").inc(result.inserted)
        self._metrics.memory_writes.labels("deduped").inc(result.deduped)
        fields.update(inserted=result.inserted, deduped=result.deduped, evicted=result.evicted)
        return write_result_to_wire(result)

    async def pending(self, body: Body, fields: LogFields) -> Body:
        scope_key = checks.scope_key(body, fields)
        limit = checks.limit(body.get("limit"))
        records = await self._curating().pending(scope_key, limit)
        fields["records"] = len(records)
        return {"records": await redacted_uncached(records)}

    async def review_scopes(self, body: Body, fields: LogFields) -> Body:
        keys = await self._curating().review_scopes()
        fields["scopes"] = len(keys)
        return {"scopeKeys": keys}

    async def approve(self, body: Body, fields: LogFields) -> Body:
        scope_key, record_id, actor = _target(body, fields)
        cap = checks.cap(body.get("cap"))
        store = self._curating()
        try:  # approval may supersede and evict, as a write would
            record = await store.approve(scope_key, record_id, actor, cap=self._cap(cap, fields))
        finally:
            self._redaction.forget_scope(scope_key)
        fields["approved"] = record is not None
        if record is None:
            return {"approved": False}
        self._count("approved")
        return {"approved": True, "record": (await redacted_uncached([record]))[0]}

    async def reject(self, body: Body, fields: LogFields) -> Body:
        scope_key, record_id, actor = _target(body, fields)
        try:
            rejected = await self._curating().reject(scope_key, record_id, actor)
        finally:
            self._redaction.forget(scope_key, record_id)
        fields["rejected"] = rejected
        self._count("rejected", int(rejected))
        return {"rejected": rejected}

    async def expire_pending(self, body: Body, fields: LogFields) -> Body:
        older_than = checks.parsed(lambda v: epoch_from_wire(v, "olderThan"), body.get("olderThan"))
        actor = _actor(body, fields)
        # Pending text never enters the redaction cache (see the module's docstring): nothing to drop.
        expired = await self._curating().expire_pending(older_than, actor)
        fields["expired"] = expired
        self._count("expired", expired)
        return {"expired": expired}

    # --- edits, history, the curation log ------------------------------------------------------------

    async def edit(self, body: Body, fields: LogFields) -> Body:
        scope_key, record_id, actor = _target(body, fields)
        text = checks.parsed(lambda v: text_from_wire(v, "text"), body.get("text"))
        typed_in = checks.parsed(typed_in_from_wire, body.get("typedIn"))
        try:
            record = await self._curating().edit(scope_key, record_id, text, actor, typed_in=typed_in)
        finally:
            self._redaction.forget(scope_key, record_id)
        fields["edited"] = record is not None
        if record is None:
            return {"edited": False}
        fields["new_id"] = record.id
        self._count("edited")
        return {"edited": True, "record": (await redacted_uncached([record]))[0]}

    async def history(self, body: Body, fields: LogFields) -> Body:
        scope_key = checks.scope_key(body, fields)
        record_id = checks.record_id(body.get("id"))
        fields["id"] = record_id
        versions = await self._curating().history(scope_key, record_id)
        fields["versions"] = len(versions)
        redacted = await asyncio.to_thread(_redact_versions, versions)
        return {"versions": [version_to_wire(version) for version in redacted]}

    async def record_curation(self, body: Body, fields: LogFields) -> Body:
        entry = checks.parsed(entry_from_wire, body)
        checks.scope_key(body, fields)
        checks.record_id(entry.record_id, "entry.recordId")
        if entry.related_id is not None:
            checks.record_id(entry.related_id, "entry.relatedId")
        try:  # the stores' own rule: a record id of the entry's scope, among others
            validate_entry(entry)
        except ValueError as exc:
            raise Refusal(400, f"entry.{exc}") from None
        await self._curating().record_curation(entry)
        fields.update(id=entry.record_id, action=entry.action, actor=entry.actor)
        return {"ok": True}

    async def curation_log(self, body: Body, fields: LogFields) -> Body:
        scope_key = checks.scope_key(body, fields)
        record_id = checks.record_id(body.get("id"))
        limit = checks.limit(body.get("limit"))
        fields["id"] = record_id
        entries = await self._curating().curation_log(scope_key, record_id, limit)
        fields["entries"] = len(entries)
        return {"entries": [entry_to_wire(entry) for entry in entries]}

    # --- consolidation -------------------------------------------------------------------------------

    async def active_records(self, body: Body, fields: LogFields) -> Body:
        scope_key = checks.scope_key(body, fields)
        records = await self._curating().active_records(scope_key)
        fields["records"] = len(records)
        return {"records": await redacted_uncached(records)}

    async def merge(self, body: Body, fields: LogFields) -> Body:
        scope_key = checks.scope_key(body, fields)
        survivor = checks.record_id(body.get("survivorId"), "survivorId")
        raw = body.get("duplicateIds")
        if not isinstance(raw, list) or len(raw) > MAX_REFS:
            raise Refusal(400, f"duplicateIds must be an array of at most {MAX_REFS} ids")
        duplicates = [checks.record_id(item, f"duplicateIds[{i}]") for i, item in enumerate(raw)]
        actor = _actor(body, fields)
        fields.update(id=survivor, duplicates=len(duplicates))
        try:
            merged = await self._curating().merge(scope_key, survivor, duplicates, actor)
        finally:
            self._redaction.forget_scope(scope_key)
        fields["merged"] = merged
        self._count("merged", merged)
        return {"merged": merged}


def _actor(body: Body, fields: LogFields) -> str:
    actor: str = checks.parsed(actor_from_wire, body.get("actor"))
    fields["actor"] = actor
    return actor


def _target(body: Body, fields: LogFields) -> tuple[str, str, str]:
    """The scope, record id and actor of an action on one record."""
    scope_key = checks.scope_key(body, fields)
    record_id = checks.record_id(body.get("id"))
    fields["id"] = record_id
    return scope_key, record_id, _actor(body, fields)


async def redacted_uncached(records: Sequence[MemoryRecord]) -> list[JsonObject]:
    """Records on their way out, redacted on a worker thread (CPU work on stored text), not cached."""
    if not records:
        return []
    redacted = await asyncio.to_thread(lambda: [redact_record(record) for record in records])
    return [record_to_wire(record) for record in redacted]


def _redact_versions(versions: Sequence[RecordVersion]) -> list[RecordVersion]:
    return [
        version if version.text is None else replace(version, text=redact_secrets(version.text))
        for version in versions
    ]
