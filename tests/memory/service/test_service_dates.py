"""`observedAt` on the service's wire: camelCase, epoch seconds, omitted when absent, refused when bad."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.applications import Starlette

from memory.rules.engine import prepare_batch
from memory.service.app import create_app
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate
from memory.wire import candidate_from_wire, candidate_to_wire, record_from_wire, record_to_wire
from tests.memory.records import NOW, record
from tests.memory.service_support import AUTH, TOKEN, asgi_client, fact

SCOPE = "org:acme"


@pytest.fixture
def store() -> InProcessMemoryStore:
    return InProcessMemoryStore(clock=lambda: NOW)


@pytest.fixture
def app(store: InProcessMemoryStore) -> Starlette:
    return create_app(store, TOKEN)


async def post(app: Starlette, path: str, body: Any) -> Any:
    async with asgi_client(app) as client:
        return await client.post(path, json=body, headers=AUTH)


async def test_observed_at_is_stored_and_sent_back_and_defaults_to_the_write_time(
    app: Starlette, store: InProcessMemoryStore
) -> None:
    records = [fact("deploy with make", observedAt=NOW - 3600), fact("deploy from main")]
    assert (await post(app, "/write", {"scopeKey": SCOPE, "records": records})).status_code == 200
    assert [r.observed_at for r in store.records(SCOPE)] == [NOW - 3600, NOW]
    listed = (await post(app, "/list", {"scopeKey": SCOPE, "limit": 5})).json()["records"]
    assert {r["text"]: r["observedAt"] for r in listed} == {
        "deploy with make": NOW - 3600,
        "deploy from main": NOW,
    }


@pytest.mark.parametrize("value", ["yesterday", -1, True, [1.0], {"t": 1}])
async def test_a_bad_observed_at_is_400_naming_the_field(
    app: Starlette, store: InProcessMemoryStore, value: object
) -> None:
    reply = await post(app, "/write", {"scopeKey": SCOPE, "records": [fact("x", observedAt=value)]})
    assert reply.status_code == 400
    assert reply.json()["error"].startswith("records[0].observedAt"), reply.text
    assert store.records(SCOPE) == []


def test_observed_at_is_omitted_when_absent_and_read_back_as_none() -> None:
    bare = record("deploy")
    assert "observedAt" not in record_to_wire(bare)
    assert record_from_wire(record_to_wire(bare)).observed_at is None
    dated = record("deploy", observed_at=NOW - 60)
    assert record_to_wire(dated)["observedAt"] == NOW - 60
    assert record_from_wire(record_to_wire(dated)) == dated
    candidate = MemoryCandidate("fact", "deploy", "slack:C1:1.0")
    assert "observedAt" not in candidate_to_wire(candidate)
    timed = MemoryCandidate("fact", "deploy", "slack:C1:1.0", observed_at=NOW)
    assert candidate_from_wire(candidate_to_wire(timed), 0) == timed


@pytest.mark.parametrize("value", [-1.0, float("inf"), float("nan"), True, "1800000000"])
def test_a_direct_write_refuses_what_the_wire_refuses(value: object) -> None:
    bad = MemoryCandidate("fact", "deploy", "slack:C1:1.0", observed_at=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^candidates\[0\]\.observed_at must be"):
        prepare_batch([bad])
