"""HttpMemoryStore's curation methods: what they send, and how each failure reaches the person who asked
(always `MemoryStoreError` with the service's status, never an empty queue or history that only looks
empty), against the real service app and against misbehaving servers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from structlog.testing import capture_logs

from memory.service.app import create_app
from memory.stores.contract import CuratingStore
from memory.stores.http import HttpMemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import CurationEntry, MemoryCandidate, MemoryStoreError, WriteResult
from memory.wire import MAX_REFS
from tests.memory.service_support import CURATION_ROUTES, TOKEN, free_port

SCOPE = "org:acme"
RID = "mem:org:acme:1"
ADMIN = "user:slack:UADMIN"
BASE = "http://memory.test"
SECRET = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
ENTRY = CurationEntry(RID, SCOPE, "remembered", ADMIN, 1_800_000_000.0)

Call = Callable[[HttpMemoryStore], Awaitable[object]]

# Every curation method, as a person or a pass would call it.
CALLS: dict[str, Call] = {
    "write_pending": lambda s: s.write_pending(SCOPE, [candidate("we deploy with make ship")]),
    "pending": lambda s: s.pending(SCOPE, 5),
    "approve": lambda s: s.approve(SCOPE, RID, ADMIN),
    "reject": lambda s: s.reject(SCOPE, RID, ADMIN),
    "expire_pending": lambda s: s.expire_pending(1_800_000_000.0),
    "edit": lambda s: s.edit(SCOPE, RID, "we deploy with make release", ADMIN),
    "history": lambda s: s.history(SCOPE, RID),
    "record_curation": lambda s: s.record_curation(ENTRY),
    "curation_log": lambda s: s.curation_log(SCOPE, RID, 5),
    "active_records": lambda s: s.active_records(SCOPE),
    "merge": lambda s: s.merge(SCOPE, RID, ["mem:org:acme:2"], ADMIN),
}


def candidate(text: str, **extra: Any) -> MemoryCandidate:
    return MemoryCandidate(kind="fact", text=text, source_thread_key="slack:C1:1700000000.1", **extra)


def wire_record(n: int, scope: str = SCOPE, **overrides: Any) -> dict[str, Any]:
    return {
        "id": f"mem:{scope}:{n}",
        "scopeKey": scope,
        "kind": "fact",
        "text": f"fact {n}",
        "keywords": [],
        "sourceThreadKey": "slack:C1:1",
        "createdAt": 1_700_000_000.0,
        "useCount": 0,
        "status": "pending",
        **overrides,
    }


@dataclass
class FakeService:
    """A stand-in memory service: every route answers `reply(path, body)` and keeps what it was sent."""

    reply: Callable[[str, Any], Response]
    sent: list[tuple[str, Any]] = field(default_factory=list)

    def transport(self) -> httpx.ASGITransport:
        async def endpoint(request: Request) -> Response:
            body = json.loads(await request.body())
            self.sent.append((request.url.path, body))
            return self.reply(request.url.path, body)

        return httpx.ASGITransport(
            app=Starlette(routes=[Route(p, endpoint, methods=["POST"]) for p in CURATION_ROUTES])
        )


def answering(payload: Any, status: int = 200) -> FakeService:
    return FakeService(lambda path, body: JSONResponse(payload, status_code=status))


@pytest.fixture
async def client_of() -> AsyncIterator[Callable[..., HttpMemoryStore]]:
    made: list[HttpMemoryStore] = []

    def make(service: FakeService, **options: Any) -> HttpMemoryStore:
        made.append(HttpMemoryStore(BASE, TOKEN, transport=service.transport(), **options))
        return made[-1]

    yield make
    for client in made:
        await client.aclose()


class _PlainStore(NullMemoryStore):
    """A store that serves the service's data routes but keeps no review queue (not a CuratingStore)."""

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        return WriteResult()


def test_the_http_store_is_a_curating_store() -> None:
    assert isinstance(HttpMemoryStore(BASE, TOKEN), CuratingStore)


# --- the service refuses, and the person who asked is told ---------------------------------------


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_a_service_whose_store_cannot_curate_raises_with_501(name: str) -> None:
    transport = httpx.ASGITransport(app=create_app(_PlainStore(), TOKEN))
    client = HttpMemoryStore(BASE, TOKEN, transport=transport)
    try:
        with pytest.raises(MemoryStoreError) as raised:
            await CALLS[name](client)
    finally:
        await client.aclose()
    assert raised.value.status == 501
    assert "cannot curate" in str(raised.value)


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_a_wrong_token_raises_401_on_every_curation_call(name: str) -> None:
    transport = httpx.ASGITransport(app=create_app(_PlainStore(), TOKEN))
    client = HttpMemoryStore(BASE, "not-the-token", transport=transport)
    try:
        with pytest.raises(MemoryStoreError) as raised:
            await CALLS[name](client)
    finally:
        await client.aclose()
    assert raised.value.status == 401


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_a_store_failure_raises_with_500_and_the_route(
    name: str, client_of: Callable[..., HttpMemoryStore]
) -> None:
    with pytest.raises(MemoryStoreError) as raised:
        await CALLS[name](client_of(answering({"error": "store failure"}, 500)))
    assert raised.value.status == 500
    assert "store failure" in str(raised.value)


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_an_unreachable_service_raises_without_a_status(name: str) -> None:
    client = HttpMemoryStore(f"http://127.0.0.1:{free_port()}", TOKEN)
    try:
        with pytest.raises(MemoryStoreError) as raised:
            await CALLS[name](client)
    finally:
        await client.aclose()
    assert raised.value.status is None


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("write_pending", {"ok": True, "inserted": "one"}),
        ("pending", {"records": None}),
        ("approve", {"record": wire_record(1)}),
        ("approve", {"approved": True}),
        ("approve", {"approved": True, "record": wire_record(1, scope="org:other")}),
        ("reject", {"rejected": "yes"}),
        ("expire_pending", {"expired": -1}),
        ("edit", {"edited": True, "record": {"id": "x"}}),
        ("history", {"versions": {}}),
        (
            "history",
            {"versions": [{"id": RID, "scopeKey": SCOPE, "status": "gone", "createdAt": 1, "entries": []}]},
        ),
        (
            "history",
            {
                "versions": [
                    {"id": RID, "scopeKey": "org:other", "status": "active", "createdAt": 1, "entries": []}
                ]
            },
        ),
        ("curation_log", {}),
        ("active_records", {"records": "all of them"}),
        ("merge", {"merged": True}),
    ],
)
async def test_a_malformed_2xx_reply_raises_never_reads_as_nothing(
    name: str, payload: Any, client_of: Callable[..., HttpMemoryStore]
) -> None:
    with pytest.raises(MemoryStoreError) as raised:
        await CALLS[name](client_of(answering(payload)))
    assert raised.value.status == 200


# --- what each call sends and reads back ---------------------------------------------------------------


async def test_a_pending_write_sends_redacted_candidates_with_the_configured_cap(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    service = answering({"ok": True, "inserted": 1, "deduped": 0, "superseded": 0, "evicted": 0})
    client = client_of(service, cap=40)
    result = await client.write_pending(SCOPE, [candidate(f"deploy with {SECRET}")])
    assert result == WriteResult(inserted=1)
    ((path, body),) = service.sent
    assert path == "/pending/write"
    assert body["cap"] == 40
    assert body["records"][0]["text"] == "deploy with [REDACTED]"


async def test_an_empty_pending_batch_or_merge_makes_no_request(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    service = answering({})
    client = client_of(service)
    assert await client.write_pending(SCOPE, []) == WriteResult()
    assert await client.merge(SCOPE, RID, [], ADMIN) == 0
    assert service.sent == []


async def test_an_invalid_pending_candidate_is_refused_before_any_request(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    service = answering({})
    with pytest.raises(ValueError, match=r"candidates\[0\]\.text must not contain NUL"):
        await client_of(service).write_pending(SCOPE, [candidate("a\x00b")])
    assert service.sent == []


async def test_an_edit_redacts_the_new_text_before_it_crosses_the_wire(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    service = answering({"edited": True, "record": wire_record(2, status="active", text="x")})
    record = await client_of(service).edit(
        SCOPE, RID, f"deploy token {SECRET}", ADMIN, typed_in=("dm", "slack:D1")
    )
    assert record is not None and record.id == "mem:org:acme:2"
    ((_, body),) = service.sent
    assert body == {
        "scopeKey": SCOPE,
        "id": RID,
        "text": "deploy token [REDACTED]",
        "actor": ADMIN,
        "typedIn": {"origin": "dm", "conversation": "slack:D1"},
    }


@pytest.mark.parametrize("text", ["", "  ", "t" * 4001])
async def test_an_edit_with_empty_or_over_long_text_is_refused_before_any_request(
    text: str, client_of: Callable[..., HttpMemoryStore]
) -> None:
    service = answering({})
    with pytest.raises(ValueError, match=r"^text"):
        await client_of(service).edit(SCOPE, RID, text, ADMIN)
    assert service.sent == []


async def test_approve_and_edit_of_nothing_read_as_none(client_of: Callable[..., HttpMemoryStore]) -> None:
    flags = {"/pending/approve": {"approved": False}, "/records/edit": {"edited": False}}
    client = client_of(FakeService(lambda path, body: JSONResponse(flags[path])))
    assert await client.approve(SCOPE, RID, ADMIN) is None
    assert await client.edit(SCOPE, RID, "new text", ADMIN) is None


async def test_a_merge_of_many_duplicates_goes_in_requests_of_at_most_max_refs(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    service = FakeService(lambda path, body: JSONResponse({"merged": len(body["duplicateIds"])}))
    duplicates = [f"mem:org:acme:{n}" for n in range(2, 2 + MAX_REFS + 5)]
    assert await client_of(service).merge(SCOPE, RID, duplicates, ADMIN) == MAX_REFS + 5
    assert [len(body["duplicateIds"]) for _, body in service.sent] == [MAX_REFS, 5]
    assert all(body["survivorId"] == RID and body["actor"] == ADMIN for _, body in service.sent)


async def test_pending_drops_malformed_records_and_other_scopes_one_by_one_with_a_warning(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    payload = {"records": [wire_record(1), wire_record(2, kind="rumour"), wire_record(3, scope="org:other")]}
    with capture_logs() as logs:
        records = await client_of(answering(payload)).pending(SCOPE, 5)
    assert [r.id for r in records] == ["mem:org:acme:1"]
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert (warning["event"], warning["route"], warning["dropped"]) == (
        "memory.reply_dropped_items",
        "/pending/list",
        2,
    )


async def test_the_curation_log_drops_malformed_entries_and_other_scopes(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    good = {"recordId": RID, "scopeKey": SCOPE, "action": "approved", "actor": ADMIN, "at": 5.0}
    payload = {"entries": [good, {**good, "action": "liked"}, {**good, "scopeKey": "org:other"}]}
    with capture_logs() as logs:
        entries = await client_of(answering(payload)).curation_log(SCOPE, RID, 5)
    assert entries == [CurationEntry(RID, SCOPE, "approved", ADMIN, 5.0)]
    assert [e["dropped"] for e in logs if e["event"] == "memory.reply_dropped_items"] == [2]


async def test_expire_pending_sends_system_as_the_actor_by_default(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    service = answering({"expired": 3})
    assert await client_of(service).expire_pending(1_800_000_000.0) == 3
    assert service.sent == [("/pending/expire", {"olderThan": 1_800_000_000.0, "actor": "system"})]


async def test_a_bad_entry_or_actor_is_refused_by_the_stores_rule_before_any_request(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    service = answering({})
    client = client_of(service)
    with pytest.raises(ValueError, match="record_id"):
        await client.record_curation(CurationEntry(RID, "channel:slack:C1", "remembered", ADMIN, 1.0))
    for call in (
        client.approve(SCOPE, RID, " "),
        client.reject(SCOPE, RID, ""),
        client.merge(SCOPE, RID, [RID], ""),
    ):
        with pytest.raises(ValueError, match="actor"):
            await call
    assert service.sent == []


async def test_pages_are_clamped_as_every_store_clamps_them(
    client_of: Callable[..., HttpMemoryStore],
) -> None:
    service = FakeService(lambda path, body: JSONResponse({"records": [], "entries": []}))
    client = client_of(service)
    assert await client.pending(SCOPE, 0) == []
    assert await client.curation_log(SCOPE, RID, -3) == []
    assert service.sent == []
    await client.pending(SCOPE, 500)
    await client.curation_log(SCOPE, RID, 500)
    assert [body["limit"] for _, body in service.sent] == [50, 50]
