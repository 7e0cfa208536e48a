"""The memory service's curation routes in-process: auth, validation, the refusal of a store that cannot
curate, and what each route does to the store, its log line and its metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from starlette.applications import Starlette

from memory.service.app import create_app
from memory.stores.in_process import NullMemoryStore
from memory.types import MemoryCandidate, WriteResult
from tests.memory.service_support import AUTH, TOKEN, asgi_client, fact

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
    "/records/edit": {"scopeKey": SCOPE, "id": RID, "text": "we deploy with make release", "actor": ACTOR},
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
    assert reply.json() == {
        "error": "_PlainStore cannot curate memory (review, edit, history, merge)"
    }


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
