"""One run context (app/run_context.py): the repo is resolved once per run, and the read, its audit,
the completed run and reflection all see the same scopes and the same reader."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest

from app.agent.agents import Agent, build_agents
from app.agent.providers.registry import build_provider_registry
from app.dispatch import Dispatcher
from app.incoming import IncomingMessage
from app.run_context import request_context, start_run
from memory.rules.scope import RequestScopes
from memory.rules.visibility import Reader
from memory.stores.in_process import InProcessMemoryStore
from memory.types import AuditQuery, MemoryCandidate
from tests.app.runtime_support import RecordingSurface, message, settings_for
from tests.fakes.model_server import FakeModelServer

MEMORY_ON = {"organization": "acme", "memory": {"enabled": True}}
ALL_FOUR = RequestScopes(
    org="org:acme", repo="repo:acme/app", channel="channel:slack:C1", user="user:slack:U1"
)


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def test_a_run_asks_for_its_repo_once_and_its_read_audit_and_record_carry_the_repos_scope(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    settings = settings_for(fake_anthropic, **MEMORY_ON)
    providers = build_provider_registry(settings, environ={})
    stack.push_async_callback(providers.aclose)
    store = InProcessMemoryStore()
    fact = MemoryCandidate(
        kind="fact", text="deploys run scripts/deploy.sh", source_thread_key="t", origin="public"
    )
    await store.write("repo:acme/app", [fact])
    asked: list[Agent | None] = []

    async def resolver(incoming: IncomingMessage, agent: Agent | None) -> str | None:
        asked.append(agent)
        return "acme/app"

    dispatcher = Dispatcher(
        settings=settings,
        providers=providers,
        agents=build_agents(settings),
        memory_store=store,
        repo_resolver=resolver,
    )
    fake_anthropic.script("ok")
    outcome = await dispatcher.dispatch(message("code how do deploys run?"), RecordingSurface())  # repo-bound
    await dispatcher.wait_idle()

    assert len(asked) == 1
    assert outcome.completed is not None and outcome.completed.scopes == ALL_FOUR
    [audit] = await store.read_audit(AuditQuery(run_id=outcome.run_id))
    assert audit.scope_keys == ("org:acme", "repo:acme/app", "channel:slack:C1", "user:slack:U1")
    assert outcome.completed.reader == Reader(
        audience="public", user_id="slack:U1", conversation_id="slack:C1"
    )


async def test_a_repo_that_fails_to_resolve_leaves_the_runs_scopes_without_a_repo() -> None:
    async def unresolvable() -> str | None:
        raise RuntimeError("GitHub is down")

    context = start_run(request_context("acme", message("code hi")), unresolvable())

    assert await context.scopes == RequestScopes(
        org="org:acme", channel="channel:slack:C1", user="user:slack:U1"
    )
    with pytest.raises(RuntimeError):
        await context.repo  # the run's own verdict on its repo is the dispatcher's to draw


async def test_without_an_organization_a_request_reaches_no_scope_and_still_has_a_reader() -> None:
    request = request_context(None, message("hello", visibility="dm", channel="slack:D1"))

    assert request.scopes is None
    assert request.reader == Reader(audience="self", user_id="slack:U1", conversation_id="slack:D1")
