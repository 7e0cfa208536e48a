"""The reading and erasing half of the memory service's client as a backend (`ReadBackend`): each
primitive one route of the service (memory/service/app.py).

The store front has checked the arguments, clamped the limits and deduplicated the ids and messages;
the service's own store, behind its own front, ranks by its ranking and keeps its retention. So the
cutoffs the front hands a backend are not sent (it hands this one none), and `terms` is not either:
the service derives its own from the query.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator, Sequence

from memory.ranking.embedder import Embedder
from memory.rules.person import PersonRename
from memory.rules.scope import is_shared, validate_scope_key
from memory.stores.http.calls import ServiceCalls
from memory.stores.http.replies import (
    array_of,
    count_of,
    dropped,
    flag_of,
    ranked_scopes,
    records_of,
    well_formed,
)
from memory.types import (
    AuditQuery,
    EraseReason,
    MemoryRecord,
    MemoryStoreError,
    MemoryUnavailable,
    Ranked,
    ReadAudit,
    SourceLink,
)
from memory.wire import (
    MAX_SCOPES,
    WireError,
    audit_from_wire,
    audit_query_to_wire,
    audit_to_wire,
    claim_to_wire,
    link_to_wire,
)


@contextlib.contextmanager
def advisory() -> Iterator[None]:
    """Retrieval over the wire is advisory (spec §19): whatever fails — no answer, a refusal, the
    service's own failure, a reply that is no records — reads as the service out of reach, so the
    front answers nothing with one `memory.retrieve_failed` warning naming it. Every other route
    raises its failure: a person asked, and a silent empty answer would be a lie."""
    try:
        yield
    except MemoryUnavailable:
        raise
    except MemoryStoreError as error:
        raise MemoryUnavailable(str(error), status=error.status) from None


class HttpReads:
    """`ReadBackend` over the service's data routes; `_service` makes the round trips."""

    _service: ServiceCalls

    async def rank(
        self, scope_key: str, query: str, terms: Sequence[str], limit: int
    ) -> builtins.list[Ranked]:
        """`/retrieve`, the route a retrieve has always taken (the service's store answers it as its
        own retrieve does). It answers the records alone: each comes with relevance 0.0, as the
        front's retrieve reads only the records (`rank_many` answers the real ones)."""
        body: dict[str, object] = {"scopeKey": scope_key, "query": query, "limit": limit}
        with advisory():
            records = records_of(await self._service.post("/retrieve", body), scope_key, "/retrieve")
        return [Ranked(record, 0.0) for record in records]

    async def rank_many(
        self, scope_keys: Sequence[str], query: str, terms: Sequence[str], limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """In requests of at most `MAX_SCOPES` scopes (what the service takes), each ranked on its own."""
        found: dict[str, builtins.list[Ranked]] = {}
        for start in range(0, len(scope_keys), MAX_SCOPES):
            keys = builtins.list(scope_keys[start : start + MAX_SCOPES])
            body: dict[str, object] = {"scopeKeys": keys, "query": query, "limit": limit}
            with advisory():
                reply = await self._service.post("/retrieve_many", body)
                found.update(ranked_scopes(reply, keys, "/retrieve_many"))
        return found

    async def list_records(
        self, scope_key: str, limit: int, query: str | None, cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        body: dict[str, object] = {"scopeKey": scope_key, "limit": limit}
        if query is not None:
            body["query"] = query
        return records_of(await self._service.post("/list", body), scope_key, "/list")

    async def fetch(
        self, scope_key: str, record_ids: Sequence[str], cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        body: dict[str, object] = {"scopeKey": scope_key, "ids": builtins.list(record_ids)}
        return records_of(await self._service.post("/fetch", body), scope_key, "/fetch")

    async def forget(self, scope_key: str, record_id: str) -> bool:
        reply = await self._service.post("/forget", {"scopeKey": scope_key, "id": record_id})
        return flag_of(reply, "forgotten", "/forget")

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        reply = await self._service.post("/erase-scope", {"scopeKey": scope_key, "reason": reason})
        return count_of(reply, "erased", "/erase-scope")

    async def erase_expired(self) -> int:
        """The service's sweep, by the service's retention."""
        return count_of(await self._service.post("/erase-expired", {}), "erased", "/erase-expired")

    async def link_sources(self, link: SourceLink) -> None:
        await self._service.post("/sources/link", link_to_wire(link))

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        body: dict[str, object] = {"messages": builtins.list(messages), "reason": reason}
        return count_of(await self._service.post("/sources/erase", body), "erased", "/sources/erase")

    async def pseudonymize(self, rename: PersonRename) -> int:
        route = "/erase-person/pseudonymize"
        body: dict[str, object] = {"personKey": rename.person_key, "pseudonym": rename.pseudonym}
        return count_of(await self._service.post(route, body), "renamed", route)

    async def record_read(self, entry: ReadAudit, cutoff: float) -> None:
        await self._service.post("/audit/record", audit_to_wire(entry))

    async def read_audit(self, query: AuditQuery, cutoff: float) -> builtins.list[ReadAudit]:
        reply = await self._service.post("/audit/query", audit_query_to_wire(query))
        raw = array_of(reply, "entries", "/audit/query")
        entries = well_formed(raw, audit_from_wire)
        dropped("/audit/query", len(raw) - len(entries))
        return entries

    async def claim(self, key: str, ttl_seconds: float) -> bool:
        reply = await self._service.post("/events/claim", claim_to_wire(key, ttl_seconds))
        return flag_of(reply, "claimed", "/events/claim")

    async def scope_keys(self) -> builtins.list[str]:
        """The scopes the service lists to a client: its shared ones (`/pending/scopes`), where
        records wait for review. It lists no person's own scope; what walks every scope (reindex,
        the DM migration) runs on the service's host (`maintenance()` is None here)."""
        raw = array_of(await self._service.post("/pending/scopes", {}), "scopeKeys", "/pending/scopes")
        keys = well_formed(raw, _shared_scope_key)
        dropped("/pending/scopes", len(raw) - len(keys))
        return keys

    async def unreadable_scopes(self) -> builtins.list[str]:
        """None known here: the service's own log names a scope file it cannot read."""
        return []

    async def reindex_batch(self, scope_key: str, embedder: Embedder, batch: int) -> tuple[int, int]:
        raise _on_the_services_host("reindex")

    async def foreign_vectors(self, model: str) -> int:
        raise _on_the_services_host("foreign_vectors")


def _on_the_services_host(what: str) -> MemoryStoreError:
    """Never reached through the front (this store has no embedder): the vectors are the service's."""
    return MemoryStoreError(f"{what} runs on the memory service's host, where the vectors are")


def _shared_scope_key(value: object) -> str:
    """A shared scope's key from a reply; WireError for anything else (a person's own among them)."""
    try:
        key = validate_scope_key(value)
    except ValueError as error:
        raise WireError(str(error)) from None
    if not is_shared(key):
        raise WireError("a person's own scope is never a review scope")
    return key
