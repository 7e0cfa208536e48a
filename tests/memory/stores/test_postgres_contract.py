"""PostgresMemoryStore runs the one store contract suite (tests/memory/store_contract.py) too.

Each store the factory makes gets a schema of its own on the real server, with no rows
(`store_schema`: one an earlier test's store made and emptied, where it can), so every store starts
empty; the store opens itself on first use. An unreachable server fails these tests, never skips them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest

from memory.ranking.embedder import Embedder
from memory.ranking.fusion import DEFAULT_RANKING, Ranking
from memory.rules.retention import NO_RETENTION, Retention
from memory.stores.contract import MemoryStore
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import DEFAULT_SCOPE_CAP
from tests.memory.postgres_support import store_schema, unique_application_name
from tests.memory.store_contract import StoreContract, StoreFactory


@pytest.fixture
async def make_store() -> AsyncIterator[StoreFactory]:
    made: list[MemoryStore] = []
    with contextlib.ExitStack() as schemas:

        def factory(
            *,
            cap: int = DEFAULT_SCOPE_CAP,
            clock: Callable[[], float] | None = None,
            ranking: Ranking = DEFAULT_RANKING,
            embedder: Embedder | None = None,
            retention: Retention = NO_RETENTION,
        ) -> MemoryStore:
            schema = schemas.enter_context(store_schema())
            store = PostgresMemoryStore(
                schema.dsn,
                cap=cap,
                clock=clock or time.time,
                ranking=ranking,
                embedder=embedder,
                application_name=unique_application_name(),
                retention=retention,
            )
            made.append(store)
            return store

        try:
            yield factory
        finally:
            for store in made:
                await store.aclose()


class TestPostgresStoreContract(StoreContract):
    """The same behaviours the in-process and SQLite stores show, on PostgreSQL."""
