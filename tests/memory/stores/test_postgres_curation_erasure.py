"""Curation that erases, on PostgreSQL: a rejected or expired pending record, a merged duplicate and
every version of a forgotten chain leave no copy of their text in the table's heap after a VACUUM
(read with pageinspect, as tests/memory/stores/test_erasure.py reads a forget)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import admin_connect, temp_schema, unique_application_name
from tests.memory.stores.test_erasure import (
    ORG,
    SECRET,
    SECRET_TEXT,
    _heap_tuples,
    candidate,
    pageinspect,  # noqa: F401  (the fixture)
)

ADMIN = "user:slack:U1"


async def rejected(store: PostgresMemoryStore) -> None:
    await store.write_pending(ORG, [candidate(SECRET_TEXT)])
    assert await store.reject(ORG, "mem:org:acme:2", ADMIN) is True


async def expired(store: PostgresMemoryStore) -> None:
    await store.write_pending(ORG, [candidate(SECRET_TEXT)])
    assert await store.expire_pending(float("inf")) == 1


async def merged(store: PostgresMemoryStore) -> None:
    await store.write(ORG, [candidate(SECRET_TEXT)])
    assert await store.merge(ORG, "mem:org:acme:1", ["mem:org:acme:2"], ADMIN) == 1


async def forgotten_chain(store: PostgresMemoryStore) -> None:
    await store.write(ORG, [candidate(SECRET_TEXT)])
    assert await store.edit(ORG, "mem:org:acme:2", "the vault door code rotates weekly", ADMIN) is not None
    assert await store.forget(ORG, "mem:org:acme:3") is True  # the new version: the old goes too


@pytest.mark.parametrize("erasing", [rejected, expired, merged, forgotten_chain])
async def test_the_erased_text_leaves_no_copy_in_the_heap_after_a_vacuum(
    pageinspect: None,  # noqa: F811
    erasing: Callable[[PostgresMemoryStore], Awaitable[None]],
) -> None:
    with temp_schema() as schema:
        store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
        try:
            await store.write(ORG, [candidate("deploys happen on tuesdays")])
            await erasing(store)
            table = f"{schema.name}.memory_records"
            with admin_connect() as conn:
                conn.execute(f"VACUUM {table}")
                tuples = _heap_tuples(conn, table)
            assert not any(SECRET.lower().encode() in t for t in tuples)
            assert any(b"tuesdays" in t for t in tuples)  # the check can see live text
        finally:
            await store.aclose()
