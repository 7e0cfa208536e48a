"""Every curating store runs the one curation contract (tests/memory/curation_contract.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from memory.ranking.embedder import Embedder
from memory.ranking.fusion import DEFAULT_RANKING, Ranking
from memory.rules.retention import NO_RETENTION, Retention
from memory.stores.in_process import InMemoryMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import DEFAULT_SCOPE_CAP, MemoryStore
from tests.memory.curation_contract import CurationContract
from tests.memory.store_contract import StoreFactory


@pytest.fixture(params=["in_memory", "sqlite"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """A factory of fresh, empty curating stores of one kind; each is closed afterwards."""
    made: list[MemoryStore] = []

    def factory(
        *,
        cap: int = DEFAULT_SCOPE_CAP,
        clock: Callable[[], float] = time.time,
        ranking: Ranking = DEFAULT_RANKING,
        embedder: Embedder | None = None,
        retention: Retention = NO_RETENTION,
    ) -> MemoryStore:
        store = InMemoryMemoryStore(
            cap=cap, clock=clock, ranking=ranking, embedder=embedder, retention=retention
        )
        made.append(store)
        return store

    yield factory
    for store in made:
        await store.aclose()


class TestCurationContract(CurationContract):
    """In-process and SQLite; PostgreSQL and the service join with their own fixtures."""
