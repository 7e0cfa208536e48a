"""The memory service's client under the store front's failure policy, against the real service process
(`python -m memory.service`): a service out of reach (gone, or answering 503) makes a retrieve read as
nothing with one `memory.retrieve_failed` warning and every other call raise `MemoryUnavailable`; a
request the service refuses (4xx, from a retrieve too) or its store's failure (500) raises a
`MemoryStoreError` naming the route."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, MutableMapping
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from memory.service.app import create_app
from memory.stores.build import memory_dir
from memory.stores.http import HttpMemoryStore
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.schema import database_filename
from memory.types import MemoryCandidate, MemoryStoreError, MemoryUnavailable
from memory.wire import MAX_QUERY_CHARS
from tests.memory.service_support import AUTH, TOKEN, RunningService, free_port, memory_service_process
from tests.ops.raw_sockets import half_open

SCOPE = "org:acme"
CAP = 2


def candidate(text: str) -> MemoryCandidate:
    return MemoryCandidate(kind="fact", text=text, source_thread_key="slack:C1:1700000000.1")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[RunningService]:
    with memory_service_process(
        tmp_path / "data", args=("--embedder", "none", "--max-connections", str(CAP))
    ) as running:
        yield running


@pytest.fixture
async def client(service: RunningService) -> AsyncIterator[HttpMemoryStore]:
    store = HttpMemoryStore(service.base_url, TOKEN, timeout=5.0)
    yield store
    await store.aclose()


def retrieve_warnings(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == "memory.retrieve_failed"]


async def test_a_service_that_is_gone_reads_as_nothing_on_retrieve_and_is_unavailable_elsewhere(
    tmp_path: Path,
) -> None:
    with memory_service_process(tmp_path / "data", args=("--embedder", "none")) as service:
        store = HttpMemoryStore(service.base_url, TOKEN, timeout=5.0)
        assert (await store.write(SCOPE, [candidate("we deploy with make ship")])).inserted == 1
    try:  # the process is stopped: its port refuses the connection
        with capture_logs() as logs:
            assert await store.retrieve(SCOPE, "deploy", 5) == []
            assert await store.retrieve_many([SCOPE, "user:slack:U1"], "deploy", 5) == {}
        for call in (store.list(SCOPE, 5), store.write(SCOPE, [candidate("more")])):
            with pytest.raises(MemoryUnavailable) as raised:
                await call
            assert raised.value.status is None and "transport error" in str(raised.value)
    finally:
        await store.aclose()
    warnings = retrieve_warnings(logs)
    assert [(e["log_level"], e["error"]) for e in warnings] == [("warning", "MemoryUnavailable")] * 2
    assert warnings[0]["scope_key"] == SCOPE


async def test_a_service_at_its_connection_cap_reads_as_unavailable(
    service: RunningService, client: HttpMemoryStore
) -> None:
    """uvicorn answers a connection past the cap 503 and closes it at once: the client reads the 503
    or meets the closed connection, and either is the service out of reach."""
    head = (
        "POST /write HTTP/1.1\r\nHost: memory\r\nAuthorization: {auth}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    ).format(auth=AUTH["Authorization"])
    with ExitStack() as held:
        for _ in range(CAP):  # every connection the service admits is inside a request
            held.enter_context(half_open(service.host, service.port, head.encode()))
        await asyncio.sleep(0.1)
        with capture_logs() as logs:
            assert await client.retrieve(SCOPE, "deploy", 5) == []
        with pytest.raises(MemoryUnavailable) as raised:
            await client.list(SCOPE, 5)
    assert raised.value.status in (503, None) and "/list" in str(raised.value)
    (warning,) = retrieve_warnings(logs)
    assert warning["error"] == "MemoryUnavailable"


async def test_a_503_from_a_service_whose_store_is_out_of_reach_is_unavailable_to_the_client() -> None:
    """The real service app over a PostgreSQL store whose server does not answer: the service's own
    front reads its retrieve as nothing; every other route answers 503, which the client raises as
    `MemoryUnavailable`."""
    async with AsyncExitStack() as stack:
        gone = PostgresMemoryStore(f"postgresql://nobody@127.0.0.1:{free_port()}/none", timeout=1.0)
        stack.push_async_callback(gone.aclose)
        transport = httpx.ASGITransport(app=create_app(gone, TOKEN))
        store = HttpMemoryStore("http://memory.test", TOKEN, transport=transport)
        stack.push_async_callback(store.aclose)
        assert await store.retrieve(SCOPE, "deploy", 5) == []
        for call, route in (
            (store.list(SCOPE, 5), "/list"),
            (store.forget(SCOPE, f"mem:{SCOPE}:1"), "/forget"),
        ):
            with pytest.raises(MemoryUnavailable) as raised:
                await call
            assert raised.value.status == 503
            assert str(raised.value) == f"memory service {route} failed: 503 store unavailable"


async def test_a_request_the_service_refuses_reads_as_nothing_from_a_retrieve_naming_the_route(
    client: HttpMemoryStore,
) -> None:
    long_query = "deploy " * (MAX_QUERY_CHARS // 7 + 1)  # only the service bounds a query's length
    with capture_logs() as logs:
        assert await client.retrieve(SCOPE, long_query, 5) == []
    [warning] = retrieve_warnings(logs)
    assert "memory service /retrieve failed: 400 query must be at most" in warning["message"]


async def test_a_store_failure_in_the_service_is_a_500_naming_the_route(tmp_path: Path) -> None:
    data = tmp_path / "data"
    scope_file = memory_dir(data) / database_filename(SCOPE)
    scope_file.parent.mkdir(parents=True)
    scope_file.write_bytes(b"this is no SQLite database " * 200)  # the service's store fails on it
    with memory_service_process(data, args=("--embedder", "none")) as service:
        store = HttpMemoryStore(service.base_url, TOKEN, timeout=5.0)
        try:
            with capture_logs() as logs:
                assert await store.retrieve(SCOPE, "deploy", 5) == []  # advisory, with a warning
                for call, route in (
                    (store.list(SCOPE, 5), "/list"),  # a person asked: never a silent empty list
                    (store.write(SCOPE, [candidate("x")]), "/write"),
                ):
                    with pytest.raises(MemoryStoreError) as raised:
                        await call
                    assert type(raised.value) is MemoryStoreError and raised.value.status == 500
                    assert str(raised.value) == f"memory service {route} failed: 500 store failure"
        finally:
            await store.aclose()
    [warning] = retrieve_warnings(logs)
    assert "memory service /retrieve failed: 500 store failure" in warning["message"]
