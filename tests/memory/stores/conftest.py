"""Fixtures the stores' tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import TempSchema, store_schema, temp_schema, unique_application_name


@pytest.fixture
def new_schema() -> Iterator[TempSchema]:
    """A throwaway schema on the local test server that no store has touched, dropped after the test:
    for a test of what a store makes of a new schema, or of tables it did not make."""
    with temp_schema() as created:
        yield created


@pytest.fixture
def schema(new_schema: TempSchema) -> TempSchema:
    """A module's schema: a new one, unless the module says an emptied one will do (`emptied_schema`)."""
    return new_schema


@pytest.fixture
def emptied_schema() -> Iterator[TempSchema]:
    """A schema holding a store's tables and no rows, maybe one an earlier test's store made
    (`store_schema`): for a module whose tests only open stores on it and touch their rows (such a module
    overrides `schema` with it), never one that makes or changes tables itself."""
    with store_schema() as emptied:
        yield emptied


@pytest.fixture
def emptied_or_new_schema(request: pytest.FixtureRequest) -> TempSchema:
    """An emptied schema (`emptied_schema`), or a new one for a test marked `new_schema`: for a module
    whose tests mostly open stores and touch their rows, and a few test what a store makes of a new
    schema or of tables it did not make, or change the tables (a function, a trigger, an index)."""
    wanted = "new_schema" if request.node.get_closest_marker("new_schema") else "emptied_schema"
    schema: TempSchema = request.getfixturevalue(wanted)
    return schema


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
