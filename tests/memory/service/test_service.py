"""The memory service in-process through httpx's ASGI transport: routing, auth, fence, validation, data.

Spec rows: "Worker: /healthz open; missing/wrong/non-Bearer token → 401; unknown route 404; non-POST 405;
oversized body → 413 / undeclared length → 411, both before parsing; malformed bodies → 400 with reason",
"Worker: write → retrieve round trip …", "Worker: dedup …", "Worker: /list … /forget …", "Worker: over-cap
/write evicts …", "Worker: non-ASCII record text …", "Worker /list with query …".
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from structlog.testing import capture_logs

from memory.rules.person import draw_pseudonym
from memory.service.app import MAX_BODY_BYTES, create_app
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate, MemoryRecord, WriteResult
from tests.memory.service_support import AUTH, TOKEN, asgi_client, fact, free_port, raw_asgi
from tests.memory.stores.test_sqlite_person import BOB, bob_everywhere, traces

SCOPE = "org:acme"


@pytest.fixture
def store() -> InProcessMemoryStore:
    return InProcessMemoryStore(cap=500)


@pytest.fixture
def app(store: InProcessMemoryStore) -> Starlette:
    return create_app(store, TOKEN)


async def post(app: Starlette, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    async with asgi_client(app, AUTH if headers is None else headers) as client:
        return await client.post(path, json=body)


def body_of(**fields: Any) -> dict[str, Any]:
    return fields


# --- routing ---------------------------------------------------------------------------------------


async def test_healthz_is_open_without_a_token(app: Starlette) -> None:
    async with asgi_client(app) as client:
        reply = await client.get("/healthz")
    assert reply.status_code == 200
    assert reply.json() == {"ok": True}


@pytest.mark.parametrize("path", ["/", "/nope", "/retrieve/", "/write/extra", "/healthz/x"])
async def test_unknown_route_is_404_with_a_reason(app: Starlette, path: str) -> None:
    async with asgi_client(app, AUTH) as client:
        reply = await client.post(path, json={})
    assert reply.status_code == 404
    assert reply.json() == {"error": "not found"}


@pytest.mark.parametrize("path", ["/retrieve", "/write", "/list", "/forget"])
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
async def test_non_post_on_a_data_route_is_405(app: Starlette, path: str, method: str) -> None:
    async with asgi_client(app, AUTH) as client:
        reply = await client.request(method, path)
    assert reply.status_code == 405
    assert reply.json() == {"error": "method not allowed"}
    assert reply.headers["allow"] == "POST"


async def test_post_on_healthz_is_405(app: Starlette) -> None:
    async with asgi_client(app) as client:
        reply = await client.post("/healthz")
    assert reply.status_code == 405
    assert reply.json()["error"]


# --- auth --------------------------------------------------------------------------------------------

DATA_CALLS = [
    ("/retrieve", {"scopeKey": SCOPE, "query": "deploy", "limit": 5}),
    ("/write", {"scopeKey": SCOPE, "records": [fact("we deploy with make ship")]}),
    ("/list", {"scopeKey": SCOPE, "limit": 5}),
    ("/forget", {"scopeKey": SCOPE, "id": "mem:org:acme:1"}),
]


@pytest.mark.parametrize(("path", "body"), DATA_CALLS)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
        {"Authorization": "Bearer "},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Token {TOKEN}"},
    ],
    ids=["missing", "longer", "prefix", "empty", "no-scheme", "basic", "other-scheme"],
)
async def test_data_routes_refuse_a_missing_wrong_or_non_bearer_token(
    app: Starlette, store: InProcessMemoryStore, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    reply = await post(app, path, body, headers)
    assert reply.status_code == 401
    assert reply.json() == {"error": "unauthorized"}
    assert store.records(SCOPE) == []


OPEN_ROUTES = frozenset({"/healthz", "/readyz"})


async def test_every_route_the_app_serves_but_health_and_readiness_refuses_a_missing_or_wrong_token(
    app: Starlette,
) -> None:
    """Enumerated from the app itself, so a route added later cannot skip the token unseen."""
    served = [(route.path, sorted(route.methods or ())) for route in app.routes if isinstance(route, Route)]
    assert len(served) > 20 and {path for path, _ in served} >= OPEN_ROUTES
    client = asgi_client(app)
    async with client:
        for path, methods in served:
            if path in OPEN_ROUTES:
                continue
            method = "POST" if "POST" in methods else "GET"
            for headers in ({}, {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": "Bearer "}):
                reply = await client.request(method, path, json={"scopeKey": SCOPE}, headers=headers)
                assert reply.status_code == 401, (path, headers)


async def test_bearer_scheme_is_case_insensitive(app: Starlette) -> None:
    reply = await post(app, "/list", {"scopeKey": SCOPE, "limit": 5}, {"Authorization": f"bearer {TOKEN}"})
    assert reply.status_code == 200


@pytest.mark.parametrize("configured", ["", None])
@pytest.mark.parametrize(("path", "body"), DATA_CALLS)
async def test_an_empty_or_unset_service_token_grants_nothing(
    configured: str | None, path: str, body: dict[str, Any]
) -> None:
    store = InProcessMemoryStore()
    app = create_app(store, configured)
    for headers in ({"Authorization": "Bearer "}, {"Authorization": "Bearer"}, {}, AUTH):
        reply = await post(app, path, body, headers)
        assert reply.status_code == 401, headers
    assert store.records(SCOPE) == []


async def test_auth_is_checked_before_the_body_is_read(app: Starlette) -> None:
    reply = await raw_asgi(
        app,
        "POST",
        "/write",
        [("content-length", "5")],
        [b"{bad}"],
    )
    assert reply.status == 401
    assert reply.receive_calls == 0


async def test_a_non_ascii_token_is_compared_on_its_bytes() -> None:
    app = create_app(InProcessMemoryStore(), "jeton-é")
    body = json.dumps({"scopeKey": SCOPE, "limit": 5}).encode()
    ok = await raw_asgi(
        app,
        "POST",
        "/list",
        [("authorization", "Bearer jeton-é".encode()), ("content-length", str(len(body)))],
        [body],
    )
    assert ok.status == 200
    wrong = await raw_asgi(
        app, "POST", "/list", [("authorization", "Bearer jeton-e"), ("content-length", "2")], [b"{}"]
    )
    assert wrong.status == 401


# --- size fence ----------------------------------------------------------------------------------------


async def test_a_chunked_body_without_content_length_is_411_and_never_read(app: Starlette) -> None:
    streamed = {"read": False}

    async def chunks() -> AsyncIterator[bytes]:
        streamed["read"] = True
        yield json.dumps({"scopeKey": SCOPE, "limit": 5}).encode()

    async with asgi_client(app, AUTH) as client:
        reply = await client.post("/list", content=chunks())
    assert reply.status_code == 411
    assert "Content-Length" in reply.json()["error"]
    assert streamed["read"] is False


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [("content-length", "")],
        [("content-length", " ")],
        [("content-length", "0x10")],
        [("content-length", "5e2")],
        [("content-length", "12.5")],
        [("content-length", "+12")],
        [("content-length", "-1")],
        [("content-length", "１２".encode())],  # fullwidth digits: str.isdigit() would say yes
        [("content-length", "12"), ("content-length", "12")],
        [("content-length", "12"), ("transfer-encoding", "chunked")],
    ],
    ids=[
        "absent",
        "blank",
        "space",
        "hex",
        "exponent",
        "fraction",
        "plus",
        "negative",
        "fullwidth",
        "twice",
        "with-chunked",
    ],
)
async def test_content_length_that_is_not_one_plain_digit_string_is_411_before_parsing(
    app: Starlette, headers: list[tuple[str, str | bytes]]
) -> None:
    reply = await raw_asgi(
        app,
        "POST",
        "/write",
        [("authorization", f"Bearer {TOKEN}"), *headers],
        [b'{"scopeKey": "org:acme", "records": []}'],
    )
    assert reply.status == 411
    assert reply.body["error"]
    assert reply.receive_calls == 0


@pytest.mark.parametrize("declared", [str(MAX_BODY_BYTES + 1), str(600 * 1024), "1" + "0" * 30, "9" * 5000])
async def test_a_declared_length_over_512_kib_is_413_before_parsing(app: Starlette, declared: str) -> None:
    reply = await raw_asgi(
        app,
        "POST",
        "/retrieve",
        [("authorization", f"Bearer {TOKEN}"), ("content-length", declared)],
        [b"x" * 1024],
    )
    assert reply.status == 413
    assert "512" in reply.body["error"] or str(MAX_BODY_BYTES) in reply.body["error"]
    assert reply.receive_calls == 0


async def test_a_body_of_exactly_512_kib_passes_the_fence(app: Starlette) -> None:
    body = json.dumps({"scopeKey": SCOPE, "query": "x", "limit": 5}).encode()
    padded = body + b" " * (MAX_BODY_BYTES - len(body))
    async with asgi_client(app, AUTH) as client:
        reply = await client.post("/retrieve", content=padded, headers={"content-type": "application/json"})
    assert reply.status_code == 200
    assert reply.json() == {"records": []}


async def test_a_body_longer_than_its_content_length_is_refused(app: Starlette) -> None:
    reply = await raw_asgi(
        app,
        "POST",
        "/list",
        [("authorization", f"Bearer {TOKEN}"), ("content-length", "2")],
        [b"{}", b"{}"],
    )
    assert reply.status == 413


async def test_a_bodiless_post_with_zero_length_is_400_not_411(app: Starlette) -> None:
    async with asgi_client(app, AUTH) as client:
        reply = await client.post("/retrieve")
    assert reply.status_code == 400
    assert reply.json() == {"error": "body must be valid JSON"}


# --- validation ------------------------------------------------------------------------------------------

LONG_SCOPE = "org:" + "a" * 197


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        # body shape
        ("/retrieve", [], "body"),
        ("/retrieve", "org:acme", "body"),
        ("/retrieve", None, "body"),
        # scopeKey
        ("/retrieve", body_of(query="x", limit=5), "scopeKey"),
        ("/retrieve", body_of(scopeKey="", query="x", limit=5), "scopeKey"),
        ("/retrieve", body_of(scopeKey=LONG_SCOPE, query="x", limit=5), "scopeKey"),
        ("/retrieve", body_of(scopeKey="org:ac me", query="x", limit=5), "scopeKey"),
        ("/retrieve", body_of(scopeKey="org:acme\n", query="x", limit=5), "scopeKey"),
        ("/retrieve", body_of(scopeKey="org:\x00acme", query="x", limit=5), "scopeKey"),
        ("/retrieve", body_of(scopeKey=7, query="x", limit=5), "scopeKey"),
        ("/write", body_of(scopeKey=["org:acme"], records=[]), "scopeKey"),
        ("/list", body_of(scopeKey="org:\tacme", limit=5), "scopeKey"),
        ("/forget", body_of(scopeKey=None, id="mem:org:acme:1"), "scopeKey"),
        # query
        ("/retrieve", body_of(scopeKey=SCOPE, limit=5), "query"),
        ("/retrieve", body_of(scopeKey=SCOPE, query=5, limit=5), "query"),
        ("/retrieve", body_of(scopeKey=SCOPE, query="q" * 4001, limit=5), "query"),
        ("/list", body_of(scopeKey=SCOPE, query=["deploy"], limit=5), "query"),
        ("/list", body_of(scopeKey=SCOPE, query="q" * 4001, limit=5), "query"),
        # limit
        ("/retrieve", body_of(scopeKey=SCOPE, query="x"), "limit"),
        ("/retrieve", body_of(scopeKey=SCOPE, query="x", limit=0), "limit"),
        ("/retrieve", body_of(scopeKey=SCOPE, query="x", limit=51), "limit"),
        ("/retrieve", body_of(scopeKey=SCOPE, query="x", limit=2.5), "limit"),
        ("/retrieve", body_of(scopeKey=SCOPE, query="x", limit="5"), "limit"),
        ("/retrieve", body_of(scopeKey=SCOPE, query="x", limit=True), "limit"),
        ("/list", body_of(scopeKey=SCOPE, limit=-1), "limit"),
        ("/list", body_of(scopeKey=SCOPE), "limit"),
        # records
        ("/write", body_of(scopeKey=SCOPE), "records"),
        ("/write", body_of(scopeKey=SCOPE, records={"0": fact("x")}), "records"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact(f"fact {i}") for i in range(51)]), "records"),
        ("/write", body_of(scopeKey=SCOPE, records=["a fact"]), "records[0]"),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[fact("ok"), fact("x", kind="rumour")]),
            "records[1].kind",
        ),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[{"text": "x", "sourceThreadKey": "t"}]),
            "records[0].kind",
        ),
        (  # an unhashable kind is a 400 like any other, never a 500 (found by the fuzz test)
            "/write",
            body_of(scopeKey=SCOPE, records=[fact("x", kind=[])]),
            "records[0].kind",
        ),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", kind={"fact": 1})]), "records[0].kind"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("")]), "records[0].text"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("   \n")]), "records[0].text"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("t" * 4001)]), "records[0].text"),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[{"kind": "fact", "sourceThreadKey": "t"}]),
            "records[0].text",
        ),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[{"kind": "fact", "text": "x"}]),
            "records[0].sourceThreadKey",
        ),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", thread="")]), "records[0].sourceThreadKey"),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[fact("x", thread="t" * 201)]),
            "records[0].sourceThreadKey",
        ),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", keywords="deploy")]), "records[0].keywords"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", keywords=["k"] * 21)]), "records[0].keywords"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", keywords=[3])]), "records[0].keywords"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", keywords=[""])]), "records[0].keywords"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", keywords=["k" * 65])]), "records[0].keywords"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", sourceRunId=12)]), "records[0].sourceRunId"),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[fact("x", sourceRunId="r" * 201)]),
            "records[0].sourceRunId",
        ),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", confidence=-0.1)]), "records[0].confidence"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", confidence=1.01)]), "records[0].confidence"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", confidence="0.9")]), "records[0].confidence"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", confidence=True)]), "records[0].confidence"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", supersedes=1)]), "records[0].supersedes"),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[fact("x", supersedes="s" * 201)]),
            "records[0].supersedes",
        ),
        # origin
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", origin="everyone")]), "records[0].origin"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", origin=["dm"])]), "records[0].origin"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x", origin="DM")]), "records[0].origin"),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[fact("x", origin="dm", originConversation="D" * 201)]),
            "records[0].originConversation",
        ),
        (
            "/write",
            body_of(scopeKey=SCOPE, records=[fact("x", originConversation=7)]),
            "records[0].originConversation",
        ),
        # cap
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x")], cap=0), "cap"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x")], cap=10001), "cap"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x")], cap=2.5), "cap"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x")], cap="500"), "cap"),
        ("/write", body_of(scopeKey=SCOPE, records=[fact("x")], cap=False), "cap"),
        # id
        ("/forget", body_of(scopeKey=SCOPE), "id"),
        ("/forget", body_of(scopeKey=SCOPE, id=""), "id"),
        ("/forget", body_of(scopeKey=SCOPE, id=17), "id"),
        ("/forget", body_of(scopeKey=SCOPE, id="mem:" + "x" * 197), "id"),
        ("/forget", body_of(scopeKey=SCOPE, id="mem:org:acme 1"), "id"),
        ("/forget", body_of(scopeKey=SCOPE, id="mem:org:acme:1\x7f"), "id"),
    ],
)
async def test_malformed_bodies_are_400_with_a_reason_naming_the_field(
    app: Starlette, store: InProcessMemoryStore, path: str, body: Any, field: str
) -> None:
    seeded = await store.write(SCOPE, [MemoryCandidate("fact", "seeded fact", "t")])
    assert seeded.inserted == 1
    before = store.records(SCOPE)
    reply = await post(app, path, body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error.startswith(field), error
    assert store.records(SCOPE) == before  # nothing touched the store, not even a usage bump


@pytest.mark.parametrize(
    "raw", [b"{", b"not json", b"\xff\xfe{}", b'{"limit": NaN}', b'{"limit": Infinity}', b"[" * 100_000]
)
async def test_a_body_that_is_not_json_is_400(app: Starlette, raw: bytes) -> None:
    async with asgi_client(app, AUTH) as client:
        reply = await client.post("/list", content=raw)
    assert reply.status_code == 400
    assert reply.json() == {"error": "body must be valid JSON"}


@pytest.mark.parametrize(
    ("path", "raw", "field"),
    [
        ("/retrieve", '{"scopeKey": "org:\\ud800", "query": "x", "limit": 5}', "scopeKey"),
        ("/retrieve", '{"scopeKey": "org:acme", "query": "deploy \\udfff", "limit": 5}', "query"),
        (
            "/write",
            '{"scopeKey": "org:acme", "records": [{"kind": "fact", "text": "a \\ud83d b", '
            '"sourceThreadKey": "t"}]}',
            "records[0].text",
        ),
        (
            "/write",
            '{"scopeKey": "org:acme", "records": [{"kind": "fact", "text": "ok", '
            '"sourceThreadKey": "t\\ud800"}]}',
            "records[0].sourceThreadKey",
        ),
        (
            "/write",
            '{"scopeKey": "org:acme", "records": [{"kind": "fact", "text": "ok", '
            '"sourceThreadKey": "t", "keywords": ["\\udc00"]}]}',
            "records[0].keywords",
        ),
        (
            "/write",
            '{"scopeKey": "org:acme", "records": [{"kind": "fact", "text": "ok", '
            '"sourceThreadKey": "t", "sourceRunId": "\\ud800"}]}',
            "records[0].sourceRunId",
        ),
        ("/forget", '{"scopeKey": "org:acme", "id": "mem:\\ud800"}', "id"),
    ],
)
async def test_a_lone_surrogate_escape_is_400_never_a_store_failure(
    app: Starlette, store: InProcessMemoryStore, path: str, raw: str, field: str
) -> None:
    async with asgi_client(app, AUTH) as client:
        reply = await client.post(path, content=raw.encode())
    assert reply.status_code == 400
    assert reply.json()["error"].startswith(field)
    assert store.records(SCOPE) == []


async def test_an_escaped_surrogate_pair_is_ordinary_text(app: Starlette) -> None:
    raw = (
        '{"scopeKey": "org:acme", "records": '
        '[{"kind": "fact", "text": "ship it \\ud83d\\ude80", "sourceThreadKey": "t"}]}'
    )
    async with asgi_client(app, AUTH) as client:
        wrote = await client.post("/write", content=raw.encode())
        listed = await client.post("/list", json={"scopeKey": SCOPE, "limit": 5})
    assert wrote.json()["inserted"] == 1
    assert listed.json()["records"][0]["text"] == "ship it 🚀"


async def test_boundary_values_are_accepted(app: Starlette) -> None:
    edge = fact(
        "t" * 4000,
        thread="t" * 200,
        keywords=["k" * 64] * 20,
        sourceRunId="r" * 200,
        confidence=0,
        supersedes="",
    )
    reply = await post(app, "/write", {"scopeKey": "org:" + "a" * 196, "records": [edge], "cap": 10000})
    assert reply.status_code == 200, reply.text
    one = await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("y", confidence=1)], "cap": 1})
    assert one.status_code == 200
    for limit in (1, 50):
        listed = await post(app, "/list", {"scopeKey": SCOPE, "limit": limit, "query": "q" * 4000})
        assert listed.status_code == 200
    forget = await post(app, "/forget", {"scopeKey": SCOPE, "id": "m" * 200})
    assert forget.json() == {"ok": True, "forgotten": False}


async def test_null_optional_fields_are_treated_as_absent(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    candidate = fact("nulls are absent", keywords=None, sourceRunId=None, confidence=None, supersedes=None)
    reply = await post(app, "/write", {"scopeKey": SCOPE, "records": [candidate], "cap": None})
    assert reply.json()["inserted"] == 1
    (record,) = store.records(SCOPE)
    assert (record.keywords, record.source_run_id, record.confidence, record.supersedes) == (
        (),
        None,
        None,
        None,
    )
    listed = await post(app, "/list", {"scopeKey": SCOPE, "limit": 5, "query": None})
    assert len(listed.json()["records"]) == 1


# --- data: write → retrieve, dedup, supersede, list, forget, cap -------------------------------------------


async def test_write_then_retrieve_round_trip_mints_namespaced_ids_with_provenance(app: Starlette) -> None:
    reply = await post(
        app,
        "/write",
        {
            "scopeKey": SCOPE,
            "records": [
                fact(
                    "We deploy with make ship",
                    keywords=["deploy", "release"],
                    sourceRunId="run-1",
                    confidence=0.9,
                ),
                {
                    "kind": "summary",
                    "text": "Talked about the release train",
                    "sourceThreadKey": "slack:C1:2",
                },
            ],
        },
    )
    assert reply.json() == {"ok": True, "inserted": 2, "deduped": 0, "superseded": 0, "evicted": 0}

    found = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "how do we deploy?", "limit": 8})
    assert found.status_code == 200
    (record,) = found.json()["records"]
    assert record["id"] == "mem:org:acme:1"
    assert record["scopeKey"] == SCOPE
    assert record["kind"] == "fact"
    assert record["text"] == "We deploy with make ship"
    assert record["keywords"] == ["deploy", "release"]
    assert record["sourceThreadKey"] == "slack:C1:1700000000.000100"
    assert record["sourceRunId"] == "run-1"
    assert record["confidence"] == 0.9
    assert record["status"] == "active"
    assert record["useCount"] == 1  # the retrieve bumped usage on what it returned
    assert isinstance(record["lastUsedAt"], float)
    assert isinstance(record["createdAt"], float)

    summary = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "release train", "limit": 8})
    ids = [r["id"] for r in summary.json()["records"]]
    assert ids[0] == "mem:org:acme:2"


async def test_the_origin_label_round_trips_through_the_wire(app: Starlette) -> None:
    body = {
        "scopeKey": "user:slack:U0A",
        "records": [
            fact("prefers tabs", origin="dm", originConversation="slack:D0A"),
            fact("uses staging"),  # a writer that predates origins: unknown
        ],
    }
    assert (await post(app, "/write", body)).status_code == 200
    listed = (await post(app, "/list", {"scopeKey": "user:slack:U0A", "limit": 5})).json()["records"]
    by_text = {r["text"]: (r.get("origin"), r.get("originConversation")) for r in listed}
    assert by_text == {"prefers tabs": ("dm", "slack:D0A"), "uses staging": (None, None)}


async def test_optional_fields_absent_in_storage_are_omitted_never_null(app: Starlette) -> None:
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("bare deploy fact")]})
    listed = await post(app, "/list", {"scopeKey": SCOPE, "limit": 5})
    assert "null" not in listed.text
    (record,) = listed.json()["records"]
    for optional in ("sourceRunId", "lastUsedAt", "confidence", "supersedes"):
        assert optional not in record
    assert record["keywords"] == []


async def test_retrieve_is_whole_token_limited_and_bumps_only_what_it_returns(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    texts = [f"deploy step {i}" for i in range(5)] + ["deployment notes", "unrelated lunch menu"]
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact(t) for t in texts]})
    found = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "deploy", "limit": 3})
    returned = {r["id"] for r in found.json()["records"]}
    assert len(returned) == 3
    by_id = {r.id: r for r in store.records(SCOPE)}
    assert by_id["mem:org:acme:6"].use_count == 0  # "deployment" is not the token "deploy"
    assert {i for i, r in by_id.items() if r.use_count == 1} == returned


async def test_retrieve_is_scope_isolated(app: Starlette) -> None:
    await post(app, "/write", {"scopeKey": "user:slack:U1", "records": [fact("my editor is vim")]})
    other = await post(app, "/retrieve", {"scopeKey": "user:slack:U2", "query": "editor vim", "limit": 8})
    assert other.json() == {"records": []}
    own = await post(app, "/retrieve", {"scopeKey": "user:slack:U1", "query": "editor vim", "limit": 8})
    assert [r["id"] for r in own.json()["records"]] == ["mem:user:slack:U1:1"]


async def test_fts_syntax_in_a_query_is_inert(app: Starlette) -> None:
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("deploy with make ship")]})
    for query in ['"deploy', "deploy*", "NEAR(deploy ship)", "deploy OR -ship", "text:deploy"]:
        reply = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": query, "limit": 5})
        assert reply.status_code == 200
        assert [r["text"] for r in reply.json()["records"]] == ["deploy with make ship"]
    no_tokens = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": ')(*"', "limit": 5})
    assert no_tokens.json() == {"records": []}


async def test_empty_write_batch_is_a_no_op(app: Starlette, store: InProcessMemoryStore) -> None:
    reply = await post(app, "/write", {"scopeKey": SCOPE, "records": []})
    assert reply.json() == {"ok": True, "inserted": 0, "deduped": 0, "superseded": 0, "evicted": 0}
    assert store.records(SCOPE) == []


async def test_dedup_bumps_case_and_whitespace_insensitively(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("We deploy on Fridays")]})
    reply = await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("  we DEPLOY   on fridays ")]})
    assert reply.json() == {"ok": True, "inserted": 0, "deduped": 1, "superseded": 0, "evicted": 0}
    (record,) = store.records(SCOPE)
    assert record.use_count == 1


async def test_supersede_soft_deletes_and_hides_the_old_record(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("deploys go out on fridays")]})
    reply = await post(
        app,
        "/write",
        {"scopeKey": SCOPE, "records": [fact("deploys go out on mondays", supersedes="mem:org:acme:1")]},
    )
    assert reply.json()["superseded"] == 1
    old, new = store.records(SCOPE)
    assert old.status == "superseded"
    assert new.supersedes == "mem:org:acme:1"
    found = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "deploys", "limit": 8})
    assert [(r["id"], r["supersedes"]) for r in found.json()["records"]] == [
        ("mem:org:acme:2", "mem:org:acme:1")
    ]
    unknown = await post(
        app,
        "/write",
        {"scopeKey": SCOPE, "records": [fact("deploys need a ticket", supersedes="mem:org:x:9")]},
    )
    assert unknown.json()["inserted"] == 1
    assert unknown.json()["superseded"] == 0


async def test_list_is_newest_first_limited_filtered_and_never_bumps_usage(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    texts = ["deploy with make ship", "lunch is at noon", "deploy needs approval", "standup at nine"]
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact(t) for t in texts]})
    everything = await post(app, "/list", {"scopeKey": SCOPE, "limit": 3})
    assert [r["id"] for r in everything.json()["records"]] == [f"mem:org:acme:{n}" for n in (4, 3, 2)]
    filtered = await post(app, "/list", {"scopeKey": SCOPE, "limit": 1, "query": "deploy"})
    assert [r["id"] for r in filtered.json()["records"]] == ["mem:org:acme:3"]
    substring = await post(app, "/list", {"scopeKey": SCOPE, "limit": 5, "query": "deplo"})
    assert substring.json() == {"records": []}
    assert all(r.use_count == 0 and r.last_used_at is None for r in store.records(SCOPE))


async def test_forget_soft_deletes_once_and_hides_the_record_everywhere(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("the deploy key rotates monthly")]})
    first = await post(app, "/forget", {"scopeKey": SCOPE, "id": "mem:org:acme:1"})
    assert first.json() == {"ok": True, "forgotten": True}
    again = await post(app, "/forget", {"scopeKey": SCOPE, "id": "mem:org:acme:1"})
    assert again.json() == {"ok": True, "forgotten": False}
    assert [r.status for r in store.records(SCOPE)] == ["forgotten"]  # the row stays
    listed = await post(app, "/list", {"scopeKey": SCOPE, "limit": 5})
    found = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "deploy key", "limit": 5})
    assert listed.json() == found.json() == {"records": []}
    restated = await post(
        app, "/write", {"scopeKey": SCOPE, "records": [fact("The deploy key rotates monthly")]}
    )
    assert restated.json()["inserted"] == 1  # a forgotten record is no dedup target


async def test_forget_of_a_foreign_scope_id_changes_nothing(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    await post(app, "/write", {"scopeKey": "user:slack:U1", "records": [fact("private note")]})
    reply = await post(app, "/forget", {"scopeKey": "user:slack:U2", "id": "mem:user:slack:U1:1"})
    assert reply.json() == {"ok": True, "forgotten": False}
    assert [r.status for r in store.records("user:slack:U1")] == ["active"]


async def test_wire_cap_evicts_least_recently_used_and_absent_cap_uses_the_server_default() -> None:
    store = InProcessMemoryStore(cap=3)  # the server's default cap
    app = create_app(store, TOKEN)
    batch = [fact(f"fact number {i}") for i in range(4)]
    capped = await post(app, "/write", {"scopeKey": SCOPE, "records": batch[:2], "cap": 2})
    assert capped.json()["evicted"] == 0
    await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "number", "limit": 1})  # uses one record
    over = await post(app, "/write", {"scopeKey": SCOPE, "records": batch[2:], "cap": 2})
    assert over.json() == {"ok": True, "inserted": 2, "deduped": 0, "superseded": 0, "evicted": 2}
    statuses = {r.text: r.status for r in store.records(SCOPE)}
    assert list(statuses.values()).count("active") == 2
    listed = await post(app, "/list", {"scopeKey": SCOPE, "limit": 50})
    assert len(listed.json()["records"]) == 2

    default = await post(
        app, "/write", {"scopeKey": SCOPE, "records": [fact("another one"), fact("and a last one")]}
    )
    assert default.json()["evicted"] == 1  # 4 active → the server's own cap of 3
    wide = await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("room to grow")], "cap": 10})
    assert wide.json()["evicted"] == 0


async def test_evicted_records_are_hidden_from_retrieve_list_and_dedup(store: InProcessMemoryStore) -> None:
    app = create_app(store, TOKEN)
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("old deploy fact")]})
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("new deploy fact")], "cap": 1})
    assert [r.status for r in store.records(SCOPE)] == ["evicted", "active"]
    found = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "old deploy", "limit": 8})
    assert [r["text"] for r in found.json()["records"]] == ["new deploy fact"]
    again = await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("old deploy fact")], "cap": 5})
    assert again.json()["inserted"] == 1


async def test_non_ascii_text_is_found_by_its_ascii_tokens_and_accented_queries_are_inert(
    app: Starlette,
) -> None:
    await post(
        app, "/write", {"scopeKey": SCOPE, "records": [fact("Le déploiement se fait avec make ship 🚀")]}
    )
    found = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "make ship", "limit": 5})
    assert [r["text"] for r in found.json()["records"]] == ["Le déploiement se fait avec make ship 🚀"]
    accented = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "déploiement", "limit": 5})
    assert accented.status_code == 200
    assert all("ploiement" not in r["text"] or "make" in r["text"] for r in accented.json()["records"])
    only_accents = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "éé ü", "limit": 5})
    assert only_accents.json() == {"records": []}


async def test_record_text_leaves_the_service_redacted_even_from_a_row_stored_before_redaction(
    tmp_path: Path,
) -> None:
    store = SqliteMemoryStore(tmp_path / "memory", cap=500)
    try:
        await post(create_app(store, TOKEN), "/write", {"scopeKey": SCOPE, "records": [fact("deploy notes")]})
        token = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
        with sqlite3.connect(store.database_path(SCOPE)) as raw:  # a row written by an older build
            raw.execute(
                "UPDATE records SET text = ?, keywords = ? WHERE seq = 1", (f"deploy {token}", f'["{token}"]')
            )
        app = create_app(store, TOKEN)
        listed = await post(app, "/list", {"scopeKey": SCOPE, "limit": 5})
        found = await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "deploy", "limit": 5})
        # /fetch too: it feeds Why? and the edit prefill
        fetched = await post(app, "/fetch", {"scopeKey": SCOPE, "ids": ["mem:org:acme:1"]})
        for reply in (listed, found, fetched):
            assert reply.status_code == 200
            assert token not in reply.text
            assert [(r["text"], r["keywords"]) for r in reply.json()["records"]] == [
                ("deploy [REDACTED]", ["[REDACTED]"])
            ]
    finally:
        await store.aclose()


# --- logs ---------------------------------------------------------------------------------------------------


async def test_one_log_event_per_data_request_with_ids_and_counts_never_text_or_token(app: Starlette) -> None:
    # Record text, not a secret (a secret would be redacted before it is stored): it must stay out of logs.
    secret_text = "the vault rotation word is marmalade-zebra"
    with capture_logs() as logs:
        await post(app, "/write", {"scopeKey": SCOPE, "records": [fact(secret_text)]})
        await post(app, "/retrieve", {"scopeKey": SCOPE, "query": "marmalade zebra vault", "limit": 5})
        await post(app, "/list", {"scopeKey": SCOPE, "limit": 5, "query": "zebra"})
        await post(app, "/forget", {"scopeKey": SCOPE, "id": "mem:org:acme:1"})
        await post(app, "/retrieve", {"scopeKey": SCOPE, "query": 5, "limit": 5})
        await post(app, "/list", {"scopeKey": SCOPE, "limit": 5}, {"Authorization": "Bearer wrong"})
    events = [e for e in logs if e["event"] == "memory.service.request"]
    assert len(events) == 6
    write, retrieve, listed, forget, invalid, unauthorized = events
    assert dict(write) | {"duration_ms": 0} == {
        "event": "memory.service.request",
        "log_level": "info",
        "route": "/write",
        "status": 200,
        "scope_key": SCOPE,
        "candidates": 1,
        "inserted": 1,
        "deduped": 0,
        "superseded": 0,
        "evicted": 0,
        "duration_ms": 0,
    }
    assert isinstance(write["duration_ms"], float)
    assert (retrieve["route"], retrieve["records"], retrieve["status"]) == ("/retrieve", 1, 200)
    assert (listed["records"], listed["filtered"]) == (1, True)
    assert (forget["id"], forget["forgotten"]) == ("mem:org:acme:1", True)
    assert (invalid["status"], invalid["error"]) == (400, "query must be a string")
    assert unauthorized["status"] == 401
    assert "scope_key" not in unauthorized  # the body of an unauthenticated request is never read
    everything = repr(logs)
    assert "marmalade" not in everything
    assert "zebra" not in everything
    assert TOKEN not in everything


# --- store failures and wiring ---------------------------------------------------------------------


class _BrokenStore(NullMemoryStore):
    """A store whose disk is gone: every call raises."""

    async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
        raise OSError("disk I/O error")

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        raise OSError("disk I/O error")


async def test_a_store_failure_is_a_500_with_a_reason_and_the_service_keeps_serving() -> None:
    app = create_app(_BrokenStore(), TOKEN)
    with capture_logs() as logs:
        failed = await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("x marks the spot")]})
        listed = await post(app, "/list", {"scopeKey": SCOPE, "limit": 5})
    assert failed.status_code == 500
    assert failed.json() == {"error": "store failure"}
    assert listed.status_code == 200
    failure = next(e for e in logs if e["event"] == "memory.service.store_failed")
    assert failure["error_type"] == "OSError"
    assert "x marks" not in repr(logs)


async def test_a_store_out_of_reach_is_a_503_and_the_service_keeps_serving() -> None:
    """A PostgreSQL store whose server does not answer raises `MemoryUnavailable`: the service says
    so with a 503, which its client reads as the service out of reach, not as a fault."""
    gone = PostgresMemoryStore(f"postgresql://nobody@127.0.0.1:{free_port()}/none", timeout=1.0)
    app = create_app(gone, TOKEN)
    try:
        with capture_logs() as logs:
            listed = await post(app, "/list", {"scopeKey": SCOPE, "limit": 5})
        async with asgi_client(app) as client:
            health = await client.get("/healthz")
    finally:
        await gone.aclose()
    assert (listed.status_code, listed.json()) == (503, {"error": "store unavailable"})
    assert health.status_code == 200
    (line,) = [e for e in logs if e["event"] == "memory.service.request"]
    assert (line["route"], line["status"], line["error"]) == ("/list", 503, "store unavailable")
    assert "nobody" not in repr(logs)  # nothing of the DSN


class _RefusingStore(InProcessMemoryStore):
    """A store with a stricter rule than the wire's: it refuses with ValueError, naming the field."""

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        raise ValueError("candidates[0].text must be valid Unicode text")


async def test_a_store_refusal_is_a_400_with_the_stores_reason() -> None:
    app = create_app(_RefusingStore(), TOKEN)
    reply = await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("x")]})
    assert reply.status_code == 400
    assert reply.json() == {"error": "candidates[0].text must be valid Unicode text"}


class _CaplessStore(NullMemoryStore):
    async def write(  # type: ignore[override]
        self, scope_key: str, candidates: Sequence[MemoryCandidate]
    ) -> WriteResult:
        return WriteResult()


def test_create_app_refuses_a_store_whose_write_takes_no_cap() -> None:
    with pytest.raises(TypeError, match="cap"):
        create_app(_CaplessStore(), TOKEN)  # type: ignore[arg-type]


# --- /retrieve_many: the four-scope read in one round trip (issue 15) ------------------------------


async def test_retrieve_many_reads_each_scope_with_its_relevance(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    for scope in (SCOPE, "user:slack:U1"):
        await post(
            app, "/write", {"scopeKey": scope, "records": [fact("deploy with make ship"), fact("lunch")]}
        )
    reply = await post(
        app,
        "/retrieve_many",
        {"scopeKeys": [SCOPE, "user:slack:U1", "user:slack:U2"], "query": "deploy", "limit": 5},
    )
    assert reply.status_code == 200
    scopes = reply.json()["scopes"]
    assert sorted(scopes) == [SCOPE, "user:slack:U1"]
    for scope, records in scopes.items():
        assert [r["id"] for r in records] == [f"mem:{scope}:1"]
        assert 0 < records[0]["relevance"] <= 1 and "embedding" not in records[0]
    assert store.records(SCOPE)[0].use_count == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"query": "x", "limit": 5}, "scopeKeys must be an array of 1 to 4 scope keys"),
        ({"scopeKeys": [], "query": "x", "limit": 5}, "scopeKeys must be an array of 1 to 4 scope keys"),
        ({"scopeKeys": ["org:a", "org:b", "org:c", "org:d", "org:e"], "query": "x", "limit": 5}, "1 to 4"),
        ({"scopeKeys": ["org:a", "bad key"], "query": "x", "limit": 5}, "scopeKeys[1] is invalid"),
        ({"scopeKeys": ["org:a", "org:a"], "query": "x", "limit": 5}, "scopeKeys[1] repeats a scope key"),
        ({"scopeKeys": ["org:a"], "limit": 5}, "query must be a string"),
        ({"scopeKeys": ["org:a"], "query": "x", "limit": 0}, "limit must be an integer"),
    ],
)
async def test_retrieve_many_refuses_a_bad_body_naming_the_field(
    app: Starlette, body: dict[str, Any], reason: str
) -> None:
    reply = await post(app, "/retrieve_many", body)
    assert reply.status_code == 400
    assert reason in reply.json()["error"]


async def test_retrieve_many_needs_the_token(app: Starlette) -> None:
    reply = await post(app, "/retrieve_many", {"scopeKeys": [SCOPE], "query": "x", "limit": 5}, headers={})
    assert reply.status_code == 401


async def test_a_persons_erasure_over_the_wire_leaves_their_id_in_no_file_and_no_log_line(
    tmp_path: Path,
) -> None:
    store = SqliteMemoryStore(tmp_path)
    try:
        await bob_everywhere(store)
        app = create_app(store, TOKEN)
        with capture_logs() as logs:
            erased = await post(app, "/erase-scope", {"scopeKey": BOB, "reason": "user_request"})
            renamed = await post(
                app, "/erase-person/pseudonymize", {"personKey": BOB, "pseudonym": draw_pseudonym()}
            )
        assert (erased.json()["erased"], renamed.json()["renamed"]) == (3, 4)
        assert "ubob" not in repr(logs).lower()
        assert [e["route"] for e in logs if e["event"] == "memory.service.request"] == [
            "/erase-scope",
            "/erase-person/pseudonymize",
        ]
        assert traces(tmp_path) == []
    finally:
        await store.aclose()
