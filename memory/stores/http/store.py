"""The bot's side of the memory service: a MemoryStore over HTTP.

Retrieval is advisory: any failure degrades to `[]` with one warning and never stalls a run beyond the
timeout. Writes, listing, forgetting and every curation call (memory/stores/http/curating.py) raise
`MemoryStoreError` instead — the reflection pass catches and warns, and a human command must never be
shown a silent empty list.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import httpx
import structlog

from memory.rules.arguments import distinct_scopes, fetch_ids, linkable
from memory.rules.claims import validate_claim
from memory.rules.curation import log_limit
from memory.rules.engine import prepare_batch
from memory.rules.scope import validate_scope_key
from memory.stores.contract import CompactingStore, CuratedStore, EventClaims, ScopeMaintenance
from memory.stores.http.curating import CurationClient
from memory.stores.http.replies import (
    CallFailed,
    count_of,
    entries_of,
    ranked_scopes,
    records_of,
    well_formed,
    write_result,
)
from memory.types import (
    AuditQuery,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    MemoryStoreError,
    Ranked,
    ReadAudit,
    SourceLink,
    WriteResult,
)
from memory.wire import (
    MAX_BATCH,
    audit_from_wire,
    audit_query_to_wire,
    audit_to_wire,
    candidate_to_wire,
    claim_to_wire,
    link_to_wire,
)
from ops.tracing import client_span

log = structlog.get_logger("memory.http_store")

T = TypeVar("T")

DEFAULT_TIMEOUT = 5.0
# The scope `open` asks about: a fetch of no ids is authenticated and answered without touching a store.
START_CHECK_SCOPE = "org:switchboard-start-check"


class HttpMemoryStore(CurationClient):
    """One pooled `httpx.AsyncClient` to the memory service; `cap` goes on every write when set."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = DEFAULT_TIMEOUT,
        cap: int | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._cap = cap
        self._timeout = timeout
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    @property
    def cap(self) -> int | None:
        """The per-scope cap sent on every write; None lets the service apply its own default."""
        return self._cap

    @property
    def timeout(self) -> float:
        return self._timeout

    async def open(self) -> None:
        """One authenticated round trip at start-up, so a wrong token or a service that is not there
        is one line now, not a bot that starts and then quietly remembers nothing (retrieval degrades
        to `[]` by design). Raises MemoryStoreError naming what to fix."""
        try:
            await self._call("/fetch", {"scopeKey": START_CHECK_SCOPE, "ids": []})
        except CallFailed as failure:
            where = f"memory.service_url {self.base_url}"
            if failure.status == 401:
                message = f"{where} refused the token (401): set MEMORY_TOKEN to the memory service's token"
            elif failure.status is None:
                message = f"{where}: cannot reach the memory service ({failure.reason})"
            else:
                message = f"{where}: the memory service answered {failure.reason}"
            raise MemoryStoreError(message, status=failure.status) from None

    def curation(self) -> CuratedStore | None:
        return self

    # Each call checks its arguments as the store front does (the same rules), so a caller meets one
    # behaviour whichever store it holds: a malformed scope key raises here, before any round trip.

    async def retrieve(self, scope_key: str, query: str, limit: int) -> builtins.list[MemoryRecord]:
        """Advisory: any failure reads as nothing, with a warning."""
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if not limit:
            return []
        body = {"scopeKey": scope_key, "query": query, "limit": limit}
        read = functools.partial(records_of, scope_key=scope_key)
        return await self._advisory("/retrieve", body, read, [], scope_key=scope_key)

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """One round trip for every scope; advisory like `retrieve`: any failure reads as nothing."""
        keys, limit = distinct_scopes(scope_keys), log_limit(limit)
        if not keys or not limit:
            return {}
        body = {"scopeKeys": keys, "query": query, "limit": limit}
        read = functools.partial(ranked_scopes, scope_keys=keys)
        return await self._advisory("/retrieve_many", body, read, {}, scope_keys=keys)

    async def _advisory(
        self,
        route: str,
        body: dict[str, object],
        read: Callable[[dict[str, Any]], tuple[T, int]],
        nothing: T,
        **scopes: object,
    ) -> T:
        """A read's reply as `read` takes it; a failed call or reply is `nothing`, with a warning, and a
        record dropped from the reply is counted in another."""
        try:
            found, dropped = read(await self._call(route, body))
        except CallFailed as failure:
            log.warning("memory.retrieve_degraded", **scopes, status=failure.status, reason=failure.reason)
            return nothing
        if dropped:
            log.warning("memory.retrieve_dropped_records", **scopes, dropped=dropped)
        return found

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        """`cap` overrides the configured cap for this batch, like every other store's write.

        Validated and redacted here like every store's batch, so a secret never crosses the wire."""
        validate_scope_key(scope_key)
        candidates = prepare_batch(candidates)
        batch_cap = self._cap if cap is None else cap
        total = WriteResult()
        for start in range(0, len(candidates), MAX_BATCH):  # the service takes MAX_BATCH a request
            body: dict[str, object] = {
                "scopeKey": scope_key,
                "records": [candidate_to_wire(c) for c in candidates[start : start + MAX_BATCH]],
            }
            if batch_cap is not None:
                body["cap"] = batch_cap
            total += write_result(await self._checked("/write", body), "/write")
        return total

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if not limit:
            return []
        body: dict[str, object] = {"scopeKey": scope_key, "limit": limit}
        if query is not None:
            body["query"] = query
        return _records_in(await self._checked("/list", body), scope_key, "list")

    async def forget(self, scope_key: str, record_id: str) -> bool:
        validate_scope_key(scope_key)
        reply = await self._checked("/forget", {"scopeKey": scope_key, "id": record_id})
        forgotten = reply.get("forgotten")
        if not isinstance(forgotten, bool):
            raise MemoryStoreError("memory service /forget: reply has no boolean 'forgotten'", status=200)
        return forgotten

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        validate_scope_key(scope_key)
        reply = await self._checked("/erase-scope", {"scopeKey": scope_key, "reason": reason})
        return count_of(reply, "erased", "/erase-scope")

    async def pseudonymize_person(self, person_key: str, pseudonym: str) -> int:
        body: dict[str, object] = {"personKey": person_key, "pseudonym": pseudonym}
        return count_of(
            await self._checked("/erase-person/pseudonymize", body), "renamed", "/erase-person/pseudonymize"
        )

    async def erase_expired(self) -> int:
        return count_of(await self._checked("/erase-expired", {}), "erased", "/erase-expired")

    async def link_sources(self, link: SourceLink) -> None:
        if linkable(link):
            await self._checked("/sources/link", link_to_wire(link))

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        if not messages:
            return 0
        reply = await self._checked("/sources/erase", {"messages": list(messages), "reason": reason})
        return count_of(reply, "erased", "/sources/erase")

    async def fetch(self, scope_key: str, record_ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        ids = fetch_ids(record_ids)
        if not ids:
            return []
        reply = await self._checked("/fetch", {"scopeKey": scope_key, "ids": ids})
        return _records_in(reply, scope_key, "fetch")

    async def record_read(self, entry: ReadAudit) -> None:
        await self._checked("/audit/record", audit_to_wire(entry))

    async def read_audit(self, query: AuditQuery) -> builtins.list[ReadAudit]:
        reply = await self._checked("/audit/query", audit_query_to_wire(query))
        return well_formed(entries_of(reply, "/audit/query"), audit_from_wire)

    def claims(self) -> EventClaims | None:
        return self

    async def claim_event(self, key: str, ttl_seconds: float) -> bool:
        """Once per key across every process behind this memory service (memory/rules/claims.py)."""
        key, ttl = validate_claim(key, ttl_seconds)  # refused here, naming the field, not as a 400
        reply = await self._checked("/events/claim", claim_to_wire(key, ttl))
        claimed = reply.get("claimed")
        if not isinstance(claimed, bool):
            raise MemoryStoreError("memory service /events/claim: reply has no boolean 'claimed'", status=200)
        return claimed

    def compaction(self) -> CompactingStore | None:
        """None: the files are on the service's host (run compact there)."""
        return None

    async def aclose(self) -> None:
        await self._client.aclose()

    def maintenance(self) -> ScopeMaintenance | None:
        """None: the scopes and their vectors live on the service's host (run reindex there)."""
        return None

    async def _checked(self, route: str, body: dict[str, object]) -> dict[str, Any]:
        """A call whose failure a human must see: MemoryStoreError with the status and the reason."""
        try:
            return await self._call(route, body)
        except CallFailed as failure:
            raise MemoryStoreError(
                f"memory service {route} failed: {failure.reason}", status=failure.status
            ) from None

    async def _call(self, route: str, body: dict[str, object]) -> dict[str, Any]:
        """One POST, bounded as a whole by the timeout (httpx's own timeouts are per phase).

        The request is an http.client span whose W3C `traceparent` header makes the service's span
        its child.
        """
        url = self._client.base_url
        with client_span("POST", route, url.host, url.port) as (span, trace_headers):
            try:
                async with asyncio.timeout(self._timeout):
                    response = await self._client.post(route, json=body, headers=trace_headers)
            except (TimeoutError, httpx.TimeoutException):
                span.set_attribute("error.type", "timeout")
                raise CallFailed(None, "timed out") from None
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                span.set_attribute("error.type", type(exc).__name__)
                raise CallFailed(None, f"transport error ({type(exc).__name__})") from None
            span.set_attribute("http.response.status_code", response.status_code)
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if not response.is_success:
            error = reply.get("error") if isinstance(reply, dict) else None
            if not isinstance(error, str) or not error:
                error = response.reason_phrase or "no reason"
            reason = error[:200]
            raise CallFailed(response.status_code, f"{response.status_code} {reason}")
        if not isinstance(reply, dict):
            raise CallFailed(response.status_code, "reply is not a JSON object")
        return reply


def _records_in(reply: dict[str, Any], scope_key: str, route: str) -> builtins.list[MemoryRecord]:
    """A human command's records from the service's reply: a malformed reply is an error (a silent
    empty list would be a lie); a malformed record is dropped with one warning naming the count."""
    try:
        records, dropped = records_of(reply, scope_key)
    except CallFailed as failure:
        raise MemoryStoreError(f"memory service /{route}: {failure.reason}", status=200) from None
    if dropped:
        log.warning(f"memory.{route}_dropped_records", scope_key=scope_key, dropped=dropped)
    return records
