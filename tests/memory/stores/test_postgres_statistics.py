"""A server without autovacuum is named at start-up: the store's plans need the statistics it keeps."""

from __future__ import annotations

import psycopg
import pytest
from structlog.testing import capture_logs

from memory.stores.postgres.connections import autovacuum_on
from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import BASE_DSN, temp_schema, unique_application_name


@pytest.mark.parametrize(("setting", "on"), [("on", True), ("ON ", True), ("off", False), ("false", False)])
def test_autovacuum_setting_is_read_as_a_boolean(setting: str, on: bool) -> None:
    assert autovacuum_on(setting) is on


async def server_autovacuum() -> str:
    async with await psycopg.AsyncConnection.connect(BASE_DSN, autocommit=True) as conn:
        row = await (await conn.execute("SHOW autovacuum")).fetchone()
        assert row is not None
        return str(row[0])


async def test_opening_warns_exactly_when_the_servers_autovacuum_is_off() -> None:
    with temp_schema() as schema, capture_logs() as logs:
        store = await PostgresMemoryStore.connect(schema.dsn, application_name=unique_application_name())
        await store.aclose()
    warned = [entry for entry in logs if entry["event"] == "memory.store.autovacuum_off"]
    assert len(warned) == (0 if autovacuum_on(await server_autovacuum()) else 1)
    assert all(entry["log_level"] == "warning" and "ANALYZE" in entry["message"] for entry in warned)
