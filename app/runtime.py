"""Assemble the bot from its settings: providers, agents, the memory store, commands, the dispatcher.

Every surface (`switchboard chat`, `switchboard serve`) builds through here, so they share one wiring.
Extra pieces (the repo resolver, the reflection post-run step) are passed in by the caller.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.agent.agents import BUILTIN_AGENTS, DEFAULT_AGENT, AgentRegistry, build_agents
from app.agent.providers.registry import (
    ProviderRegistry,
    build_provider_registry,
    key_variable,
    provider_usable,
)
from app.dispatch import AgentRunner, CallerFactory, Dispatcher, PostRunStep, RepoResolver
from app.lifecycle import Lifecycle
from app.review import PendingSweep, check_review_store, expire_pending, review_shared
from commands.registry import CommandHandler
from config.settings import ConfigError, Settings
from memory.stores.contract import MemoryStore
from ops.metrics import Metrics

if TYPE_CHECKING:
    from app.github.setup import GitHubSetup
    from app.reflection_hook import ReflectionHook
    from app.review_digest import DigestSender, ReviewDigest
    from commands.registry import CommandRegistry

NO_CREDENTIALS = (
    "no model credentials: set ANTHROPIC_API_KEY or OPENAI_API_KEY, or point models.openai.base_url "
    "(SWITCHBOARD_MODELS__OPENAI__BASE_URL) at a local OpenAI-compatible server"
)


@dataclass
class Runtime:
    settings: Settings
    providers: ProviderRegistry
    agents: AgentRegistry
    memory_store: MemoryStore
    dispatcher: Dispatcher
    lifecycle: Lifecycle
    github: GitHubSetup | None = None
    reflection: ReflectionHook | None = None  # memory on: the post-run step (its `drain` waits for it)

    async def start(self) -> None:
        """Verify what can be verified before taking messages; raises ConfigError with one clear line."""
        from app.agent.agents import missing_model_message
        from memory.stores.build import note_foreign_vectors, open_memory_store
        from memory.stores.dm_scopes import migrate_dm_scopes_at_start
        from memory.types import MemoryStoreError

        if self.agents.default.model_ref is None:
            raise ConfigError(missing_model_message(self.agents.default))
        try:
            await open_memory_store(self.memory_store)
        except MemoryStoreError as error:
            raise ConfigError(f"memory store unavailable: {error}") from None
        await note_foreign_vectors(self.memory_store)
        await erase_expired_at_start(self.memory_store)
        if review_shared(self.settings):  # review off touches nothing it did not touch before
            await expire_pending(self.memory_store, self.settings.memory.review_days)
        await migrate_dm_scopes_at_start(self.memory_store)

    async def aclose(self) -> None:
        await self.providers.aclose()
        await self.memory_store.aclose()
        if self.github is not None:
            await self.github.aclose()


def configured_model_refs(settings: Settings) -> list[tuple[str, str]]:
    """Every model ref the settings name, with the key that names it: (`model`, ref), …"""
    refs: list[tuple[str, str]] = []
    if settings.model:
        refs.append(("model", settings.model))
    refs += [(f"agents.{name}.model", agent.model) for name, agent in settings.agents.items() if agent.model]
    if settings.memory.enabled and settings.memory.model:
        refs.append(("memory.model", settings.memory.model))
    return refs


async def erase_expired_at_start(store: MemoryStore) -> None:
    """Retention at start-up (no sweeper runs later): a failure is one warning, never a refused start."""
    import structlog

    try:
        erased = await store.erase_expired()
    except Exception as error:
        structlog.get_logger("memory").warning("memory.expiry_failed", error=type(error).__name__)
        return
    if erased:
        structlog.get_logger("memory").info("memory.expired_at_start", erased=erased)


def credentials_problem(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """What the configured models lack, one problem a line, or None when they can answer.

    Each model is checked against its provider (an OpenAI key does not make `anthropic/…` work).
    With no model configured yet, any usable endpoint will do (the missing model is reported when the
    runtime starts); with neither a model nor any credentials, the line names both, so one start says
    everything a fresh setup is missing.
    """
    env = os.environ if environ is None else environ
    refs = configured_model_refs(settings)
    for setting, ref in refs:
        provider = ref.split("/", 1)[0]
        if provider not in settings.models or provider_usable(settings, provider, env):
            continue  # an unknown provider is a config error of its own (app/agent/agents.py)
        return (
            f"{setting} = {ref!r} needs {key_variable(settings, provider)}: export it, or point "
            f"models.{provider}.base_url (SWITCHBOARD_MODELS__{provider.upper()}__BASE_URL) at a server "
            "that needs no key"
        )
    if refs or any(provider_usable(settings, name, env) for name in settings.models):
        return None
    from app.agent.agents import missing_model_message

    default = next(agent for agent in BUILTIN_AGENTS if agent.name == DEFAULT_AGENT)  # no model at all
    return f"{missing_model_message(default)}\n{NO_CREDENTIALS}"


def build_memory(settings: Settings, environ: Mapping[str, str] | None = None) -> MemoryStore:
    """The one store of this process (memory/build.py decides; disabled → the Null store)."""
    from memory.stores.build import MemoryConfigError, build_memory_store

    try:
        return build_memory_store(settings, environ)
    except MemoryConfigError as error:
        raise ConfigError(f"config error: {error}") from None


def build_commands(
    settings: Settings, store: MemoryStore, *, permalinks: Any = None
) -> tuple[CommandRegistry, CallerFactory]:
    """The registry every surface shares; `permalinks` (Slack's, cached) links `memory why` sources."""
    from app.policy import write_gate
    from commands.memory import build_registry
    from commands.registry import Caller
    from commands.transcripts import ChatTranscripts

    registry = build_registry(
        store=store,
        memory_enabled=settings.memory.enabled,
        organization=settings.organization,
        admins=settings.admins,
        permalinks=permalinks,
        write_gate=write_gate,
        transcripts=ChatTranscripts(settings.data_dir),
    )
    return registry, Caller


def build_runtime(
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
    memory_store: MemoryStore | None = None,
    providers: ProviderRegistry | None = None,
    agents: AgentRegistry | None = None,
    commands: CommandHandler | None = None,
    make_caller: CallerFactory | None = None,
    with_commands: bool = True,
    repo_resolver: RepoResolver | None = None,
    post_run: Sequence[PostRunStep] = (),
    agent_runners: Mapping[str, AgentRunner] | None = None,
    github: bool = False,
    metrics: Metrics | None = None,
    review_digest: DigestSender | None = None,
) -> Runtime:
    """Everything a surface needs; raises ConfigError on a setting that cannot work.

    `metrics` (HTTP mode's /metrics) counts model calls, memory reads and reflection outcomes;
    `review_digest` (Slack's) tells the admins what waits for review, when review and the digest are on.
    """
    providers = providers or build_provider_registry(settings, environ, metrics)
    agents = agents or build_agents(settings)
    github_setup = None
    if github:  # the coding tools, the review runner, the verified repo resolver (app/github/setup.py)
        from app.github.setup import build_github

        github_setup = build_github(settings, agents, env=environ)
        agents = github_setup.agents
        repo_resolver = repo_resolver or github_setup.repo_resolver
        agent_runners = {**github_setup.agent_runners, **(agent_runners or {})}
    store = memory_store if memory_store is not None else build_memory(settings, environ)
    check_review_store(settings, store)
    if commands is None and with_commands:
        commands, default_caller = build_commands(settings, store)
        make_caller = make_caller or default_caller
    dispatcher = Dispatcher(
        settings=settings,
        providers=providers,
        agents=agents,
        memory_store=store,
        commands=commands,
        repo_resolver=repo_resolver,
        post_run=post_run,
        make_caller=make_caller,
        agent_runners=agent_runners,
        metrics=metrics,
    )
    lifecycle = Lifecycle(dispatcher, deadline_seconds=settings.shutdown_deadline_seconds)
    reflection = None
    if settings.memory.enabled:  # the write path: reflection after the reply, drained on shutdown
        from app.reflection_hook import install_reflection

        reflection = install_reflection(
            dispatcher,
            lifecycle,
            store=store,
            providers=providers,
            memory_model=settings.memory.model,
            metrics=metrics,
            review=PendingSweep(store, settings.memory.review_days) if review_shared(settings) else None,
            digest=build_review_digest(settings, store, review_digest),
        )
    return Runtime(settings, providers, agents, store, dispatcher, lifecycle, github_setup, reflection)


def build_review_digest(
    settings: Settings, store: MemoryStore, sender: DigestSender | None
) -> ReviewDigest | None:
    """The admins' digest of the review queue: only under review, with a window, and a surface to say it."""
    memory = settings.memory
    if sender is None or not review_shared(settings) or memory.review_digest_hours == 0:
        return None
    from app.review_digest import ReviewDigest

    return ReviewDigest(
        store=store,
        admins=settings.admins,
        review_days=memory.review_days,
        window_hours=memory.review_digest_hours,
        sender=sender,
    )


async def start_runtime(settings: Settings, **options: Any) -> Runtime:
    """build_runtime, then start: a surface gets a runtime ready for messages or one ConfigError."""
    runtime = build_runtime(settings, **options)
    try:
        await runtime.start()
    except BaseException:
        await runtime.aclose()
        raise
    return runtime


def describe(runtime: Runtime) -> dict[str, Any]:
    """A start-up log line's worth of facts (no secrets)."""
    return {
        "agents": runtime.agents.names(),
        "providers": runtime.providers.names(),
        "memory_enabled": runtime.settings.memory.enabled,
        "memory_store": type(runtime.memory_store).__name__,
    }
