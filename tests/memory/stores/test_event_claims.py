"""Event claims (memory/rules/claims.py): a key is claimed once across every process sharing a store —
two SQLite stores over one data directory, two PostgreSQL stores on one schema, two bots' HTTP clients
of one memory service — until the claim expires; bad keys and times are refused naming the field."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import psycopg
import pytest

from memory.rules.claims import PURGE_BATCH
from memory.service.app import create_app
from memory.stores.contract import EventClaims
from memory.stores.http import HttpMemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryStoreError
from tests.memory.postgres_support import TempSchema
from tests.memory.service_support import TOKEN

NOW = 1_800_000_000.0
TTL = 600.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


Pair = tuple[EventClaims, EventClaims]
PairFactory = Callable[[Clock], Awaitable[Pair]]


@pytest.fixture
def schema(emptied_schema: TempSchema) -> TempSchema:
    """These tests open stores on the schema and touch only their rows: an emptied one will do."""
    return emptied_schema


@pytest.fixture(params=["sqlite", "postgres", "http"])
async def make_pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[PairFactory]:
    """Two claimants of one shared store, as two processes would hold them."""
    opened: list[SqliteMemoryStore | PostgresMemoryStore | HttpMemoryStore] = []

    async def sqlite(clock: Clock) -> Pair:
        first, second = (SqliteMemoryStore(tmp_path / "memory", clock=clock) for _ in range(2))
        opened.extend((first, second))
        return first, second

    async def postgres(clock: Clock) -> Pair:
        schema: TempSchema = request.getfixturevalue("schema")
        first = await PostgresMemoryStore.connect(schema.dsn, clock=clock, min_size=1, max_size=2)
        second = await PostgresMemoryStore.connect(schema.dsn, clock=clock, min_size=1, max_size=2)
        opened.extend((first, second))
        return first, second

    async def http(clock: Clock) -> Pair:
        backing = SqliteMemoryStore(tmp_path / "memory", clock=clock)
        app = create_app(backing, TOKEN)
        clients = [
            HttpMemoryStore("http://memory.test", TOKEN, transport=httpx.ASGITransport(app=app))
            for _ in range(2)
        ]
        opened.extend((backing, *clients))
        return clients[0], clients[1]

    yield {"sqlite": sqlite, "postgres": postgres, "http": http}[request.param]
    for store in reversed(opened):
        await store.aclose()


async def test_a_key_is_claimed_once_across_claimants_until_it_expires(make_pair: PairFactory) -> None:
    clock = Clock()
    first, second = await make_pair(clock)
    assert await first.claim_event("slack:message:T1:C1:1.000001", TTL) is True
    assert await second.claim_event("slack:message:T1:C1:1.000001", TTL) is False
    assert await first.claim_event("slack:message:T1:C1:1.000001", TTL) is False
    assert await second.claim_event("slack:message:T1:C1:2.000002", TTL) is True  # another key
    clock.now += TTL - 1
    assert await second.claim_event("slack:message:T1:C1:1.000001", TTL) is False
    clock.now += 1  # expired: the key may be claimed again, once
    assert await second.claim_event("slack:message:T1:C1:1.000001", TTL) is True
    assert await first.claim_event("slack:message:T1:C1:1.000001", TTL) is False


async def test_concurrent_claims_of_one_key_have_exactly_one_winner(make_pair: PairFactory) -> None:
    first, second = await make_pair(Clock())
    claims = [store.claim_event("slack:message:T1:C9:5.000005", TTL) for store in (first, second) * 6]
    assert sorted(await asyncio.gather(*claims)) == [False] * 11 + [True]


@pytest.mark.parametrize(
    ("key", "ttl", "field"),
    [
        ("", TTL, "key"),
        ("x" * 201, TTL, "key"),
        ("has space", TTL, "key"),
        ("nul\x00", TTL, "key"),
        ("k", 0, "ttl"),
        ("k", float("inf"), "ttl"),
        ("k", 8 * 86_400.0, "ttl"),
    ],
)
async def test_a_bad_key_or_time_to_live_is_refused_naming_it(
    make_pair: PairFactory, key: str, ttl: float, field: str
) -> None:
    first, _ = await make_pair(Clock())
    with pytest.raises((ValueError, MemoryStoreError), match=field) as raised:
        await first.claim_event(key, ttl)
    assert "\n" not in str(raised.value)


async def test_expired_claims_are_purged_as_new_ones_come(schema: TempSchema, tmp_path: Path) -> None:
    """Each claim removes expired ones on its way: the table never grows past the live claims."""
    clock = Clock()
    store = await PostgresMemoryStore.connect(schema.dsn, clock=clock, min_size=1, max_size=1)
    try:
        for n in range(PURGE_BATCH * 2):
            assert await store.claim_event(f"old:{n}", 10)
        clock.now += 11
        for n in range(3):
            assert await store.claim_event(f"new:{n}", 10)
    finally:
        await store.aclose()
    with psycopg.connect(schema.dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memory_event_claims").fetchone()
    assert row is not None and row[0] == 3


async def test_a_service_over_a_store_that_cannot_claim_answers_501(tmp_path: Path) -> None:
    app = create_app(InProcessMemoryStore(), TOKEN)
    client = HttpMemoryStore("http://memory.test", TOKEN, transport=httpx.ASGITransport(app=app))
    try:
        with pytest.raises(MemoryStoreError, match=r"/events/claim failed: 501 .*cannot claim events"):
            await client.claim_event("slack:message:T1:C1:1.000001", TTL)
    finally:
        await client.aclose()


async def test_the_claim_route_checks_the_token_first(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory")
    transport = httpx.ASGITransport(app=create_app(store, TOKEN))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://memory.test") as client:
            reply = await client.post("/events/claim", json={"key": "k", "ttlSeconds": 5})
            assert reply.status_code == 401
            wrong = await client.post(
                "/events/claim", json={"key": "k"}, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert (wrong.status_code, wrong.json()["error"]) == (400, "ttlSeconds must be a number")
    finally:
        with contextlib.suppress(Exception):
            await store.aclose()
