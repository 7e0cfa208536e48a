"""`/readyz` in-process over the real probes the service wires (memory/service/main.py): SQLite's
write probe, PostgreSQL's `SELECT 1` through a forwarder that can lose the server, and the token."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx

from memory.service.app import READY_CACHE_SECONDS, create_app
from memory.service.main import readiness_probe
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import TcpForwarder, temp_schema
from tests.memory.service_support import TOKEN, asgi_client


async def ready_status(client: httpx.AsyncClient) -> int:
    return (await client.get("/readyz")).status_code


async def test_sqlite_readiness_is_probed_at_most_once_a_second(tmp_path: Path) -> None:
    store_dir = tmp_path / "memory"
    app = create_app(InProcessMemoryStore(), TOKEN, ready=readiness_probe(store_dir, None))
    async with asgi_client(app) as client:
        assert await ready_status(client) == 200
        store_dir.rename(tmp_path / "away")
        store_dir.write_text("in the way")
        assert await ready_status(client) == 200  # the verdict of a moment ago: no new probe yet
        await asyncio.sleep(READY_CACHE_SECONDS + 0.1)
        assert await ready_status(client) == 503
        store_dir.unlink()
        assert await ready_status(client) == 503
        await asyncio.sleep(READY_CACHE_SECONDS + 0.1)
        assert await ready_status(client) == 200


async def test_sqlite_readiness_answers_while_the_default_executor_is_busy(tmp_path: Path) -> None:
    # As a burst of redaction (asyncio.to_thread, the default executor) has every one of its threads.
    release = threading.Event()
    loop = asyncio.get_running_loop()
    busy = [loop.run_in_executor(None, release.wait, 30) for _ in range(64)]
    app = create_app(InProcessMemoryStore(), TOKEN, ready=readiness_probe(tmp_path / "memory", None))
    try:
        async with asgi_client(app) as client, asyncio.timeout(5):
            assert await ready_status(client) == 200
    finally:
        release.set()
        await asyncio.gather(*busy)


async def test_postgres_readiness_follows_the_server() -> None:
    forwarder = TcpForwarder()
    await forwarder.start()
    with temp_schema() as schema:
        dsn = forwarder.dsn(schema.name)
        store = PostgresMemoryStore(dsn)
        await store.open()
        app = create_app(store, TOKEN, ready=readiness_probe(Path("unused"), dsn))
        try:
            async with asgi_client(app) as client:
                assert await ready_status(client) == 200
                await forwarder.stop()  # the server is gone
                await asyncio.sleep(READY_CACHE_SECONDS + 0.1)
                assert await ready_status(client) == 503
                await forwarder.start()
                await asyncio.sleep(READY_CACHE_SECONDS + 0.1)
                assert await ready_status(client) == 200
        finally:
            await store.aclose()
            await forwarder.stop()


async def test_a_service_without_a_token_is_not_ready() -> None:
    for token in ("", None):
        async with asgi_client(create_app(InProcessMemoryStore(), token)) as client:
            reply = await client.get("/readyz")
        assert reply.status_code == 503
        assert reply.json() == {"ok": False, "error": "no data token is set: every data request is refused"}
