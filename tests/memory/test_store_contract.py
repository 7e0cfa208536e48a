"""Every store runs the one contract suite (tests/memory/store_contract.py): they cannot drift apart."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from memory.embedder import Embedder
from memory.ranking import DEFAULT_RANKING, Ranking
from memory.sqlite_store import SqliteMemoryStore
from memory.stores import InMemoryMemoryStore
from memory.types import DEFAULT_SCOPE_CAP, MemoryStore
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
    ) -> MemoryStore:
        store: MemoryStore
        if request.param == "in_memory":
            store = InMemoryMemoryStore(cap=cap, clock=clock, ranking=ranking, embedder=embedder)
        else:
            path = tmp_path / f"memory-{len(made)}"
            store = SqliteMemoryStore(path, cap=cap, clock=clock, ranking=ranking, embedder=embedder)
        made.append(store)
        return store

    yield factory
    for store in made:
        await store.aclose()


class TestStoreContract(StoreContract):
    """In-process and SQLite today; a later backend adds a param to `make_store`."""
