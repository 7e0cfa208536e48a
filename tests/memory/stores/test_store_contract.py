"""Every store runs the one contract suite (tests/memory/store_contract.py): they cannot drift apart."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from memory.ranking.embedder import Embedder
from memory.ranking.fusion import DEFAULT_RANKING, Ranking
from memory.rules.retention import NO_RETENTION, Retention
from memory.service.app import create_app
from memory.stores.contract import MemoryStore
from memory.stores.http import HttpMemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import DEFAULT_SCOPE_CAP
from tests.memory.curation_contract import CurationContract
from tests.memory.service_support import TOKEN
from tests.memory.store_contract import StoreContract, StoreFactory


@pytest.fixture(params=["in_memory", "sqlite"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """A factory of fresh, empty stores of one kind; every store it made is closed afterwards."""
    made: list[MemoryStore] = []

    def factory(
        *,
        cap: int = DEFAULT_SCOPE_CAP,
        clock: Callable[[], float] = time.time,
        ranking: Ranking = DEFAULT_RANKING,
        embedder: Embedder | None = None,
        retention: Retention = NO_RETENTION,
    ) -> MemoryStore:
        store: MemoryStore
        if request.param == "in_memory":
            store = InProcessMemoryStore(
                cap=cap, clock=clock, ranking=ranking, embedder=embedder, retention=retention
            )
        else:
            path = tmp_path / f"memory-{len(made)}"
            store = SqliteMemoryStore(
                path, cap=cap, clock=clock, ranking=ranking, embedder=embedder, retention=retention
            )
        made.append(store)
        return store

    yield factory
    for store in made:
        await store.aclose()


class TestStoreContract(StoreContract):
    """In-process and SQLite today; a later backend adds a param to `make_store`."""


@pytest.fixture(name="make_service_store")
async def _make_service_store(tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """HttpMemoryStore → the memory service (in-process ASGI) → a fresh SQLite store."""
    made: list[MemoryStore] = []

    def factory(
        *,
        cap: int = DEFAULT_SCOPE_CAP,
        clock: Callable[[], float] = time.time,
        retention: Retention = NO_RETENTION,
        ranking: Ranking = DEFAULT_RANKING,
        embedder: Embedder | None = None,
    ) -> MemoryStore:
        path = tmp_path / f"service-{len(made)}"
        inner = SqliteMemoryStore(
            path, cap=cap, clock=clock, retention=retention, ranking=ranking, embedder=embedder
        )
        transport = httpx.ASGITransport(app=create_app(inner, TOKEN))
        made.extend([inner, HttpMemoryStore("http://memory.test", TOKEN, cap=cap, transport=transport)])
        return made[-1]

    yield factory
    for store in made:
        await store.aclose()


class TestServiceStoreContract(StoreContract):
    """Every behaviour through the memory service's routes and the bot's HTTP client: the store front
    over the service as its backend, over a SQLite store behind the service's own front."""

    @pytest.fixture
    def make_store(self, make_service_store: StoreFactory) -> StoreFactory:
        return make_service_store


class TestServiceCurationContract(CurationContract):
    """The review queue, edits, history, merges and the curation log through the service's curation
    routes and the bot's HTTP client, over a SQLite store."""

    @pytest.fixture
    def make_store(self, make_service_store: StoreFactory) -> StoreFactory:
        return make_service_store
