"""HttpMemoryStore against the real service app (httpx ASGI transport) and against misbehaving servers.

Spec rows: "WorkerMemoryStore.retrieve: POSTs /retrieve with bearer + body + timeout; degrades to [] +
warning on non-2xx / non-JSON / transport failure; drops malformed records" (red-verified),
"WorkerMemoryStore.write: POSTs /write; empty batch skips the round trip; failure throws with
status/error", "WorkerMemoryStore.list/forget: … non-2xx THROWS", "WorkerMemoryStore.list sends query only
when a filter is given", "WorkerMemoryStore sends cap on /write when configured and omits it otherwise;
accepts evicted records on the wire".
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from structlog.testing import capture_logs

from memory.ranking.fusion import SPEC
from memory.rules.retention import Retention
from memory.service.app import create_app
from memory.stores.contract import MemoryStore
from memory.stores.http import HttpMemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MAX_SCOPE_CAP, MemoryCandidate, MemoryStoreError, WriteResult
from memory.wire import MAX_QUERY_CHARS, MAX_SCOPES, record_to_wire
from tests.app.runtime_support import app_command, subprocess_env
from tests.fakes.model_server import FakeModelServer
from tests.memory.service_support import TOKEN, free_port, memory_service_process
from tests.memory.store_contract import DAY, FakeClock

SCOPE = "org:acme"
BASE = "http://memory.test"


def candidate(text: str, **extra: Any) -> MemoryCandidate:
    return MemoryCandidate(kind="fact", text=text, source_thread_key="slack:C1:1700000000.1", **extra)


@dataclass
class Sent:
    method: str
    path: str
    headers: httpx.Headers
    body: Any


@dataclass
class Recording(httpx.AsyncBaseTransport):
    """Forwards to a real transport and keeps every request it carried."""

    inner: httpx.AsyncBaseTransport
    sent: list[Sent] = field(default_factory=list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        self.sent.append(
            Sent(request.method, request.url.path, request.headers, json.loads(content) if content else None)
        )
        return await self.inner.handle_async_request(request)


@pytest.fixture
def service_store() -> InProcessMemoryStore:
    return InProcessMemoryStore(cap=500)


@pytest.fixture
def recording(service_store: InProcessMemoryStore) -> Recording:
    return Recording(httpx.ASGITransport(app=create_app(service_store, TOKEN)))


@pytest.fixture
async def store(recording: Recording) -> AsyncIterator[HttpMemoryStore]:
    client = HttpMemoryStore(BASE, TOKEN, timeout=5.0, transport=recording)
    yield client
    await client.aclose()


def fake_service(handler: Callable[[Request], Response | None]) -> httpx.ASGITransport:
    """A tiny stand-in server: every data route answers what `handler` returns."""

    async def endpoint(request: Request) -> Response:
        await request.body()
        reply = handler(request)
        assert reply is not None
        return reply

    paths = ("/retrieve", "/retrieve_many", "/write", "/list", "/forget")
    routes = [Route(path, endpoint, methods=["POST"]) for path in paths]
    return httpx.ASGITransport(app=Starlette(routes=routes))


def fixed(status: int, body: bytes, content_type: str = "application/json") -> httpx.ASGITransport:
    return fake_service(lambda _: Response(body, status_code=status, media_type=content_type))


def wire_record(text: str, n: int, **overrides: Any) -> dict[str, Any]:
    record = {
        "id": f"mem:{SCOPE}:{n}",
        "scopeKey": SCOPE,
        "kind": "fact",
        "text": text,
        "keywords": [],
        "sourceThreadKey": "slack:C1:1",
        "createdAt": 1_700_000_000.0,
        "useCount": 0,
        "status": "active",
    }
    record.update(overrides)
    return record


def test_http_store_satisfies_the_memory_store_protocol() -> None:
    assert isinstance(HttpMemoryStore(BASE, TOKEN), MemoryStore)


# --- against the real service ---------------------------------------------------------------------------


async def test_round_trip_through_the_real_service(store: HttpMemoryStore) -> None:
    result = await store.write(
        SCOPE,
        [
            candidate(
                "We deploy with make ship", keywords=("deploy",), source_run_id="run-1", confidence=0.8
            ),
            candidate("Standup is at nine"),
        ],
    )
    assert result == WriteResult(inserted=2)
    (found,) = await store.retrieve(SCOPE, "how do we deploy", 5)
    assert found.id == "mem:org:acme:1"
    assert found.keywords == ("deploy",)
    assert (found.source_run_id, found.confidence, found.use_count) == ("run-1", 0.8, 1)
    assert found.last_used_at is not None
    listed = await store.list(SCOPE, 10)
    assert [r.id for r in listed] == ["mem:org:acme:2", "mem:org:acme:1"]
    assert listed[0].source_run_id is None and listed[0].confidence is None
    assert await store.forget(SCOPE, "mem:org:acme:2") is True
    assert await store.forget(SCOPE, "mem:org:acme:2") is False
    assert [r.id for r in await store.list(SCOPE, 10)] == ["mem:org:acme:1"]


async def test_the_origin_label_round_trips_through_the_service(store: HttpMemoryStore) -> None:
    scope = "user:slack:U0A"
    labelled = candidate("prefers tabs", origin="dm", origin_conversation="slack:D0A")
    assert await store.write(scope, [labelled, candidate("uses staging")]) == WriteResult(inserted=2)
    listed = {r.text: (r.origin, r.origin_conversation) for r in await store.list(scope, 5)}
    assert listed == {"prefers tabs": ("dm", "slack:D0A"), "uses staging": ("unknown", None)}
    (found,) = await store.retrieve(scope, "tabs", 5)
    assert (found.origin, found.origin_conversation) == ("dm", "slack:D0A")


async def test_retrieve_posts_the_body_with_the_bearer(store: HttpMemoryStore, recording: Recording) -> None:
    await store.retrieve(SCOPE, "deploy", 8)
    (sent,) = recording.sent
    assert (sent.method, sent.path) == ("POST", "/retrieve")
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert sent.body == {"scopeKey": SCOPE, "query": "deploy", "limit": 8}


async def test_the_services_ranking_gates_a_query_never_the_clients() -> None:
    """The service's store ranks by `spec`, where a question word still matches; the client, which
    knows no ranking, sends the query as it is rather than drop it by a ranking of its own."""
    service = InProcessMemoryStore(ranking=SPEC)
    transport = httpx.ASGITransport(app=create_app(service, TOKEN))
    client = HttpMemoryStore(BASE, TOKEN, transport=transport)
    try:
        await client.write(SCOPE, [candidate("the kind of deploy we run")])
        assert [r.text for r in await client.retrieve(SCOPE, "kind", 5)] == ["the kind of deploy we run"]
        assert list(await client.retrieve_many([SCOPE], "kind", 5)) == [SCOPE]
    finally:
        await client.aclose()


async def test_the_services_retention_is_swept_by_the_client_at_start_up() -> None:
    """The client knows no retention of its own: its start-up sweep asks the service, whose store
    erases what its own retention says has expired."""
    clock = FakeClock()
    service = InProcessMemoryStore(clock=clock, retention=Retention(ttl_days=1.0))
    client = HttpMemoryStore(BASE, TOKEN, transport=httpx.ASGITransport(app=create_app(service, TOKEN)))
    try:
        await client.write(SCOPE, [candidate("we deploy with make ship")])
        clock.advance(2 * DAY)
        assert await client.erase_expired() == 1
    finally:
        await client.aclose()


async def test_write_sends_camel_case_candidates_omitting_unset_optionals(
    store: HttpMemoryStore, recording: Recording
) -> None:
    await store.write(SCOPE, [candidate("bare"), candidate("full", keywords=("k",), supersedes="mem:x:1")])
    (sent,) = recording.sent
    assert sent.path == "/write"
    assert sent.body == {
        "scopeKey": SCOPE,
        "records": [
            {"kind": "fact", "text": "bare", "sourceThreadKey": "slack:C1:1700000000.1"},
            {
                "kind": "fact",
                "text": "full",
                "sourceThreadKey": "slack:C1:1700000000.1",
                "keywords": ["k"],
                "supersedes": "mem:x:1",
            },
        ],
    }
    assert "cap" not in sent.body  # unset → the service's own default


async def test_an_empty_write_batch_makes_no_request(store: HttpMemoryStore, recording: Recording) -> None:
    assert await store.write(SCOPE, []) == WriteResult()
    assert recording.sent == []


async def test_cap_is_sent_on_every_write_when_configured_and_the_service_applies_it(
    recording: Recording, service_store: InProcessMemoryStore
) -> None:
    capped = HttpMemoryStore(BASE, TOKEN, cap=2, transport=recording)
    try:
        first = await capped.write(SCOPE, [candidate("one"), candidate("two")])
        second = await capped.write(SCOPE, [candidate("three")])
    finally:
        await capped.aclose()
    assert [s.body["cap"] for s in recording.sent] == [2, 2]
    assert (first.evicted, second.evicted) == (0, 1)
    assert [r.status for r in service_store.records(SCOPE)].count("active") == 2


async def test_a_per_call_cap_overrides_the_configured_one(recording: Recording) -> None:
    capped = HttpMemoryStore(BASE, TOKEN, cap=300, transport=recording)
    try:
        await capped.write(SCOPE, [candidate("one")], cap=7)
        await capped.write(SCOPE, [candidate("two")])
    finally:
        await capped.aclose()
    assert [s.body["cap"] for s in recording.sent] == [7, 300]


async def test_list_sends_query_only_when_a_filter_is_given(
    store: HttpMemoryStore, recording: Recording
) -> None:
    await store.list(SCOPE, 20)
    await store.list(SCOPE, 20, "deploy")
    await store.list(SCOPE, 20, "")
    assert [s.body for s in recording.sent] == [
        {"scopeKey": SCOPE, "limit": 20},
        {"scopeKey": SCOPE, "limit": 20, "query": "deploy"},
        {"scopeKey": SCOPE, "limit": 20, "query": ""},
    ]


async def test_forget_posts_scope_and_id(store: HttpMemoryStore, recording: Recording) -> None:
    assert await store.forget(SCOPE, "mem:org:acme:9") is False
    assert recording.sent[0].body == {"scopeKey": SCOPE, "id": "mem:org:acme:9"}


async def test_a_secret_is_redacted_before_it_crosses_the_wire(
    store: HttpMemoryStore, recording: Recording, service_store: InProcessMemoryStore
) -> None:
    token = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
    await store.write(SCOPE, [candidate(f"deploy with {token}", keywords=(token,))])
    assert token not in json.dumps(recording.sent[0].body)
    assert recording.sent[0].body["records"][0]["text"] == "deploy with [REDACTED]"
    assert [r.text for r in service_store.records(SCOPE)] == ["deploy with [REDACTED]"]


async def test_an_invalid_candidate_is_refused_before_any_request(
    store: HttpMemoryStore, recording: Recording
) -> None:
    with pytest.raises(ValueError, match=r"candidates\[0\]\.text must not contain NUL"):
        await store.write(SCOPE, [candidate("a\x00b")])
    assert recording.sent == []


async def test_a_service_refusal_raises_with_status_and_the_services_reason(store: HttpMemoryStore) -> None:
    with pytest.raises(MemoryStoreError) as raised:
        await store.list(SCOPE, 5, "q" * (MAX_QUERY_CHARS + 1))  # only the service bounds a query's length
    assert type(raised.value) is MemoryStoreError and raised.value.status == 400
    assert "query must be at most" in str(raised.value)
    with capture_logs() as logs:
        assert await store.retrieve(SCOPE, "q " * 3000, 5) == []  # advisory: a warning, never a failure
    assert "query must be at most" in logs[-1]["message"]


async def test_a_cap_out_of_range_is_refused_by_the_front_before_any_request(
    store: HttpMemoryStore, recording: Recording
) -> None:
    with pytest.raises(ValueError, match="cap"):
        await store.write(SCOPE, [candidate("x")], cap=MAX_SCOPE_CAP + 1)
    assert recording.sent == []


async def test_a_malformed_scope_key_is_refused_before_any_round_trip(store: HttpMemoryStore) -> None:
    with pytest.raises(ValueError, match="scope key"):
        await store.write("org:has space", [candidate("x")])


async def test_a_wrong_token_raises_401_on_write_list_forget_and_degrades_retrieve(
    service_store: InProcessMemoryStore,
) -> None:
    wrong = HttpMemoryStore(
        BASE, "not-the-token", transport=httpx.ASGITransport(create_app(service_store, TOKEN))
    )
    try:
        for call in (
            wrong.write(SCOPE, [candidate("x")]),
            wrong.list(SCOPE, 5),
            wrong.forget(SCOPE, "mem:org:acme:1"),
        ):
            with pytest.raises(MemoryStoreError) as raised:
                await call
            assert raised.value.status == 401
            assert "unauthorized" in str(raised.value)
        with capture_logs() as logs:
            assert await wrong.retrieve(SCOPE, "x", 5) == []
    finally:
        await wrong.aclose()
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert warning["event"] == "memory.retrieve_failed" and "401 unauthorized" in warning["message"]


async def test_records_with_the_evicted_status_are_accepted_on_the_wire() -> None:
    body = json.dumps({"records": [wire_record("gone", 1, status="evicted")]}).encode()
    client = HttpMemoryStore(BASE, TOKEN, transport=fixed(200, body))
    try:
        (record,) = await client.list(SCOPE, 5)
    finally:
        await client.aclose()
    assert record.status == "evicted"


# --- retrieve degrades, never fails --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transport", "status", "reason"),
    [
        (fixed(503, b"<html>upstream down</html>", "text/html"), 503, "503"),
        (fixed(502, b"Bad Gateway", "text/plain"), 502, "502"),
        (fixed(504, b'{"error": "gateway timeout"}'), 504, "504 gateway timeout"),
        (fixed(500, b'{"error": "store failure"}'), 500, "500 store failure"),
        (fixed(400, b'{"error": "query must be a string"}'), 400, "400 query must be a string"),
        (fixed(200, b"not json at all", "text/plain"), 200, "not a JSON object"),
        (fixed(200, b"[1, 2]"), 200, "not a JSON object"),
        (fixed(200, b'{"records": "many", "scopes": "many"}'), 200, "reply has no"),
        (fixed(200, b"{}"), 200, "reply has no"),
    ],
    ids=[
        "503-html",
        "502-text",
        "504-json",
        "500",
        "400",
        "non-json",
        "json-array",
        "not-an-array",
        "missing",
    ],
)
async def test_retrieve_reads_any_failure_as_nothing_with_one_warning_naming_it(
    transport: httpx.ASGITransport, status: int, reason: str
) -> None:
    client = HttpMemoryStore(BASE, TOKEN, transport=transport)
    try:
        with capture_logs() as logs:
            assert await client.retrieve(SCOPE, "deploy", 5) == []
            assert await client.retrieve_many([SCOPE], "deploy", 5) == {}
    finally:
        await client.aclose()
    assert [(e["event"], e["log_level"], e["error"]) for e in logs] == [
        ("memory.retrieve_failed", "warning", "MemoryUnavailable")
    ] * 2
    assert reason in logs[0]["message"] and "/retrieve" in logs[0]["message"]
    assert "/retrieve_many" in logs[1]["message"] and logs[0]["scope_key"] == SCOPE
    assert TOKEN not in repr(logs)


async def test_retrieve_reads_a_refused_connection_as_nothing() -> None:
    client = HttpMemoryStore(f"http://127.0.0.1:{free_port()}", TOKEN)
    try:
        with capture_logs() as logs:
            assert await client.retrieve(SCOPE, "deploy", 5) == []
    finally:
        await client.aclose()
    (warning,) = logs
    assert warning["event"] == "memory.retrieve_failed" and "transport error" in warning["message"]


async def test_retrieve_reads_a_timeout_as_nothing_within_the_timeout() -> None:
    async def slow(request: Request) -> Response:
        await asyncio.sleep(5)
        return Response(b'{"records": []}', media_type="application/json")

    app = Starlette(routes=[Route("/retrieve", slow, methods=["POST"])])
    client = HttpMemoryStore(BASE, TOKEN, timeout=0.2, transport=httpx.ASGITransport(app=app))
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with capture_logs() as logs:
            assert await client.retrieve(SCOPE, "deploy", 5) == []
    finally:
        await client.aclose()
    assert loop.time() - started < 2.0
    (warning,) = logs
    assert "timed out" in warning["message"]


async def test_retrieve_drops_malformed_records_individually() -> None:
    good = wire_record("deploy with make ship", 1)
    records = [
        good,
        wire_record("no kind", 2, kind="rumour"),
        {k: v for k, v in wire_record("no id", 3).items() if k != "id"},
        wire_record("bad time", 4, createdAt="yesterday"),
        wire_record("bad keywords", 5, keywords="deploy"),
        wire_record("bad count", 6, useCount=-1),
        wire_record("bad status", 7, status="archived"),
        wire_record("unhashable kind", 10, kind=["fact"]),  # must be dropped, never a TypeError
        wire_record("unhashable status", 11, status={"active": True}),
        wire_record("unknown origin", 12, origin="everyone"),
        wire_record("other scope", 8, scopeKey="user:slack:U2"),
        "not even an object",
        wire_record("optional extras", 9, lastUsedAt=1_700_000_100.0, confidence=0.7, supersedes="mem:x:1"),
    ]
    client = HttpMemoryStore(BASE, TOKEN, transport=fixed(200, json.dumps({"records": records}).encode()))
    try:
        with capture_logs() as logs:
            found = await client.retrieve(SCOPE, "deploy", 10)
    finally:
        await client.aclose()
    assert [r.id for r in found] == ["mem:org:acme:1", "mem:org:acme:9"]
    assert (found[1].last_used_at, found[1].confidence, found[1].supersedes) == (
        1_700_000_100.0,
        0.7,
        "mem:x:1",
    )
    (warning,) = logs
    assert (warning["event"], warning["route"], warning["dropped"]) == (
        "memory.reply_dropped_items",
        "/retrieve",
        11,
    )


async def test_records_round_trip_through_the_shared_wire_format() -> None:
    from memory.types import MemoryRecord

    record = MemoryRecord(
        id="mem:org:acme:3",
        scope_key=SCOPE,
        kind="summary",
        text="we ship on fridays",
        source_thread_key="slack:C1:2",
        created_at=1_700_000_000.5,
        keywords=("ship",),
        source_run_id="run-9",
        last_used_at=1_700_000_001.0,
        use_count=4,
        confidence=0.75,
        supersedes="mem:org:acme:1",
        status="superseded",
    )
    body = json.dumps({"records": [record_to_wire(record)]}).encode()
    client = HttpMemoryStore(BASE, TOKEN, transport=fixed(200, body))
    try:
        assert await client.list(SCOPE, 5) == [record]
    finally:
        await client.aclose()


# --- write, list and forget raise, never a silent empty answer -------------------------------------------


@pytest.mark.parametrize(
    ("transport", "status", "reason"),
    [
        (fixed(500, b'{"error": "store failure"}'), 500, "store failure"),
        (fixed(502, b"Bad Gateway", "text/plain"), 502, "502"),
        (fixed(200, b"not json", "text/plain"), 200, "not a JSON object"),
    ],
    ids=["500-json", "502-text", "200-non-json"],
)
@pytest.mark.parametrize("call", ["write", "list", "forget"])
async def test_write_list_forget_raise_with_status_and_reason(
    transport: httpx.ASGITransport, status: int, reason: str, call: str
) -> None:
    client = HttpMemoryStore(BASE, TOKEN, transport=transport)
    try:
        with pytest.raises(MemoryStoreError) as raised:
            if call == "write":
                await client.write(SCOPE, [candidate("x")])
            elif call == "list":
                await client.list(SCOPE, 5)
            else:
                await client.forget(SCOPE, "mem:org:acme:1")
    finally:
        await client.aclose()
    assert raised.value.status == status
    assert reason in str(raised.value)
    assert f"/{call}" in str(raised.value)


@pytest.mark.parametrize(
    ("call", "body"),
    [
        ("write", b'{"ok": true, "inserted": "two"}'),
        ("write", b'{"ok": true, "inserted": true}'),
        ("list", b'{"records": null}'),
        ("forget", b'{"ok": true}'),
        ("forget", b'{"ok": true, "forgotten": "yes"}'),
    ],
)
async def test_a_malformed_2xx_reply_raises_for_human_calls(call: str, body: bytes) -> None:
    client = HttpMemoryStore(BASE, TOKEN, transport=fixed(200, body))
    try:
        with pytest.raises(MemoryStoreError):
            if call == "write":
                await client.write(SCOPE, [candidate("x")])
            elif call == "list":
                await client.list(SCOPE, 5)
            else:
                await client.forget(SCOPE, "mem:org:acme:1")
    finally:
        await client.aclose()


async def test_a_write_reply_without_evicted_counts_zero_evicted() -> None:
    body = b'{"ok": true, "inserted": 1, "deduped": 0, "superseded": 0}'
    client = HttpMemoryStore(BASE, TOKEN, transport=fixed(200, body))
    try:
        assert await client.write(SCOPE, [candidate("x")]) == WriteResult(inserted=1)
    finally:
        await client.aclose()


async def test_transport_failure_on_write_and_list_raises_without_status() -> None:
    client = HttpMemoryStore(f"http://127.0.0.1:{free_port()}", TOKEN)
    try:
        with pytest.raises(MemoryStoreError) as raised:
            await client.write(SCOPE, [candidate("x")])
        assert raised.value.status is None
        with pytest.raises(MemoryStoreError):
            await client.list(SCOPE, 5)
    finally:
        await client.aclose()


def test_properties_report_the_configuration() -> None:
    client = HttpMemoryStore("http://memory.internal:8787/", TOKEN, timeout=2.5, cap=300)
    assert (client.base_url, client.timeout, client.cap) == ("http://memory.internal:8787", 2.5, 300)
    asyncio.run(client.aclose())


# --- the four-scope read in one round trip (issue 15) ----------------------------------------------


async def test_retrieve_many_is_one_round_trip_for_every_scope(
    store: HttpMemoryStore, recording: Recording
) -> None:
    scopes = [SCOPE, "channel:slack:C1", "user:slack:U1"]
    for scope in scopes:
        await store.write(scope, [candidate(f"we deploy {scope} with make ship")])
    before = len(recording.sent)
    found = await store.retrieve_many(scopes, "how do we deploy", 5)
    assert [sent.path for sent in recording.sent[before:]] == ["/retrieve_many"]
    assert {key: [r.record.id for r in ranked] for key, ranked in found.items()} == {
        scope: [f"mem:{scope}:1"] for scope in scopes
    }
    assert all(0 < r.relevance <= 1 and r.record.use_count == 1 for ranked in found.values() for r in ranked)


async def test_retrieve_many_drops_records_filed_under_another_scope() -> None:
    reply = {
        "scopes": {
            SCOPE: [
                {**wire_record("ok", 1), "relevance": 0.5},
                {**wire_record("x", 2, scopeKey="org:other"), "relevance": 0.9},
            ],
            "org:other": [],
        }
    }
    http = HttpMemoryStore(BASE, TOKEN, transport=fixed(200, json.dumps(reply).encode()))
    try:
        found = await http.retrieve_many([SCOPE], "ok", 5)
    finally:
        await http.aclose()
    assert {key: [r.record.id for r in ranked] for key, ranked in found.items()} == {
        SCOPE: ["mem:org:acme:1"]
    }


async def test_retrieve_many_asks_for_more_scopes_than_a_request_takes_in_several(
    store: HttpMemoryStore, recording: Recording
) -> None:
    scopes = [SCOPE, "repo:acme/api", "channel:slack:C1", "user:slack:U1", "user:slack:U2"]
    for scope in scopes:
        await store.write(scope, [candidate("we deploy with make ship")])
    before = len(recording.sent)
    found = await store.retrieve_many(scopes, "deploy", 5)
    assert [len(sent.body["scopeKeys"]) for sent in recording.sent[before:]] == [MAX_SCOPES, 1]
    assert sorted(found) == sorted(scopes)


# ---- open: the start-up check -----------------------------------------------------------------------


async def test_open_passes_with_the_services_token(recording: Recording) -> None:
    client = HttpMemoryStore(BASE, TOKEN, transport=recording)
    try:
        await client.open()
    finally:
        await client.aclose()
    assert [sent.path for sent in recording.sent] == ["/fetch"]  # one request at start-up


async def test_open_with_a_wrong_token_is_one_error_naming_memory_token(
    service_store: InProcessMemoryStore,
) -> None:
    app = create_app(service_store, TOKEN)
    client = HttpMemoryStore(BASE, "not-the-token", transport=httpx.ASGITransport(app=app))
    try:
        with pytest.raises(MemoryStoreError) as raised:
            await client.open()
    finally:
        await client.aclose()
    assert raised.value.status == 401
    assert "MEMORY_TOKEN" in str(raised.value) and "not-the-token" not in str(raised.value)
    assert len(str(raised.value).splitlines()) == 1


async def test_open_against_nothing_listening_is_one_error_naming_memory_service_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = HttpMemoryStore(url, TOKEN, timeout=2)
    try:
        with pytest.raises(MemoryStoreError) as raised:
            await client.open()
    finally:
        await client.aclose()
    message = str(raised.value)
    assert message.startswith(f"memory.service_url {url}") and "cannot reach" in message
    assert raised.value.status is None and len(message.splitlines()) == 1


@pytest.mark.parametrize("wrong", ["token", "url"])
def test_a_bot_with_a_wrong_token_or_service_url_stops_at_start_up_with_one_line(
    tmp_path: Path, fake_anthropic: FakeModelServer, wrong: str
) -> None:
    with memory_service_process(tmp_path / "service", args=("--embedder", "none")) as service:
        url = f"http://127.0.0.1:{free_port()}" if wrong == "url" else service.base_url
        env = {
            "HOME": str(tmp_path),
            "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
            "SWITCHBOARD_MODEL": "anthropic/test-model",
            "SWITCHBOARD_ORGANIZATION": "acme",
            "SWITCHBOARD_MEMORY__ENABLED": "true",
            "SWITCHBOARD_MEMORY__SERVICE_URL": url,
            "MEMORY_TOKEN": "not-the-token" if wrong == "token" else TOKEN,
        }
        result = subprocess.run(
            app_command("chat", "--thread", "t", "hi"),
            cwd=tmp_path,
            env=subprocess_env(env),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("switchboard chat: memory store unavailable: memory.service_url ")
    assert ("MEMORY_TOKEN" in line) == (wrong == "token") and "not-the-token" not in line
    assert fake_anthropic.requests == []
