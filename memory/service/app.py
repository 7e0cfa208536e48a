"""The memory service: one durable store shared over HTTP by several bot processes.

`create_app(store, token)` builds a Starlette app over any store that accepts a per-batch cap. Every
data route checks, in this order and before the body is read: route (404) and method (405), the bearer
token (401, constant-time, fail closed on an empty token), then the size fence (411/413). Only then is
the body read and parsed, and every field validated (400 naming the field) before the store is touched.
The store's failure is a 500, its storage out of reach (`MemoryUnavailable`) a 503: the bot's client
reads that as the front reads a store out of reach (memory/stores/http/calls.py).
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import orjson
import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memory.rules.person import logged_scope
from memory.service import checks
from memory.service.checks import Handler, LogFields, Refusal
from memory.service.curation_routes import CurationRoutes, redacted_uncached
from memory.service.redact_cache import RedactionCache
from memory.stores.contract import MemoryStore
from memory.types import MAX_LIMIT, MemoryRecord, MemoryUnavailable
from memory.wire import (
    JsonObject,
    audit_from_wire,
    audit_query_from_wire,
    audit_to_wire,
    claim_from_wire,
    erase_reason_from_wire,
    link_from_wire,
    messages_from_wire,
    ranked_to_wire,
    record_to_wire,
    write_result_to_wire,
)
from ops.metrics import CONTENT_TYPE, METRICS_PATH, OTHER_ROUTE, Metrics, scrape_allowed
from ops.tracing import server_span

log = structlog.get_logger("memory.service")

MAX_BODY_BYTES = 512 * 1024
_DIGITS = re.compile(r"[0-9]+")

# Why the store cannot write right now, or None when it can (/readyz).
ReadinessProbe = Callable[[], Awaitable[str | None]]
# How long one probe's verdict answers /readyz: the endpoint is open to anyone, and a probe costs a
# file written and synced (SQLite) or a connection to the server (PostgreSQL).
READY_CACHE_SECONDS = 1.0
NO_TOKEN = "no data token is set: every data request is refused"


class JsonReply(JSONResponse):
    """Every reply's JSON, encoded by orjson: encoding eight records is on every /retrieve's path."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def create_app(
    store: MemoryStore,
    token: str | None,
    *,
    metrics: Metrics | None = None,
    metrics_token: str | None = None,
    redaction: RedactionCache | None = None,
    ready: ReadinessProbe | None = None,
) -> Starlette:
    """The service over `store`; `token` empty or None means every data request is refused (401).

    `/metrics` answers only `metrics_token` (ops/metrics.py), never the data token. `redaction` is the
    outgoing records' redaction cache (a fresh one unless given). `/healthz` is liveness (the process
    answers); `/readyz` is readiness: 503 while `ready` says the store cannot write, or while there is
    no token (the service refuses every data request), so a load balancer sends nothing there.
    """
    if "cap" not in inspect.signature(store.write).parameters:
        raise TypeError(f"{type(store).__name__}.write must accept cap= (the wire's per-batch cap)")
    metrics = metrics if metrics is not None else Metrics()
    redaction = redaction if redaction is not None else RedactionCache()
    service = _Service(store, token, metrics, redaction)
    curation = CurationRoutes(store, metrics, redaction)
    routes = [
        # The reads first: the router tries each route in turn, and they are nearly every request.
        Route("/retrieve", service.endpoint("/retrieve", service.retrieve), methods=["POST"]),
        Route("/retrieve_many", service.endpoint("/retrieve_many", service.retrieve_many), methods=["POST"]),
        Route("/healthz", _healthz, methods=["GET"]),
        Route("/readyz", _Readiness(ready, token_set=bool(token)).endpoint, methods=["GET"]),
        Route(METRICS_PATH, service.scrape(metrics_token), methods=["GET"]),
        Route("/write", service.endpoint("/write", service.write), methods=["POST"]),
        Route("/list", service.endpoint("/list", service.list), methods=["POST"]),
        Route("/forget", service.endpoint("/forget", service.forget), methods=["POST"]),
        Route("/erase-scope", service.endpoint("/erase-scope", service.erase_scope), methods=["POST"]),
        Route("/erase-expired", service.endpoint("/erase-expired", service.erase_expired), methods=["POST"]),
        Route(
            "/erase-person/pseudonymize",
            service.endpoint("/erase-person/pseudonymize", service.pseudonymize_person),
            methods=["POST"],
        ),
        Route("/sources/link", service.endpoint("/sources/link", service.link_sources), methods=["POST"]),
        Route("/sources/erase", service.endpoint("/sources/erase", service.erase_sources), methods=["POST"]),
        Route("/fetch", service.endpoint("/fetch", service.fetch), methods=["POST"]),
        Route("/audit/record", service.endpoint("/audit/record", service.record_read), methods=["POST"]),
        Route("/audit/query", service.endpoint("/audit/query", service.read_audit), methods=["POST"]),
        Route("/events/claim", service.endpoint("/events/claim", service.claim_event), methods=["POST"]),
        *curation.routes(service.endpoint),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: service.http_error})
    app.router.redirect_slashes = False  # /write/ is not /write: 404, never a redirect
    return app


async def _healthz(request: Request) -> Response:
    return JsonReply({"ok": True})


class _Readiness:
    """`/readyz`: the probe's verdict, at most one probe a `READY_CACHE_SECONDS` however many ask (the
    ones asking while it runs share it). Open like /healthz, so the reply names no path; the reason is
    logged once each time readiness changes, not on every probe."""

    def __init__(self, probe: ReadinessProbe | None, *, token_set: bool) -> None:
        self._probe = probe
        self._token_set = token_set
        self._failing: str | None = None
        self._checked_at = float("-inf")
        self._probing = asyncio.Lock()

    async def _verdict(self) -> str | None:
        if not self._token_set:
            return NO_TOKEN
        if self._probe is None:
            return None
        async with self._probing:
            if time.monotonic() - self._checked_at >= READY_CACHE_SECONDS:
                self._record(await self._probe())
                self._checked_at = time.monotonic()
        return self._failing

    async def endpoint(self, request: Request) -> Response:
        problem = await self._verdict()
        self._record(problem)
        if problem is not None:
            error = NO_TOKEN if problem == NO_TOKEN else "the store cannot write"
            return JsonReply({"ok": False, "error": error}, status_code=503)
        return JsonReply({"ok": True})

    def _record(self, problem: str | None) -> None:
        if problem != self._failing:
            if problem is None:
                log.info("memory.service_ready")
            else:
                log.warning("memory.service_not_ready", reason=problem)
            self._failing = problem


class _Service:
    def __init__(
        self, store: MemoryStore, token: str | None, metrics: Metrics, redaction: RedactionCache
    ) -> None:
        self._store = store
        self._token = token.encode("utf-8") if token else b""
        self._metrics = metrics
        self._redaction = redaction

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """Routing refusals (404, 405) speak JSON like every other answer."""
        assert isinstance(exc, HTTPException)
        reason = {404: "not found", 405: "method not allowed"}.get(exc.status_code, exc.detail)
        self._metrics.observe_request("memory", OTHER_ROUTE, exc.status_code, 0.0)
        return JsonReply({"error": reason}, status_code=exc.status_code, headers=exc.headers)

    def scrape(self, metrics_token: str | None) -> Callable[[Request], Awaitable[Response]]:
        async def scrape(request: Request) -> Response:
            if not scrape_allowed(request.headers.get("authorization"), metrics_token):
                return JsonReply({"error": "unauthorized"}, status_code=401)
            return Response(self._metrics.render(), media_type=CONTENT_TYPE)

        return scrape

    def endpoint(self, route: str, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            fields: LogFields = {}
            with server_span("POST", route, request.headers) as span:
                payload, status = await self._answer(request, handler, route, fields)
                span.set_attribute("http.response.status_code", status)
                records = fields.get("records")
                if isinstance(records, int):
                    span.set_attribute("memory.records", records)
            elapsed = time.perf_counter() - started
            self._metrics.observe_request("memory", route, status, elapsed)
            log.info(
                "memory.service.request",
                route=route,
                status=status,
                duration_ms=round(elapsed * 1000, 3),
                **fields,
            )
            return JsonReply(payload, status_code=status)

        return endpoint

    async def _answer(
        self, request: Request, handler: Handler, route: str, fields: LogFields
    ) -> tuple[dict[str, object], int]:
        try:
            self._authorize(request)
            body = await _read_body(request)
            return await handler(body, fields), 200
        except Refusal as refusal:
            fields["error"] = refusal.reason
            if refusal.status == 401:
                self._metrics.memory_denials.labels("unauthorized").inc()
            return {"error": refusal.reason}, refusal.status
        except ValueError as exc:  # the store refused what the wire rules let through
            reason = str(exc)[:300]
            fields["error"] = reason
            return {"error": reason}, 400
        except MemoryUnavailable as exc:  # its storage out of reach: the caller may try again later
            log.warning("memory.service.store_unavailable", route=route, error_type=type(exc).__name__)
            fields["error"] = "store unavailable"
            return {"error": "store unavailable"}, 503
        except Exception as exc:  # a store failure: answer 500, keep serving
            log.error("memory.service.store_failed", route=route, error_type=type(exc).__name__)
            return {"error": "store failure"}, 500

    def _authorize(self, request: Request) -> None:
        """`Authorization: Bearer <token>`, compared in constant time; no configured token → nobody."""
        header = request.headers.get("authorization", "")
        scheme, _, presented = header.partition(" ")
        if not self._token or scheme.lower() != "bearer" or not presented:
            raise Refusal(401, "unauthorized")
        # Header values arrive latin-1 decoded: encoding back recovers the bytes that were sent.
        if not hmac.compare_digest(presented.encode("latin-1"), self._token):
            raise Refusal(401, "unauthorized")

    async def _redacted_wire(self, records: Sequence[MemoryRecord], since: int) -> list[JsonObject]:
        """Every record redacted on its way out (remembered per record: memory/redact_cache.py; `since`:
        the cache's epoch taken before the store was read)."""
        return [record_to_wire(record) for record in await self._redaction.redact(records, since)]

    def _count_read(self, fields: LogFields, records: int) -> None:
        """One retrieval read: its record count in the request's log line and the metrics."""
        fields["records"] = records
        self._metrics.memory_reads.inc()
        self._metrics.memory_records_read.inc(records)

    # --- routes: each validates its body fully before touching the store ---------------------------

    async def retrieve(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        scope_key = checks.scope_key(body, fields)
        query = checks.query(body.get("query"), required=True)
        limit = checks.limit(body.get("limit"))
        assert query is not None
        since = self._redaction.epoch
        records = await self._store.retrieve(scope_key, query, limit)
        self._count_read(fields, len(records))
        return {"records": await self._redacted_wire(records, since)}

    async def retrieve_many(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        """Up to four scopes in one round trip (the read path's org + repo + channel + user)."""
        scope_keys = checks.scope_keys(body, fields)
        query = checks.query(body.get("query"), required=True)
        limit = checks.limit(body.get("limit"))
        assert query is not None
        since = self._redaction.epoch
        found = await self._store.retrieve_many(scope_keys, query, limit)
        every = [r.record for ranked in found.values() for r in ranked]
        self._count_read(fields, len(every))
        redacted = iter(await self._redaction.redact(every, since))
        return {
            "scopes": {
                key: [ranked_to_wire(replace(r, record=next(redacted))) for r in ranked]
                for key, ranked in found.items()
            }
        }

    async def write(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        scope_key = checks.scope_key(body, fields)
        candidates = checks.candidates(body)
        cap = checks.cap(body.get("cap"))
        fields["candidates"] = len(candidates)
        if cap is not None:
            fields["cap"] = cap
        try:  # a write may evict, supersede or erase what expired: none of it stays in the cache
            result = await self._store.write(scope_key, candidates, cap=cap)
        finally:
            self._redaction.forget_scope(scope_key)
        for name in ("inserted", "deduped", "superseded"):
            self._metrics.memory_writes.labels(name).inc(getattr(result, name))
        self._metrics.memory_evictions.inc(result.evicted)
        fields.update(
            inserted=result.inserted,
            deduped=result.deduped,
            superseded=result.superseded,
            evicted=result.evicted,
        )
        return write_result_to_wire(result)

    async def list(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        scope_key = checks.scope_key(body, fields)
        limit = checks.limit(body.get("limit"))
        query = checks.query(body.get("query"), required=False)
        fields["filtered"] = query is not None
        since = self._redaction.epoch
        records = await self._store.list(scope_key, limit, query)
        fields["records"] = len(records)
        return {"records": await self._redacted_wire(records, since)}

    async def forget(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        scope_key = checks.scope_key(body, fields)
        record_id = checks.record_id(body.get("id"))
        fields["id"] = record_id
        try:
            forgotten = await self._store.forget(scope_key, record_id)
        finally:
            self._redaction.forget(scope_key, record_id)
        fields["forgotten"] = forgotten
        return {"ok": True, "forgotten": forgotten}

    async def erase_scope(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        scope_key = checks.scope_key(body, fields)
        reason = checks.parsed(erase_reason_from_wire, body.get("reason"))
        del fields["scope_key"]
        fields.update(logged_scope(scope_key, reason))
        try:
            erased = await self._store.erase_scope(scope_key, reason)
        finally:
            self._redaction.forget_scope(scope_key)
        fields.update(reason=reason, erased=erased)
        return {"ok": True, "erased": erased}

    async def pseudonymize_person(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        person_key = checks.person_key(body, fields)
        pseudonym = checks.pseudonym(body.get("pseudonym"))
        renamed = await self._store.pseudonymize_person(person_key, pseudonym)
        fields["renamed"] = renamed
        return {"ok": True, "renamed": renamed}

    async def erase_expired(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        try:
            erased = await self._store.erase_expired()
        finally:
            self._redaction.clear()
        fields["erased"] = erased
        return {"ok": True, "erased": erased}

    async def link_sources(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        link = checks.parsed(link_from_wire, body)
        for key in link.scope_keys:
            checks.scope_key({"scopeKey": key}, {})
        await self._store.link_sources(link)
        fields.update(run_id=link.run_id, messages=len(link.messages))
        return {"ok": True}

    async def erase_sources(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        messages = checks.parsed(messages_from_wire, body.get("messages"))
        reason = checks.parsed(erase_reason_from_wire, body.get("reason"))
        try:
            erased = await self._store.erase_sources(messages, reason)
        finally:
            self._redaction.clear()
        fields.update(messages=len(messages), reason=reason, erased=erased)
        return {"ok": True, "erased": erased}

    async def fetch(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        scope_key = checks.scope_key(body, fields)
        raw = body.get("ids")
        if not isinstance(raw, list) or len(raw) > MAX_LIMIT:
            raise Refusal(400, f"ids must be an array of at most {MAX_LIMIT} ids")
        ids = [checks.record_id(item) for item in raw]
        records = await self._store.fetch(scope_key, ids)
        fields["records"] = len(records)
        # Redacted like every reply, but outside the cache: a fetch returns superseded versions too,
        # whose text an erasure of the chain must not leave behind in memory.
        return {"records": await redacted_uncached(records)}

    async def record_read(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        entry = checks.parsed(audit_from_wire, body)
        await self._store.record_read(entry)
        fields.update(run_id=entry.run_id, records=len(entry.records))
        return {"ok": True}

    async def read_audit(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        query = checks.parsed(audit_query_from_wire, body)
        entries = await self._store.read_audit(query)
        fields["entries"] = len(entries)
        return {"entries": [audit_to_wire(entry) for entry in entries]}

    async def claim_event(self, body: dict[str, object], fields: LogFields) -> dict[str, object]:
        """Slack event dedupe shared by the bot replicas behind this service (memory/rules/claims.py)."""
        key, ttl = checks.parsed(claim_from_wire, body)
        claims = self._store.claims()
        if claims is None:
            raise Refusal(501, f"{type(self._store).__name__} cannot claim events")
        claimed = await claims.claim_event(key, ttl)
        fields["claimed"] = claimed
        return {"claimed": claimed}


async def _read_body(request: Request) -> dict[str, object]:
    """The size fence first (411/413, nothing read yet), then the body, then JSON into an object."""
    if "transfer-encoding" in request.headers:
        raise Refusal(411, "Content-Length is required (no chunked bodies)")
    lengths = request.headers.getlist("content-length")
    if len(lengths) != 1 or not _DIGITS.fullmatch(lengths[0]):
        raise Refusal(411, "Content-Length must be a plain digit string")
    declared = lengths[0].lstrip("0")
    if len(declared) > len(str(MAX_BODY_BYTES)) or int(declared or "0") > MAX_BODY_BYTES:
        raise Refusal(413, f"body must be at most {MAX_BODY_BYTES} bytes")
    limit = int(declared or "0")
    raw = bytearray()
    try:
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limit:
                raise Refusal(413, "body is longer than its Content-Length")
    except ClientDisconnect:
        raise Refusal(400, "body was cut off") from None
    try:  # json.loads of bytes, with one decoder made once instead of one per request
        parsed: Any = _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except (ValueError, RecursionError):
        raise Refusal(400, "body must be valid JSON") from None
    if not isinstance(parsed, dict):
        raise Refusal(400, "body must be a JSON object")
    return parsed


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
