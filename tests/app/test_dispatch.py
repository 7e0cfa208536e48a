"""The dispatcher end to end against the fake Anthropic server: the read path, the flow, the failures."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

import pytest

from app.agent.agents import GENERAL_INSTRUCTIONS, Agent, AgentRegistry, build_agents
from app.agent.providers.registry import build_provider_registry
from app.agent.tools import Tool, ToolContext, tool
from app.dispatch import (
    CLOSED_REPLY,
    CompletedRun,
    Dispatcher,
    RepoUnavailable,
    fold_memory_block,
)
from app.incoming import IncomingMessage
from commands.registry import Caller as CommandCaller
from config.settings import Settings
from memory.rules.visibility import Reader
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import MemoryCandidate, MemoryRecord, Ranked
from tests.app.runtime_support import RecordingSurface, message, settings_for
from tests.fakes.model_server import FakeModelServer, Reply, error_reply, tool_reply

MEMORY_ON = {"organization": "acme", "memory": {"enabled": True}}
HISTORY = (("user", "we ship from main"), ("assistant", "Noted: main is the release branch."))
QUESTION = "when do deploys happen?"


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


def build(
    stack: AsyncExitStack,
    settings: Settings,
    *,
    agents: AgentRegistry | None = None,
    **options: Any,
) -> Dispatcher:
    providers = build_provider_registry(settings, environ={})
    stack.push_async_callback(providers.aclose)
    return Dispatcher(
        settings=settings, providers=providers, agents=agents or build_agents(settings), **options
    )


async def seeded_store(records: Mapping[str, str]) -> InProcessMemoryStore:
    """Records learned in the public channel slack:C9, so any reply may show them (the read rule has
    its own tests)."""
    store = InProcessMemoryStore()
    for scope, text in records.items():
        learned = MemoryCandidate(
            kind="fact",
            text=text,
            source_thread_key="slack:C9:1.0",
            origin="public",
            origin_conversation="slack:C9",
        )
        await store.write(scope, [learned])
    return store


def echo_tool() -> Tool:
    async def handler(arguments: Mapping[str, Any]) -> str:
        return f"echo {arguments.get('word')}"

    return tool(
        "echo", "Echo a word.", {"type": "object", "properties": {"word": {"type": "string"}}}, handler
    )


# -- the read path (spec §1, §7, §22 and the dispatcher READ-path rows) --


async def test_memory_disabled_sends_byte_identical_requests_to_a_dispatcher_without_memory(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    # An organization is configured, so a read *could* run: only `memory.enabled = false` stops it.
    off = settings_for(fake_anthropic, organization="acme")
    assert off.memory.enabled is False
    agents = build_agents(off).with_tools("general", (echo_tool(),))
    store = await seeded_store({"org:acme": "deploys happen on fridays"})
    contenders = [
        build(stack, off, agents=agents),  # no memory objects at all
        build(stack, off, agents=agents, memory_store=NullMemoryStore()),
        build(stack, off, agents=agents, memory_store=store),  # disabled: a seeded store is never read
    ]
    fake_anthropic.default_reply = "Fridays."
    for dispatcher in contenders:
        outcome = await dispatcher.dispatch(message(QUESTION, history=HISTORY), RecordingSurface())
        assert outcome.status == "answered"

    bodies = [request.body for request in fake_anthropic.requests]
    assert len(bodies) == 3 and bodies[0] == bodies[1] == bodies[2]
    sent = json.loads(bodies[0])
    assert sent["system"] == GENERAL_INSTRUCTIONS
    assert [m["content"] for m in sent["messages"]] == [text for _, text in HISTORY] + [QUESTION]
    assert sent["tools"][0]["name"] == "echo" and sent["max_tokens"] == 4096
    assert store.records("org:acme")[0].use_count == 0  # never retrieved
    assert all(isinstance(d.memory_store, NullMemoryStore) for d in contenders)


async def test_memory_enabled_with_nothing_matched_leaves_the_request_unchanged(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    fake_anthropic.default_reply = "ok"
    store = await seeded_store({"org:acme": "the cafeteria closes at three"})
    await build(stack, settings_for(fake_anthropic)).dispatch(message(QUESTION), RecordingSurface())
    await build(stack, settings_for(fake_anthropic, **MEMORY_ON), memory_store=store).dispatch(
        message(QUESTION), RecordingSurface()
    )
    first, second = (request.body for request in fake_anthropic.requests)
    assert first == second


async def test_enabled_with_a_seeded_store_the_block_leads_and_the_agent_prompt_follows_intact(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    store = await seeded_store(
        {
            "org:acme": "deploys happen on fridays after the freeze",
            "user:slack:U1": "this user deploys with the blue-green script",
            "user:slack:U2": "another person deploys by hand",
            "channel:slack:C2": "another channel deploys nightly",
        }
    )
    dispatcher = build(stack, settings_for(fake_anthropic, **MEMORY_ON), memory_store=store)
    fake_anthropic.script("Fridays, after the freeze.")
    outcome = await dispatcher.dispatch(message(QUESTION, history=HISTORY), RecordingSurface())

    sent = fake_anthropic.bodies()[0]
    block, _, rest = sent["system"].partition("\n\n")
    assert rest == GENERAL_INSTRUCTIONS
    assert sent["system"] == fold_memory_block(block, GENERAL_INSTRUCTIONS)
    lines = block.split("\n")
    assert lines[0].startswith(
        "Background memory for org:acme + channel:slack:C1 + user:slack:U1 "
        "(may be outdated — verify before acting; dates are UTC, today is "
    )
    assert lines[1] == "<background_memory>" and lines[-1] == "</background_memory>"
    assert any("deploys happen on fridays" in line for line in lines)
    assert any("blue-green" in line for line in lines)
    assert (
        "another person" not in block and "another channel" not in block
    )  # never another user's or channel's
    # the block never enters the conversation
    assert "background_memory" not in json.dumps(sent["messages"])
    assert [m["content"] for m in sent["messages"]] == [text for _, text in HISTORY] + [QUESTION]
    assert outcome.completed is not None and outcome.completed.memory_records == 2


async def test_a_failing_store_reads_as_nothing_and_the_run_still_answers(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    class BrokenStore(InProcessMemoryStore):
        async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
            raise ConnectionError("store down")

        async def retrieve_many(
            self, scope_keys: Sequence[str], query: str, limit: int
        ) -> dict[str, list[Ranked]]:
            raise ConnectionError("store down")

    surface = RecordingSurface()
    fake_anthropic.script("answer")
    dispatcher = build(stack, settings_for(fake_anthropic, **MEMORY_ON), memory_store=BrokenStore())
    outcome = await dispatcher.dispatch(message(QUESTION), surface)
    assert outcome.status == "answered" and surface.replies == ["answer"]
    assert fake_anthropic.bodies()[0]["system"] == GENERAL_INSTRUCTIONS


class RecordingStore(InProcessMemoryStore):
    """A real in-process store that notes the order in which scopes are retrieved."""

    def __init__(self) -> None:
        super().__init__()
        self.retrieved: list[str] = []
        self.three_started = asyncio.Event()

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, list[Ranked]]:
        self.retrieved.extend(scope_keys)
        if len(self.retrieved) >= 3:
            self.three_started.set()
        return await super().retrieve_many(scope_keys, query, limit)


async def test_the_repo_arrives_late_and_joins_the_read_after_org_channel_and_user_started(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    store = RecordingStore()
    for scope, text in {
        "org:acme": "deploys happen on fridays",
        "repo:acme/app": "deploys run scripts/deploy.sh",
        "channel:slack:C1": "this channel discusses deploys",
        "user:slack:U1": "this user deploys on mondays",
    }.items():
        await store.write(
            scope, [MemoryCandidate(kind="fact", text=text, source_thread_key="t", origin="public")]
        )
    seen_before_repo: list[str] = []

    async def late_repo(incoming: IncomingMessage, agent: Agent | None) -> str | None:
        await asyncio.wait_for(store.three_started.wait(), timeout=5)
        seen_before_repo.extend(store.retrieved)
        return "acme/app"

    fake_anthropic.script("ok")
    dispatcher = build(
        stack, settings_for(fake_anthropic, **MEMORY_ON), memory_store=store, repo_resolver=late_repo
    )
    outcome = await dispatcher.dispatch(message(f"code {QUESTION}"), RecordingSurface())  # repo-bound

    assert sorted(seen_before_repo) == ["channel:slack:C1", "org:acme", "user:slack:U1"]
    assert store.retrieved[-1] == "repo:acme/app"
    system = fake_anthropic.bodies()[0]["system"]
    assert system.startswith(
        "Background memory for org:acme + repo:acme/app + channel:slack:C1 + user:slack:U1 (may be outdated"
    )
    assert "scripts/deploy.sh" in system
    assert outcome.completed is not None and outcome.completed.repo == "acme/app"
    assert outcome.completed.scopes is not None and outcome.completed.scopes.repo == "repo:acme/app"


@pytest.mark.parametrize("failure", ["raises", "none", "unavailable"])
async def test_a_repo_resolution_that_fails_or_yields_nothing_leaves_the_read_intact(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack, failure: str
) -> None:
    store = await seeded_store({"org:acme": "deploys happen on fridays", "repo:acme/app": "deploys use make"})

    async def resolver(incoming: IncomingMessage, agent: Agent | None) -> str | None:
        if failure == "raises":
            raise ConnectionError("github down")
        if failure == "unavailable":
            raise RepoUnavailable("I can't see acme/app")
        return None

    fake_anthropic.script("ok")
    surface = RecordingSurface()
    dispatcher = build(
        stack, settings_for(fake_anthropic, **MEMORY_ON), memory_store=store, repo_resolver=resolver
    )
    outcome = await dispatcher.dispatch(message(QUESTION), surface)

    assert outcome.status == "answered" and surface.replies == ["ok"]
    system = fake_anthropic.bodies()[0]["system"]
    assert system.startswith("Background memory for org:acme + channel:slack:C1 + user:slack:U1 (")
    assert "repo:" not in system.split("\n")[0] and "deploys use make" not in system


# -- the flow --


async def test_a_command_is_answered_on_the_fast_path_without_a_model_turn_or_repo_resolution(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    from commands.memory import build_registry
    from commands.registry import Caller

    resolved: list[Agent | None] = []

    async def resolver(incoming: IncomingMessage, agent: Agent | None) -> str | None:
        resolved.append(agent)
        return "acme/app"

    settings = settings_for(fake_anthropic, **MEMORY_ON)
    store = await seeded_store({"org:acme": "deploys happen on fridays"})
    registry = build_registry(store=store, memory_enabled=True, organization="acme", admins=[])
    dispatcher = build(
        stack, settings, memory_store=store, commands=registry, make_caller=Caller, repo_resolver=resolver
    )
    surface = RecordingSurface()
    outcome = await dispatcher.dispatch(message("memory list --scope org"), surface)

    assert outcome.status == "command" and surface.replies == [outcome.reply]
    assert "mem:org:acme:1" in (outcome.reply or "") and "deploys happen on fridays" in (outcome.reply or "")
    assert fake_anthropic.requests == [] and surface.statuses == [] and resolved == []
    assert dispatcher.active_run_count == 0


async def test_memory_forget_is_an_inline_run_with_a_receipt_and_memory_list_is_not(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    from commands.memory import build_registry
    from commands.registry import Caller

    settings = settings_for(fake_anthropic, **MEMORY_ON)
    store = await seeded_store({"user:slack:U1": "this user deploys on fridays"})
    registry = build_registry(store=store, memory_enabled=True, organization="acme", admins=[])
    dispatcher = build(stack, settings, memory_store=store, commands=registry, make_caller=Caller)
    surface = RecordingSurface()

    listed = await dispatcher.dispatch(message("memory list me"), surface)
    forgot = await dispatcher.dispatch(message("memory forget mem:user:slack:U1:1"), surface)

    assert (listed.status, listed.run_id, listed.receipt) == ("command", None, None)
    assert forgot.status == "command" and forgot.run_id is not None
    assert forgot.receipt is not None
    assert (forgot.receipt.id, forgot.receipt.outcome, forgot.receipt.ok) == (
        "mem:user:slack:U1:1",
        "forgotten",
        True,
    )
    assert await store.list("user:slack:U1", 10) == []
    assert fake_anthropic.requests == []


async def test_the_command_handler_gets_the_caller_and_a_lazy_thread_repo(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    callers: list[Any] = []
    resolutions: list[Agent | None] = []

    class Commands:
        async def handle(self, text: str, caller: Any) -> Any:
            callers.append(caller)
            if text.startswith("memory"):
                repo = await caller.thread_repo()
                return type("Reply", (), {"text": f"repo={repo}", "receipt": None})()
            return None

    async def resolver(incoming: IncomingMessage, agent: Agent | None) -> str | None:
        resolutions.append(agent)
        return "acme/app"

    fake_anthropic.script("model answer")
    dispatcher = build(stack, settings_for(fake_anthropic), commands=Commands(), repo_resolver=resolver)
    surface = RecordingSurface()
    await dispatcher.dispatch(message("memory list repo"), surface)
    await dispatcher.dispatch(message("hello"), surface)

    assert surface.replies == ["repo=acme/app", "model answer"]
    assert callers[0] == CommandCaller(
        user_id="slack:U1",
        channel_id="slack:C1",
        channel_visibility="public",
        thread_key="slack:C1:1700000000.000100",
        surface="slack",
        thread_repo=callers[0].thread_repo,
        reader=Reader("public", "slack:U1", "slack:C1"),
    )
    assert resolutions[0] is None  # the command's lookup is not an agent run
    assert len(fake_anthropic.requests) == 1


async def test_post_run_steps_get_the_completed_run_while_the_slot_is_held(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    completed: list[CompletedRun] = []
    active_during_step: list[int] = []
    dispatcher: Dispatcher

    def step(run: CompletedRun) -> None:
        completed.append(run)
        active_during_step.append(dispatcher.active_run_count)

    def broken_step(run: CompletedRun) -> None:
        raise RuntimeError("reflection bug")

    settings = settings_for(fake_anthropic, **MEMORY_ON)
    agents = build_agents(settings).with_tools("general", (echo_tool(),))
    dispatcher = build(
        stack,
        settings,
        agents=agents,
        memory_store=InProcessMemoryStore(),
        post_run=[broken_step, step],
        new_run_id=lambda: "run_fixed",
    )
    fake_anthropic.script(
        tool_reply("echo", {"word": "hi"}), Reply(text="echoed", input_tokens=5, output_tokens=2)
    )
    surface = RecordingSurface()
    outcome = await dispatcher.dispatch(message("echo hi", history=HISTORY), surface)

    assert surface.replies == ["echoed"] and outcome.status == "answered"
    assert active_during_step == [1] and dispatcher.active_run_count == 0
    (run,) = completed
    assert (run.run_id, run.agent, run.model_ref, run.repo) == (
        "run_fixed",
        "general",
        "anthropic/test-model",
        None,
    )
    assert (run.tool_calls, run.history_turns, run.answer) == (1, 2, "echoed")
    assert run.scopes is not None and run.scopes.org == "org:acme" and run.scopes.user == "user:slack:U1"
    assert run.message.thread_key == "slack:C1:1700000000.000100"
    assert run.usage.input_tokens == 16  # 11 (tool turn) + 5


async def test_an_async_post_run_step_is_awaited_before_the_slot_is_released(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    order: list[str] = []

    async def step(run: CompletedRun) -> None:
        await asyncio.sleep(0)
        order.append("step")

    fake_anthropic.script("ok")
    dispatcher = build(stack, settings_for(fake_anthropic), post_run=[step])
    await dispatcher.dispatch(message("hi"), RecordingSurface())
    order.append("returned")
    assert order == ["step", "returned"]


async def test_a_model_failure_becomes_a_warning_reply_and_releases_the_slot(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    steps: list[CompletedRun] = []
    fake_anthropic.script(error_reply(529, "Overloaded"))
    surface = RecordingSurface()
    dispatcher = build(stack, settings_for(fake_anthropic), post_run=[steps.append])
    outcome = await dispatcher.dispatch(message("hi"), surface)
    assert outcome.status == "failed"
    assert surface.replies == [outcome.reply]
    assert surface.replies[0].startswith("⚠️") and "529" in surface.replies[0]
    assert steps == [] and dispatcher.active_run_count == 0


async def test_a_model_failure_that_echoes_a_key_shows_it_redacted(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    key = "sk-ant-api03-" + "Zq7" * 30
    fake_anthropic.script(error_reply(401, f"invalid x-api-key {key}"))
    surface = RecordingSurface()
    outcome = await build(stack, settings_for(fake_anthropic)).dispatch(message("hi"), surface)
    assert outcome.status == "failed" and surface.replies == [outcome.reply]
    assert key not in surface.replies[0] and "[REDACTED]" in surface.replies[0]


async def test_an_unexpected_failure_in_the_run_becomes_a_warning_reply_never_silence(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    def broken_toolset(context: ToolContext) -> tuple[Tool, ...]:
        raise RuntimeError("toolset bug: do not show me")

    steps: list[CompletedRun] = []
    settings = settings_for(fake_anthropic)
    agents = build_agents(settings).with_tools("general", toolset=broken_toolset)
    surface = RecordingSurface()
    dispatcher = build(stack, settings, agents=agents, post_run=[steps.append])
    outcome = await dispatcher.dispatch(message("hi"), surface)
    assert outcome.status == "failed" and surface.replies == [outcome.reply]
    assert surface.replies[0].startswith("⚠️") and "RuntimeError" in surface.replies[0]
    assert "do not show me" not in surface.replies[0]
    assert steps == [] and dispatcher.active_run_count == 0 and fake_anthropic.requests == []


async def test_an_empty_answer_is_a_warning_not_silence(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    fake_anthropic.script(" ")
    surface = RecordingSurface()
    outcome = await build(stack, settings_for(fake_anthropic)).dispatch(message("hi"), surface)
    assert outcome.status == "failed" and surface.replies[0].startswith("⚠️")


async def test_a_reply_that_cannot_be_delivered_skips_post_run_steps(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    steps: list[CompletedRun] = []
    fake_anthropic.script("lost answer")
    dispatcher = build(stack, settings_for(fake_anthropic), post_run=[steps.append])
    outcome = await dispatcher.dispatch(message("hi"), RecordingSurface(fail_reply=True))
    assert outcome.status == "failed" and steps == [] and dispatcher.active_run_count == 0


async def test_without_a_model_configured_the_reply_says_how_to_configure_one(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    settings = settings_for(fake_anthropic, model=None)
    surface = RecordingSurface()
    outcome = await build(stack, settings).dispatch(message("hi"), surface)
    assert outcome.status == "failed" and "SWITCHBOARD_MODEL" in surface.replies[0]
    assert surface.replies[0].startswith("⚠️ No model is configured for the general agent")
    assert fake_anthropic.requests == []


async def test_a_closed_dispatcher_takes_no_new_messages(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    dispatcher = build(stack, settings_for(fake_anthropic))
    dispatcher.close()
    surface = RecordingSurface()
    outcome = await dispatcher.dispatch(message("hi"), surface)
    assert outcome.status == "closed" and surface.replies == [CLOSED_REPLY] and fake_anthropic.requests == []


# -- agents and repos --


async def test_a_repo_bound_agent_without_a_repo_is_told_so_without_a_model_turn(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    surface = RecordingSurface()
    outcome = await build(stack, settings_for(fake_anthropic)).dispatch(
        message("code fix the flaky test"), surface
    )
    assert outcome.status == "refused" and outcome.agent == "coding"
    assert "works on a GitHub repository" in surface.replies[0]
    assert fake_anthropic.requests == []


async def test_a_repo_resolver_verdict_is_the_reply_for_a_repo_bound_agent(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    async def resolver(incoming: IncomingMessage, agent: Agent | None) -> str | None:
        raise RepoUnavailable("I can't see acme/secret — is the app installed there?")

    surface = RecordingSurface()
    dispatcher = build(stack, settings_for(fake_anthropic), repo_resolver=resolver)
    await dispatcher.dispatch(message("review acme/secret#4"), surface)
    assert surface.replies == ["I can't see acme/secret — is the app installed there?"]
    assert fake_anthropic.requests == []


async def test_the_channel_repo_binds_a_coding_run_and_reaches_its_toolset(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    contexts: list[ToolContext] = []

    def toolset(context: ToolContext) -> tuple[Tool, ...]:
        contexts.append(context)
        return (echo_tool(),)

    settings = settings_for(fake_anthropic, channels={"slack:C1": {"repo": "acme/app"}})
    agents = build_agents(settings).with_tools("coding", toolset=toolset)
    fake_anthropic.script("Looked at it.")
    outcome = await build(stack, settings, agents=agents).dispatch(
        message("code why is CI red?"), RecordingSurface()
    )

    assert (
        outcome.agent == "coding" and outcome.completed is not None and outcome.completed.repo == "acme/app"
    )
    sent = fake_anthropic.bodies()[0]
    assert sent["system"].endswith("The repository for this run: acme/app")
    assert sent["messages"][-1]["content"] == "why is CI red?"  # the agent word is not part of the request
    assert [t["name"] for t in sent["tools"]] == ["echo"]
    assert contexts[0].repo == "acme/app" and contexts[0].run_id == outcome.run_id


async def test_the_channel_default_agent_answers_a_plain_message(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    settings = settings_for(fake_anthropic, channels={"slack:C1": {"agent": "coding", "repo": "acme/app"}})
    fake_anthropic.script("ok")
    outcome = await build(stack, settings).dispatch(message("why is CI red?"), RecordingSurface())
    assert outcome.agent == "coding"


async def test_concurrent_dispatches_each_hold_a_slot(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    fake_anthropic.script(Reply(text="one", hold=True), Reply(text="two", hold=True))
    dispatcher = build(stack, settings_for(fake_anthropic))
    tasks = [asyncio.create_task(dispatcher.dispatch(message(f"q{i}"), RecordingSurface())) for i in range(2)]
    await asyncio.to_thread(fake_anthropic.wait_for_requests, 2)
    assert dispatcher.active_run_count == 2
    fake_anthropic.release()
    outcomes = await asyncio.gather(*tasks)
    assert sorted(o.reply or "" for o in outcomes) == ["one", "two"] and dispatcher.active_run_count == 0


# -- the read rule and the general run's scopes -----------------------------------------------------


async def test_a_general_run_never_asks_for_a_repo_and_has_no_repo_scope(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    """§21: an agent that declares no repo never binds one; its run neither reads nor writes repo:."""
    resolved: list[Agent | None] = []

    async def resolver(incoming: IncomingMessage, agent: Agent | None) -> str | None:
        resolved.append(agent)
        return "acme/app"

    store = await seeded_store({"org:acme": "deploys happen on fridays", "repo:acme/app": "deploys use make"})
    fake_anthropic.script("ok")
    dispatcher = build(
        stack, settings_for(fake_anthropic, **MEMORY_ON), memory_store=store, repo_resolver=resolver
    )
    outcome = await dispatcher.dispatch(message(QUESTION), RecordingSurface())

    assert (outcome.status, outcome.agent) == ("answered", "general")
    assert resolved == []
    assert outcome.completed is not None and outcome.completed.repo is None
    assert outcome.completed.scopes is not None and outcome.completed.scopes.repo is None
    system = fake_anthropic.bodies()[0]["system"]
    assert "repo:" not in system and "deploys use make" not in system


async def test_the_memory_block_holds_a_dm_fact_in_the_dm_and_never_in_a_public_thread(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    store = InProcessMemoryStore()
    dm_fact = MemoryCandidate(
        "fact", "this user deploys on fridays", "slack:D1:1.0", origin="dm", origin_conversation="slack:D1"
    )
    await store.write("user:slack:U1", [dm_fact])
    fake_anthropic.script("public answer", "dm answer")
    dispatcher = build(stack, settings_for(fake_anthropic, **MEMORY_ON), memory_store=store)

    await dispatcher.dispatch(message(QUESTION), RecordingSurface())
    await dispatcher.dispatch(
        message(QUESTION, channel="slack:D1", thread="slack:D1:1.0", visibility="dm"), RecordingSurface()
    )

    public, dm = (body["system"] for body in fake_anthropic.bodies())
    assert "deploys on fridays" not in public
    assert "deploys on fridays" in dm


async def test_an_unknown_visibility_reads_as_a_public_reply(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    store = InProcessMemoryStore()
    learned = MemoryCandidate(
        "fact", "this user deploys on fridays", "t", origin="private", origin_conversation="slack:C1"
    )
    await store.write("user:slack:U1", [learned])
    fake_anthropic.script("ok")
    dispatcher = build(stack, settings_for(fake_anthropic, **MEMORY_ON), memory_store=store)
    await dispatcher.dispatch(message(QUESTION, visibility=None), RecordingSurface())
    assert "deploys on fridays" not in fake_anthropic.bodies()[0]["system"]
