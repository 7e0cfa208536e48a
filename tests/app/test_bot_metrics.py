"""The bot's own metrics: every model call (latency, tokens by provider and model) and every settled
reflection (outcome, what it wrote), counted where the registry and the reflection hook are."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack

from app.agent.agents import build_agents
from app.agent.providers.base import CompletionRequest, Message
from app.agent.providers.registry import build_provider_registry
from app.dispatch import Dispatcher
from app.reflection_hook import install_reflection
from memory.stores.in_process import InMemoryMemoryStore
from ops.metrics import Metrics
from tests.app.runtime_support import RecordingSurface, message, settings_for
from tests.fakes.model_server import FakeModelServer


def value(metrics: Metrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return found if found is not None else 0.0


async def test_each_model_call_is_timed_and_its_tokens_counted_by_provider_and_model(
    fake_anthropic: FakeModelServer,
) -> None:
    metrics = Metrics()
    providers = build_provider_registry(settings_for(fake_anthropic), environ={}, metrics=metrics)
    try:
        provider, model = providers.resolve("anthropic/test-model")
        fake_anthropic.script("one", "two")
        for _ in range(2):
            await provider.complete(
                CompletionRequest(model=model, system="s", messages=(Message("user", "q"),))
            )
    finally:
        await providers.aclose()
    labels = {"provider": "anthropic", "model": "test-model"}
    assert value(metrics, "switchboard_model_call_duration_seconds_count", **labels) == 2
    assert value(metrics, "switchboard_model_tokens_total", direction="input", **labels) == 22
    assert value(metrics, "switchboard_model_tokens_total", direction="output", **labels) == 14


async def test_a_settled_reflection_counts_its_outcome_and_its_writes(
    fake_anthropic: FakeModelServer,
) -> None:
    metrics = Metrics()
    settings = settings_for(fake_anthropic, organization="acme", memory={"enabled": True})
    history = (("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"))  # deep enough to reflect
    extraction = json.dumps({"facts": [{"text": "deploys run on fridays", "confidence": 0.9}], "summary": ""})
    fake_anthropic.script("the answer", extraction, "another answer", "not json")
    async with AsyncExitStack() as stack:
        providers = build_provider_registry(settings, environ={}, metrics=metrics)
        stack.push_async_callback(providers.aclose)
        store = InMemoryMemoryStore()
        dispatcher = Dispatcher(
            settings=settings, providers=providers, agents=build_agents(settings), memory_store=store
        )
        hook = install_reflection(
            dispatcher, None, store=store, providers=providers, memory_model=None, metrics=metrics
        )
        for text in ("when do deploys run?", "and rollbacks?"):
            await dispatcher.dispatch(message(text, history=history), RecordingSurface())
            assert await hook.drain(10) == 0
    assert value(metrics, "switchboard_reflection_outcomes_total", outcome="written") == 1
    assert value(metrics, "switchboard_reflection_outcomes_total", outcome="rejected") == 1
    assert value(metrics, "switchboard_memory_writes_total", result="inserted") == 1
