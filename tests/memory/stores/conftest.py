"""Fixtures the stores' tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import TempSchema, store_schema, temp_schema, unique_application_name


@pytest.fixture
def schema() -> Iterator[TempSchema]:
    """A throwaway schema on the local test server, dropped after the test."""
    with temp_schema() as created:
        yield created


@pytest.fixture
def emptied_schema() -> Iterator[TempSchema]:
    """A schema holding a store's tables and no rows, maybe one an earlier test's store made
    (`store_schema`): for a module whose tests only open stores on it and touch their rows (such a module
    overrides `schema` with it), never one that makes or changes tables itself."""
    with store_schema() as emptied:
        yield emptied


@pytest.fixture
async def replicas(schema: TempSchema) -> AsyncIterator[tuple[PostgresMemoryStore, PostgresMemoryStore]]:
    """Two PostgreSQL replicas on the schema, each with its own pool (a module may define its own)."""
    first, second = (
        PostgresMemoryStore(schema.dsn, application_name=unique_application_name()) for _ in range(2)
    )
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()
