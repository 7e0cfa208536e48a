"""The bot's own metrics: every model call (latency, tokens by provider and model) and every settled
reflection (outcome, what it wrote), counted where the registry and the reflection hook are."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack

import aiohttp

from app.agent.agents import build_agents
from app.agent.providers.base import CompletionRequest, Message
from app.agent.providers.registry import build_provider_registry
from app.dispatch import Dispatcher
from app.reflection_hook import install_reflection
from app.runtime import build_runtime
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate
from ops.metrics import Metrics
from tests.app.runtime_support import RecordingSurface, message, settings_for
from tests.app.slack.harness import running_bot
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi


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
        store = InProcessMemoryStore()
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


async def test_the_bots_own_metrics_count_its_memory_reads_and_the_records_they_read(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer
) -> None:
    """Scraped from the bot's real /metrics: each run that reads memory is one read, with its records
    (the memory service counts its own retrieves; before, the bot's /metrics said 0 reads)."""
    metrics = Metrics()
    settings = settings_for(fake_anthropic, organization="acme", memory={"enabled": True})
    store = InProcessMemoryStore()
    fact = MemoryCandidate(
        kind="fact", text="deploys run nightly from main", source_thread_key="t", origin="public"
    )
    await store.write("org:acme", [fact])
    fake_anthropic.default_reply = "Nightly."
    built = build_runtime(settings, environ={}, memory_store=store, metrics=metrics)
    slack_api.add_conversation("C1", "public")
    http = {"metrics": metrics, "metrics_token": "scrape-token"}
    try:
        async with running_bot(slack_api, built.dispatcher, memory_store=store, http=http) as bot:
            for text in ("when do deploys run?", "and from which branch do deploys run?"):
                await bot.slack.event(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> {text}"))
                await bot.settle()
            async with (
                aiohttp.ClientSession() as session,
                session.get(
                    bot.url.replace("/slack/events", "/metrics"),
                    headers={"Authorization": "Bearer scrape-token"},
                ) as reply,
            ):
                scraped = await reply.text()
    finally:
        await built.aclose()

    assert len(fake_anthropic.requests) == 2
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1]) for line in scraped.splitlines() if line[:1] != "#"
    }
    assert samples["switchboard_memory_reads_total"] == 2
    assert samples["switchboard_memory_records_read_total"] == 2
    assert samples["switchboard_memory_read_failures_total"] == 0
