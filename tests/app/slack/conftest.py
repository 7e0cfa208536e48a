"""Fixtures the Slack-mode tests with memory on share: a real SQLite store and the runtime built on
it exactly as `switchboard serve` builds it (a test module's own `store` / `runtime` wins)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.app.slack.test_e2e import full_runtime
from tests.fakes.model_server import FakeModelServer


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory")
    yield store
    await store.aclose()


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> AsyncIterator[tuple[Runtime, Any]]:
    """The runtime (memory on) and its command registry."""
    built, commands = full_runtime(tmp_path, fake_anthropic, memory=True, store=store)
    yield built, commands
    await built.lifecycle.drain()
    await built.aclose()
