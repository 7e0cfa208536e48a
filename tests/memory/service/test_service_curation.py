"""The memory service's curation routes in-process: auth, validation, the refusal of a store that cannot
curate, and what each route does to the store, its log line and its metrics."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from structlog.testing import capture_logs

from memory.service.app import create_app
from memory.service.redact_cache import RedactionCache
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate, WriteResult
from ops.metrics import Metrics
from tests.memory.service_support import AUTH, CURATION_ROUTES, TOKEN, asgi_client, fact

SCOPE = "org:acme"
RID = "mem:org:acme:1"
ACTOR = "user:slack:UADMIN"


async def post(app: Starlette, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    async with asgi_client(app, AUTH if headers is None else headers) as client:
        return await client.post(path, json=body)


# One valid body per curation route.
VALID: dict[str, dict[str, Any]] = {
    "/pending/write": {"scopeKey": SCOPE, "records": [fact("we deploy with make ship")]},
    "/pending/list": {"scopeKey": SCOPE, "limit": 5},
    "/pending/approve": {"scopeKey": SCOPE, "id": RID, "actor": ACTOR},
    "/pending/reject": {"scopeKey": SCOPE, "id": RID, "actor": ACTOR},
    "/pending/expire": {"olderThan": 1_800_000_000.0, "actor": "system"},
    "/records/edit": {
        "scopeKey": SCOPE,
        "id": RID,
        "text": "we deploy with make release",
        "actor": ACTOR,
        "typedIn": {"origin": "machine"},
    },
    "/records/history": {"scopeKey": SCOPE, "id": RID},
    "/records/active": {"scopeKey": SCOPE},
    "/records/merge": {
        "scopeKey": SCOPE,
        "survivorId": RID,
        "duplicateIds": ["mem:org:acme:2"],
        "actor": ACTOR,
    },
    "/curation/record": {
        "recordId": RID,
        "scopeKey": SCOPE,
        "action": "remembered",
        "actor": ACTOR,
        "at": 1_800_000_000.0,
    },
    "/curation/log": {"scopeKey": SCOPE, "id": RID, "limit": 5},
}


class _PlainStore(NullMemoryStore):
    """A store that serves the service's data routes but keeps no review queue (not a CuratingStore)."""

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        return WriteResult()


@pytest.fixture
def plain_app() -> Starlette:
    return create_app(_PlainStore(), TOKEN)


def test_the_app_mounts_every_curation_route_as_a_post(plain_app: Starlette) -> None:
    mounted = {route.path: route.methods for route in plain_app.routes if isinstance(route, Route)}
    assert sorted(VALID) == sorted(CURATION_ROUTES)
    assert all(mounted.get(path) == {"POST"} for path in CURATION_ROUTES), mounted


@pytest.mark.parametrize("path", sorted(VALID))
async def test_a_curation_route_refuses_a_missing_or_wrong_token(plain_app: Starlette, path: str) -> None:
    for headers in ({}, {"Authorization": f"Bearer {TOKEN}x"}):
        reply = await post(plain_app, path, VALID[path], headers)
        assert reply.status_code == 401
        assert reply.json() == {"error": "unauthorized"}


@pytest.mark.parametrize("path", sorted(VALID))
async def test_a_curation_route_takes_only_post(plain_app: Starlette, path: str) -> None:
    async with asgi_client(plain_app, AUTH) as client:
        reply = await client.get(path)
    assert reply.status_code == 405
    assert reply.headers["allow"] == "POST"


@pytest.mark.parametrize("path", sorted(VALID))
async def test_a_store_that_cannot_curate_is_a_501_naming_it_never_an_empty_answer(
    plain_app: Starlette, path: str
) -> None:
    reply = await post(plain_app, path, VALID[path])
    assert reply.status_code == 501
    assert reply.json() == {"error": "_PlainStore cannot curate memory (review, edit, history, merge)"}


def _with(path: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    body = {**VALID[path], **fields}
    return path, {key: value for key, value in body.items() if value is not ...}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (*_with("/pending/write", scopeKey="org:ac me"), "scopeKey"),
        (*_with("/pending/write", records=...), "records"),
        (*_with("/pending/write", records=[fact("")]), "records[0].text"),
        (*_with("/pending/write", records=[fact(f"f{i}") for i in range(51)]), "records"),
        (*_with("/pending/write", cap=0), "cap"),
        (*_with("/pending/list", limit=51), "limit"),
        (*_with("/pending/list", scopeKey=...), "scopeKey"),
        (*_with("/pending/approve", id=""), "id"),
        (*_with("/pending/approve", id="mem:org:acme 1"), "id"),
        (*_with("/pending/approve", actor=...), "actor"),
        (*_with("/pending/approve", cap=10_001), "cap"),
        (*_with("/pending/reject", actor="a" * 201), "actor"),
        (*_with("/pending/reject", scopeKey=7), "scopeKey"),
        (*_with("/pending/expire", olderThan=...), "olderThan"),
        (*_with("/pending/expire", olderThan="yesterday"), "olderThan"),
        (*_with("/pending/expire", olderThan=-1), "olderThan"),
        (*_with("/pending/expire", actor=""), "actor"),
        (*_with("/records/edit", text="   "), "text"),
        (*_with("/records/edit", text="t" * 4001), "text"),
        (*_with("/records/edit", text=...), "text"),
        (*_with("/records/edit", id=None), "id"),
        (*_with("/records/edit", typedIn={"origin": "everyone"}), "typedIn.origin"),
        (*_with("/records/edit", typedIn={"conversation": "slack:D1"}), "typedIn.origin"),
        (*_with("/records/edit", typedIn="dm"), "typedIn"),
        # Absent, an edit typed in a DM would be taken for the widest surface's: refused, not guessed.
        (*_with("/records/edit", typedIn=...), "typedIn"),
        (*_with("/records/history", id="x" * 201), "id"),
        (*_with("/records/active", scopeKey=""), "scopeKey"),
        (*_with("/records/merge", survivorId=...), "survivorId"),
        (*_with("/records/merge", duplicateIds="mem:org:acme:2"), "duplicateIds"),
        (*_with("/records/merge", duplicateIds=[f"mem:org:acme:{i}" for i in range(201)]), "duplicateIds"),
        (*_with("/records/merge", duplicateIds=["mem:org:acme:2", ""]), "duplicateIds[1]"),
        (*_with("/records/merge", actor=...), "actor"),
        (*_with("/curation/record", action="liked"), "entry.action"),
        (*_with("/curation/record", at=...), "entry.at"),
        (*_with("/curation/record", scopeKey="org:ac me"), "scopeKey"),
        (*_with("/curation/record", recordId="mem:org:acme 1"), "entry.recordId"),
        (*_with("/curation/record", relatedId="two words"), "entry.relatedId"),
        (*_with("/curation/log", limit=0), "limit"),
        (*_with("/curation/log", id=...), "id"),
    ],
)
async def test_a_malformed_curation_body_is_400_naming_the_field_before_the_store_is_asked(
    plain_app: Starlette, path: str, body: dict[str, Any], field: str
) -> None:
    reply = await post(plain_app, path, body)
    assert reply.status_code == 400, reply.json()
    error = reply.json()["error"]
    assert error.startswith(field), error


# --- over a curating store ------------------------------------------------------------------------------

SECRET = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"


@pytest.fixture
def store() -> InProcessMemoryStore:
    return InProcessMemoryStore(cap=500)


@pytest.fixture
def cache() -> RedactionCache:
    return RedactionCache()


@pytest.fixture
def app(store: InProcessMemoryStore, cache: RedactionCache) -> Starlette:
    return create_app(store, TOKEN, redaction=cache)


async def test_a_pending_record_is_reviewed_over_the_wire_in_camel_case(app: Starlette) -> None:
    wrote = await post(app, "/pending/write", VALID["/pending/write"])
    assert wrote.json() == {"ok": True, "inserted": 1, "deduped": 0, "superseded": 0, "evicted": 0}
    (waiting,) = (await post(app, "/pending/list", VALID["/pending/list"])).json()["records"]
    assert (waiting["id"], waiting["status"], waiting["sourceThreadKey"]) == (
        RID,
        "pending",
        fact("")["sourceThreadKey"],
    )
    assert (await post(app, "/list", {"scopeKey": SCOPE, "limit": 5})).json()["records"] == []
    approved = (await post(app, "/pending/approve", VALID["/pending/approve"])).json()
    assert (approved["approved"], approved["record"]["status"]) == (True, "active")
    assert (await post(app, "/pending/approve", VALID["/pending/approve"])).json() == {"approved": False}
    log = (await post(app, "/curation/log", VALID["/curation/log"])).json()["entries"]
    assert [(e["action"], e["actor"]) for e in log] == [("approved", ACTOR)]


async def test_an_edit_answers_the_new_version_and_the_history_both(app: Starlette) -> None:
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("we deploy with make ship")]})
    edited = (await post(app, "/records/edit", VALID["/records/edit"])).json()
    assert (edited["edited"], edited["record"]["id"], edited["record"]["supersedes"]) == (
        True,
        "mem:org:acme:2",
        RID,
    )
    versions = (await post(app, "/records/history", VALID["/records/history"])).json()["versions"]
    assert [(v["id"], v["status"], v["text"]) for v in versions] == [
        (RID, "superseded", "we deploy with make ship"),
        ("mem:org:acme:2", "active", "we deploy with make release"),
    ]
    assert [e["action"] for e in versions[0]["entries"]] == ["edited"]


async def test_pending_and_history_text_leaves_redacted_even_from_a_row_stored_before_redaction(
    tmp_path: Path,
) -> None:
    store = SqliteMemoryStore(tmp_path / "memory", cap=500)
    try:
        app = create_app(store, TOKEN)
        await post(app, "/pending/write", {"scopeKey": SCOPE, "records": [fact("deploy notes")]})
        with sqlite3.connect(store.database_path(SCOPE)) as raw:  # a row written by an older build
            raw.execute("UPDATE records SET text = ? WHERE seq = 1", (f"deploy {SECRET}",))
        app = create_app(store, TOKEN)
        pending = await post(app, "/pending/list", VALID["/pending/list"])
        history = await post(app, "/records/history", VALID["/records/history"])
    finally:
        await store.aclose()
    assert [r["text"] for r in pending.json()["records"]] == ["deploy [REDACTED]"]
    assert [v["text"] for v in history.json()["versions"]] == ["deploy [REDACTED]"]
    assert SECRET not in pending.text + history.text


async def test_curation_replies_never_enter_the_redaction_cache_and_changes_drop_what_it_held(
    app: Starlette, cache: RedactionCache
) -> None:
    await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("we deploy with make ship")]})
    await post(app, "/list", {"scopeKey": SCOPE, "limit": 5})
    assert len(cache) == 1
    await post(app, "/records/edit", VALID["/records/edit"])  # the listed record is superseded
    assert len(cache) == 0
    await post(app, "/pending/write", {"scopeKey": SCOPE, "records": [fact("the bot runs on fridays")]})
    for path in ("/pending/list", "/records/history", "/records/active"):
        assert (await post(app, path, VALID[path])).status_code == 200
    assert len(cache) == 0


async def test_one_log_line_per_curation_request_with_ids_actor_and_counts_never_text(app: Starlette) -> None:
    with capture_logs() as logs:
        await post(app, "/pending/write", VALID["/pending/write"])
        await post(app, "/pending/approve", VALID["/pending/approve"])
        await post(app, "/records/edit", VALID["/records/edit"])
        await post(app, "/records/history", VALID["/records/history"])
    events = [e for e in logs if e["event"] == "memory.service.request"]
    assert [(e["route"], e["status"]) for e in events] == [
        ("/pending/write", 200),
        ("/pending/approve", 200),
        ("/records/edit", 200),
        ("/records/history", 200),
    ]
    wrote, approved, edited, history = events
    assert (wrote["scope_key"], wrote["candidates"], wrote["inserted"]) == (SCOPE, 1, 1)
    assert (approved["id"], approved["actor"], approved["approved"]) == (RID, ACTOR, True)
    assert (edited["id"], edited["new_id"], edited["edited"]) == (RID, "mem:org:acme:2", True)
    assert history["versions"] == 2
    assert "deploy with" not in repr(logs)


async def test_curation_actions_move_their_counters(store: InProcessMemoryStore) -> None:
    metrics = Metrics()
    app = create_app(store, TOKEN, metrics=metrics)
    await post(app, "/pending/write", {"scopeKey": SCOPE, "records": [fact("one rule"), fact("two rule")]})
    await post(app, "/pending/approve", VALID["/pending/approve"])
    await post(app, "/pending/reject", {**VALID["/pending/reject"], "id": "mem:org:acme:2"})
    await post(app, "/pending/reject", {**VALID["/pending/reject"], "id": "mem:org:acme:2"})  # nothing left

    def value(name: str, **labels: str) -> float:
        found = metrics.registry.get_sample_value(name, labels)
        return 0.0 if found is None else found

    assert value("switchboard_memory_writes_total", result="pending") == 2
    assert value("switchboard_memory_curations_total", action="approved") == 1
    assert value("switchboard_memory_curations_total", action="rejected") == 1


async def test_the_callers_cap_bounds_the_pending_queue_and_the_approval_eviction(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory", cap=500)
    try:
        app = create_app(store, TOKEN)
        await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("the bot runs on fridays")], "cap": 1})
        rules = [
            fact("deploys go through make ship"),
            fact("rollbacks take a ticket"),
            fact("oncall is weekly"),
        ]
        written = await post(app, "/pending/write", {"scopeKey": SCOPE, "records": rules, "cap": 2})
        waiting = (await post(app, "/pending/list", {"scopeKey": SCOPE, "limit": 10})).json()["records"]
        newest = waiting[0]["id"]
        target = {"scopeKey": SCOPE, "id": newest, "actor": "user:slack:UADMIN", "cap": 1}
        await post(app, "/pending/approve", target)
        active = await store.active_records(SCOPE)
    finally:
        await store.aclose()
    assert written.json()["evicted"] == 1  # the oldest of three pending beyond the cap of 2
    assert [r["text"] for r in waiting] == ["oncall is weekly", "rollbacks take a ticket"]
    assert [r.id for r in active] == [newest]  # the approval evicted over the caller's cap of 1
