"""Fuzz: arbitrary JSON values and headers at every route never produce a 5xx, and every 4xx says why.

Runs through httpx's ASGI transport against the real app over the in-process store; each example gets a
fresh app and event loop so examples cannot leak state into each other.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory.service.app import create_app
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate
from tests.memory.service_support import CURATION_ROUTES, TOKEN

SEED = [
    MemoryCandidate("fact", "we deploy on friday", "t"),
    MemoryCandidate("fact", "ship it with make", "t"),
]
ROUTES = ["/retrieve", "/write", "/list", "/forget", "/healthz", "/", "/nope", "/write/"]
METHODS = ["POST", "POST", "POST", "GET", "PUT", "DELETE", "PATCH"]
FIELDS = ["scopeKey", "query", "limit", "records", "cap", "id", "kind", "text", "sourceThreadKey", "keywords"]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(
        [
            "org:acme",
            "mem:org:acme:1",
            "fact",
            "summary",
            "",
            " ",
            "\x00",
            "a" * 201,
            "\ud800",
            "deploy \udfff",
        ]
    )
    | st.text(st.characters(categories=["Cs", "Lu", "Nd"]), max_size=5)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=25,
)
candidates = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["fact", "summary"]) | json_values,
        "text": st.text(min_size=1, max_size=60),
        "sourceThreadKey": st.just("t"),
    },
    optional={
        "keywords": json_values,
        "sourceRunId": json_values,
        "confidence": json_values,
        "supersedes": json_values,
    },
)
# Bodies shaped like the routes expect, with any field swapped for any JSON value: reaches deep checks.
near_valid = st.fixed_dictionaries(
    {},
    optional={
        "scopeKey": st.sampled_from(["org:acme", "user:slack:U1"]) | json_values,
        "query": st.sampled_from(["deploy", "deploy ship friday", ""]) | st.text(max_size=50) | json_values,
        "limit": st.integers(min_value=-2, max_value=60) | st.floats(min_value=0, max_value=60) | json_values,
        "records": st.lists(candidates | json_values, max_size=4),
        "cap": st.integers(min_value=-1, max_value=10_002)
        | st.floats(min_value=0, max_value=10_002)
        | json_values,
        "id": st.sampled_from(["mem:org:acme:1", "mem:org:acme:2"]) | json_values,
    },
)
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60)
auth_headers = st.sampled_from(
    [None, f"Bearer {TOKEN}", f"bearer {TOKEN}", "Bearer", "Bearer wrong", TOKEN, f"Basic {TOKEN}"]
) | header_text.map(lambda v: f"Bearer {v}")
extra_headers = st.dictionaries(
    st.sampled_from(["content-type", "x-request-id", "accept", "user-agent", "x-forwarded-for", "cookie"]),
    header_text,
    max_size=3,
)


async def exchange(method: str, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    store = InProcessMemoryStore(cap=500)
    await store.write("org:acme", SEED)
    app = create_app(store, TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memory.test") as client:
        return await client.request(method, path, content=body if method != "GET" else None, headers=headers)


def check(reply: httpx.Response) -> None:
    assert reply.status_code < 500, (reply.status_code, reply.text)
    parsed: Any = reply.json()  # every answer is JSON
    if 400 <= reply.status_code < 500:
        assert isinstance(parsed, dict)
        assert isinstance(parsed.get("error"), str) and parsed["error"], parsed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(ROUTES),
    method=st.sampled_from(METHODS),
    body=near_valid | json_values,
    auth=auth_headers,
    extra=extra_headers,
)
def test_arbitrary_json_and_headers_never_cause_a_5xx(
    path: str, method: str, body: Any, auth: str | None, extra: dict[str, str]
) -> None:
    headers = dict(extra)
    if auth is not None:
        headers["authorization"] = auth
    raw = json.dumps(body).encode()
    check(asyncio.run(exchange(method, path, raw, headers)))


@settings(max_examples=100, deadline=None)
@given(path=st.sampled_from(ROUTES[:4]), raw=st.binary(max_size=200), extra=extra_headers)
def test_arbitrary_bytes_as_an_authenticated_body_never_cause_a_5xx(
    path: str, raw: bytes, extra: dict[str, str]
) -> None:
    headers = {**extra, "authorization": f"Bearer {TOKEN}"}
    check(asyncio.run(exchange("POST", path, raw, headers)))


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(ROUTES[:4]), body=near_valid)
@example(path="/write", body={"scopeKey": "org:acme", "records": [{"kind": []}]})  # once a 500
def test_authenticated_near_valid_bodies_are_either_served_or_refused_with_a_reason(
    path: str, body: dict[str, Any]
) -> None:
    reply = asyncio.run(
        exchange("POST", path, json.dumps(body).encode(), {"authorization": f"Bearer {TOKEN}"})
    )
    check(reply)
    assert reply.status_code in (200, 400)


ids = st.sampled_from(["mem:org:acme:1", "mem:org:acme:2", "mem:org:acme:3", "mem:user:slack:U1:1"])
actors = st.sampled_from(["user:slack:UADMIN", "system", "machine", "run:r1", "", " "]) | json_values
# The curation bodies' fields, each either plausible or any JSON value: reaches the stores' own rules.
near_valid_curation = st.fixed_dictionaries(
    {},
    optional={
        "scopeKey": st.sampled_from(["org:acme", "user:slack:U1"]) | json_values,
        "id": ids | json_values,
        "limit": st.integers(min_value=-2, max_value=60) | json_values,
        "records": st.lists(candidates | json_values, max_size=3),
        "cap": st.integers(min_value=-1, max_value=10_002) | json_values,
        "actor": actors,
        "text": st.text(max_size=40) | json_values,
        "olderThan": st.floats(min_value=-1, max_value=4e10) | json_values,
        "survivorId": ids | json_values,
        "duplicateIds": st.lists(ids | json_values, max_size=4) | json_values,
        "recordId": ids | json_values,
        "action": st.sampled_from(["remembered", "forgotten", "approved", "liked"]) | json_values,
        "at": st.floats(min_value=-1, max_value=4e10) | json_values,
        "relatedId": ids | json_values,
    },
)


async def curation_exchange(path: str, body: bytes) -> httpx.Response:
    store = InProcessMemoryStore(cap=500)
    await store.write("org:acme", SEED)
    await store.write_pending("org:acme", [MemoryCandidate("fact", "the bot runs on fridays", "t")])
    app = create_app(store, TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://memory.test"
    ) as client:
        return await client.post(path, content=body, headers={"authorization": f"Bearer {TOKEN}"})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(CURATION_ROUTES), body=near_valid_curation | json_values)
def test_near_valid_curation_bodies_are_either_served_or_refused_with_a_reason(path: str, body: Any) -> None:
    reply = asyncio.run(curation_exchange(path, json.dumps(body).encode()))
    check(reply)
    assert reply.status_code in (200, 400)
