"""A real Dispatcher wired with the GitHub pieces, for tests against the fake GitHub and model servers."""

from __future__ import annotations

import builtins
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pydantic import SecretStr

from app.agent.agents import build_agents
from app.agent.providers.registry import ProviderRegistry, build_provider_registry
from app.audience import reader_for
from app.dispatch import CompletedRun, Dispatcher, PostRunStep
from app.github.client import GitHubClient
from app.github.resolution import ThreadBindings
from app.github.setup import GitHubSetup, build_github
from app.incoming import HistoryTurn, IncomingMessage
from app.policy import authorize, reflection_actor
from app.reflection_hook import provider_extractor
from config.settings import ChannelSettings, MemorySettings, ProviderSettings, Secrets, Settings
from memory.reflection import ReflectionRun, ReflectionTracker, schedule_reflection, should_reflect
from memory.rules.write_gate import WRITE_ACTION
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import MemoryCandidate, MemoryRecord, Ranked, WriteResult

CHANNEL = "slack:C0REPO"
USER = "slack:U0DEV"
MODEL_REF = "anthropic/test-model"


@dataclass
class RecordingSurface:
    replies: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)

    async def set_status(self, text: str) -> None:
        self.statuses.append(text)

    async def send_reply(self, text: str) -> None:
        self.replies.append(text)


class RecordingStore(NullMemoryStore):
    """A real InProcessMemoryStore that notes when each retrieve/write was issued (monotonic clock)."""

    def __init__(self) -> None:
        self.inner = InProcessMemoryStore()
        self.events: list[tuple[str, str, float]] = []

    async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
        self.events.append(("retrieve", scope_key, time.monotonic()))
        return await self.inner.retrieve(scope_key, query, limit)

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, list[Ranked]]:
        issued = time.monotonic()
        self.events.extend(("retrieve", scope_key, issued) for scope_key in scope_keys)
        return await self.inner.retrieve_many(scope_keys, query, limit)

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        self.events.append(("write", scope_key, time.monotonic()))
        return await self.inner.write(scope_key, candidates)

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> builtins.list[MemoryRecord]:
        return await self.inner.list(scope_key, limit, query)

    async def forget(self, scope_key: str, record_id: str) -> bool:
        return await self.inner.forget(scope_key, record_id)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def retrieved_at(self, scope_key: str) -> builtins.list[float]:
        return [at for kind, key, at in self.events if kind == "retrieve" and key == scope_key]

    def writes(self) -> builtins.list[str]:
        return [key for kind, key, _ in self.events if kind == "write"]


def make_settings(data_dir: Path, model_base_url: str, *, memory: bool = True) -> Settings:
    return Settings(
        model=MODEL_REF,
        organization="acme",
        data_dir=data_dir,
        memory=MemorySettings(enabled=memory),
        models={"anthropic": ProviderSettings(base_url=model_base_url, max_retries=0)},
        channels={CHANNEL: ChannelSettings(repo="acme/default")},
        secrets=Secrets(anthropic_api_key=SecretStr("test-key")),
    )


@dataclass
class Bot:
    dispatcher: Dispatcher
    github: GitHubSetup
    providers: ProviderRegistry
    store: RecordingStore
    tracker: ReflectionTracker

    async def aclose(self) -> None:
        await self.providers.aclose()


def build_bot(settings: Settings, client: GitHubClient, *, reflect: bool = False) -> Bot:
    """The Dispatcher exactly as production wires it, plus (optionally) a reflection post-run step."""
    providers = build_provider_registry(settings, environ={})
    github = build_github(settings, build_agents(settings), client=client, bindings=ThreadBindings())
    store = RecordingStore()
    tracker = ReflectionTracker()
    steps: list[PostRunStep] = [reflection_step(tracker, store, providers)] if reflect else []
    dispatcher = Dispatcher(
        settings=settings,
        providers=providers,
        agents=github.agents,
        memory_store=store,
        repo_resolver=github.repo_resolver,
        agent_runners=github.agent_runners,
        post_run=steps,
    )
    return Bot(dispatcher, github, providers, store, tracker)


def reflection_step(
    tracker: ReflectionTracker, store: RecordingStore, providers: ProviderRegistry
) -> PostRunStep:
    """The write path's post-run step (gate → one tracked extractor call → routed writes)."""

    def step(run: CompletedRun) -> None:
        if run.scopes is None or not should_reflect(run.tool_calls, run.history_turns, run.agent):
            return
        provider, model = providers.resolve(run.model_ref)
        reflection = ReflectionRun(
            thread_key=run.message.thread_key,
            scopes=run.scopes,
            query=run.request_text,
            request=run.request_text,
            answer=run.answer,
            history=run.message.history,
            run_id=run.run_id,
            origin_visibility=run.message.channel_visibility,
            origin_conversation=run.message.channel_id,
            reader=reader_for(run.message),
        )
        gate = partial(authorize, reflection_actor(run.scopes), WRITE_ACTION)
        schedule_reflection(
            tracker, reflection, store=store, extract=provider_extractor(provider), model=model, gate=gate
        )

    return step


def message(
    text: str, *, thread: str = "slack:C0REPO:1.0", history: tuple[HistoryTurn, ...] = ()
) -> IncomingMessage:
    return IncomingMessage(
        text=text,
        thread_key=thread,
        surface="slack",
        user_id=USER,
        channel_id=CHANNEL,
        channel_visibility="public",
        history=history,
    )
