"""Handing out a pooled connection (memory/stores/postgres/connections.py): a connection whose socket is
quiet goes out without a round trip; one the server has dropped, or one inside a transaction, does not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from memory.stores.postgres.connections import quiet_and_idle
from tests.memory.postgres_support import BASE_DSN, terminate_backends, unique_application_name

Conn = psycopg.AsyncConnection[tuple[object, ...]]


@pytest.fixture
async def named() -> AsyncIterator[tuple[Conn, str]]:
    name = unique_application_name()
    conn = await psycopg.AsyncConnection.connect(BASE_DSN, application_name=name)
    try:
        yield conn, name
    finally:
        await conn.close()


async def test_an_idle_live_connection_needs_no_check(named: tuple[Conn, str]) -> None:
    conn, _ = named
    await conn.execute("SELECT 1")
    await conn.rollback()
    assert quiet_and_idle(conn)


async def test_a_connection_whose_backend_was_terminated_is_checked(named: tuple[Conn, str]) -> None:
    conn, name = named
    assert await terminate_backends(name) == 1
    assert not quiet_and_idle(conn)


async def test_a_connection_inside_a_transaction_is_checked(named: tuple[Conn, str]) -> None:
    conn, _ = named
    await conn.execute("SELECT 1")  # not autocommit: the transaction stays open
    assert not quiet_and_idle(conn)


async def test_a_closed_connection_is_checked(named: tuple[Conn, str]) -> None:
    conn, _ = named
    await conn.close()
    assert not quiet_and_idle(conn)
