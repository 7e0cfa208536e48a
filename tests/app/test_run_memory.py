"""The run's memory read (app/run_memory.py, memory/context.py): advisory, and each store call bounded
by `memory.timeout` whatever the store does — here a PostgreSQL server whose link went silent (no FIN,
no error: every byte lost), which would otherwise hold the run until TCP gave up, minutes later."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from app.run_context import RunContext, request_context, start_run
from app.run_memory import read_for_run
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import MemoryCandidate
from ops.metrics import Metrics
from tests.app.runtime_support import message, settings_for
from tests.fakes.model_server import FakeModelServer
from tests.memory.postgres_support import TcpForwarder, TempSchema, temp_schema

TIMEOUT = 0.5


@pytest.fixture
def schema() -> Iterator[TempSchema]:
    with temp_schema() as made:
        yield made


async def no_repo() -> str | None:
    return None


def run_context(text: str) -> RunContext:
    return start_run(request_context("acme", message(text)), no_repo())


async def test_a_read_from_a_server_gone_silent_leaves_the_run_without_memory_within_the_timeout(
    schema: TempSchema, fake_anthropic: FakeModelServer
) -> None:
    forwarder = TcpForwarder()
    await forwarder.start()
    store = PostgresMemoryStore(forwarder.dsn(schema.name), timeout=1.0, reconnect_timeout=1.0)
    settings = settings_for(fake_anthropic, organization="acme", memory={"enabled": True, "timeout": TIMEOUT})
    metrics = Metrics()
    fact = MemoryCandidate(kind="fact", text="deploys run nightly", source_thread_key="t", origin="public")
    try:
        await store.write("org:acme", [fact])
        warm = await read_for_run(store, settings, run_context("deploys?"), "deploys?", 0.0, metrics)
        assert warm is not None and warm.block is not None and "deploys run nightly" in warm.block
        forwarder.silence()

        started = time.monotonic()
        with capture_logs() as logs:
            read = await asyncio.wait_for(  # a bound for the test itself, should the read hang
                read_for_run(store, settings, run_context("deploys?"), "deploys?", 0.0, metrics),
                TIMEOUT + 10,
            )
        waited = time.monotonic() - started

        assert read is not None and read.block is None  # the run goes on without memory
        assert TIMEOUT <= waited < TIMEOUT + 1.0
        assert [(e["event"], e["error"]) for e in logs if e["log_level"] == "warning"] == [
            ("memory.retrieve_failed", "TimeoutError")
        ]
    finally:
        await forwarder.stop()
        await asyncio.wait_for(store.aclose(), 15)
