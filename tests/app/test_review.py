"""The review queue's app side (app/review.py): start-up refuses a store that cannot keep one, pending
records expire at start-up and as reflections run, and a reflected org fact waits while a user's doesn't."""

from __future__ import annotations

import json
import time
from contextlib import AsyncExitStack
from typing import Any

import pytest

from app.agent.agents import build_agents
from app.agent.providers.registry import build_provider_registry
from app.agent.tools import tool
from app.dispatch import Dispatcher
from app.reflection_hook import install_reflection
from app.review import DAY_SECONDS, PendingSweep, expire_pending
from app.runtime import build_runtime
from config.settings import ConfigError
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import MemoryCandidate
from tests.app.runtime_support import RecordingSurface, message, settings_for
from tests.fakes.model_server import FakeModelServer, tool_reply

REVIEW_ON: dict[str, Any] = {"organization": "acme", "memory": {"enabled": True, "review": "shared"}}
ORG = "org:acme"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def candidate(text: str) -> MemoryCandidate:
    return MemoryCandidate("fact", text, "slack:C1:1.1", source_run_id="run_1", origin="public")


def echo() -> Any:
    async def handler(arguments: Any) -> str:
        return "echo"

    return tool("echo", "Echo.", {"type": "object", "properties": {}}, handler)


def test_review_on_a_store_that_cannot_hold_records_for_review_refuses_start_up_in_one_line(
    fake_anthropic: FakeModelServer,
) -> None:
    with pytest.raises(ConfigError) as caught:
        build_runtime(settings_for(fake_anthropic, **REVIEW_ON), environ={}, memory_store=NullMemoryStore())
    message_ = str(caught.value)
    assert "\n" not in message_
    assert message_.startswith("config error: memory.review = 'shared' needs a store that can hold records")
    assert "NullMemoryStore" in message_


def test_review_off_or_memory_off_starts_on_any_store(fake_anthropic: FakeModelServer) -> None:
    build_runtime(
        settings_for(fake_anthropic, organization="acme", memory={"enabled": True}),
        environ={},
        memory_store=NullMemoryStore(),
    )
    build_runtime(
        settings_for(fake_anthropic, memory={"review": "shared"}), environ={}, memory_store=NullMemoryStore()
    )


async def test_start_up_expires_pending_records_older_than_review_days(
    fake_anthropic: FakeModelServer,
) -> None:
    clock = Clock(time.time() - 3 * DAY_SECONDS)
    store = InProcessMemoryStore(clock=clock)
    await store.write_pending(ORG, [candidate("three days waiting")])
    clock.now = time.time()
    await store.write_pending(ORG, [candidate("just learned")])
    settings = settings_for(
        fake_anthropic, organization="acme", memory={"enabled": True, "review": "shared", "review_days": 2}
    )
    runtime = build_runtime(settings, environ={}, memory_store=store)
    try:
        await runtime.start()
    finally:
        await runtime.providers.aclose()
    assert [r.text for r in await store.pending(ORG, 10)] == ["just learned"]
    [expired] = [e for e in await store.curation_log(ORG, "mem:org:acme:1", 10)]
    assert (expired.action, expired.actor) == ("expired", "system")


async def test_a_failing_expiry_is_one_warning_never_a_refused_start() -> None:
    class Broken(InProcessMemoryStore):
        async def expire_pending(self, older_than: float, actor: str = "system") -> int:
            raise OSError("disk gone")

    assert await expire_pending(Broken(), 14) == 0


def test_the_sweep_is_due_once_per_interval_after_start_up() -> None:
    clock = Clock(1000.0)
    sweep = PendingSweep(InProcessMemoryStore(), 14, clock=clock, interval=60)
    assert not sweep.due()  # start-up has just swept
    clock.now += 61
    assert sweep.due() and not sweep.due()


async def test_a_reflection_under_review_holds_the_org_fact_keeps_the_users_and_sweeps_the_stale(
    fake_anthropic: FakeModelServer,
) -> None:
    clock = Clock(time.time() - 20 * DAY_SECONDS)
    store = InProcessMemoryStore(clock=clock)
    await store.write_pending(ORG, [candidate("stale and never reviewed")])
    clock.now = time.time()
    settings = settings_for(fake_anthropic, **REVIEW_ON)
    async with AsyncExitStack() as stack:
        providers = build_provider_registry(settings, environ={})
        stack.push_async_callback(providers.aclose)
        agents = build_agents(settings).with_tools("general", (echo(),))
        dispatcher = Dispatcher(settings=settings, providers=providers, agents=agents, memory_store=store)
        hook = install_reflection(
            dispatcher,
            None,
            store=store,
            providers=providers,
            memory_model=None,
            review=PendingSweep(store, 14, interval=0),  # due at every reflection
        )
        facts = [
            {"text": "The api deploys with make ship", "confidence": 0.9, "audience": "org"},
            {"text": "this person likes short answers", "confidence": 0.9, "audience": "user"},
        ]
        fake_anthropic.script(
            tool_reply("echo", {}), "Run make ship.", json.dumps({"facts": facts, "summary": ""})
        )
        await dispatcher.dispatch(message("how do I deploy?"), RecordingSurface())
        assert await hook.drain(10) == 0

    assert [r.text for r in await store.pending(ORG, 10)] == ["The api deploys with make ship"]
    assert await store.list(ORG, 10) == []
    assert [r.text for r in await store.list("user:slack:U1", 10)] == ["this person likes short answers"]


async def test_with_review_off_start_up_leaves_the_queue_alone(fake_anthropic: FakeModelServer) -> None:
    clock = Clock(time.time() - 30 * DAY_SECONDS)
    store = InProcessMemoryStore(clock=clock)
    await store.write_pending(ORG, [candidate("waiting since review was on")])
    clock.now = time.time()
    runtime = build_runtime(
        settings_for(fake_anthropic, organization="acme", memory={"enabled": True}),
        environ={},
        memory_store=store,
    )
    try:
        await runtime.start()
    finally:
        await runtime.providers.aclose()
    assert [r.text for r in await store.pending(ORG, 10)] == ["waiting since review was on"]
