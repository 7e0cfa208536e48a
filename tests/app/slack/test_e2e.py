"""End to end: the real Bolt app over HTTP with correctly signed requests, the real Dispatcher, the real
Anthropic SDK against the fake model server, the real command registry, and the fake Slack Web API."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from app.dispatch import Dispatcher
from app.runtime import Runtime, build_commands, build_runtime
from app.slack.bot import registry_caller
from app.slack.format import markdown_to_mrkdwn
from commands.memory import UNTRUSTED_NOTE
from config.settings import load_settings
from memory.reflection import REFLECTION_SYSTEM
from memory.stores.build import memory_dir
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate
from tests.app.slack.harness import RunningBot, running_bot
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention

MODEL = "anthropic/e2e-model"


def runtime(
    tmp_path: Path, model_server: FakeModelServer, *, memory: bool, store: MemoryStore
) -> tuple[Dispatcher, Any]:
    built, commands = full_runtime(tmp_path, model_server, memory=memory, store=store)
    return built.dispatcher, commands


def full_runtime(
    tmp_path: Path, model_server: FakeModelServer, *, memory: bool, store: MemoryStore
) -> tuple[Runtime, Any]:
    config = tmp_path / "switchboard.toml"
    config.write_text(
        f'model = "{MODEL}"\n'
        'organization = "acme"\n'
        'admins = ["user:slack:U0ADMIN"]\n'
        f'data_dir = "{tmp_path / "data"}"\n'
        "[models.anthropic]\n"
        f'base_url = "{model_server.base_url}"\n'
        "max_retries = 0\n"
        "[memory]\n"
        f"enabled = {'true' if memory else 'false'}\n"
    )
    env = {"ANTHROPIC_API_KEY": "test-anthropic-key"}
    settings = load_settings(env=env, config_path=config)
    # Wired exactly as `switchboard serve` wires it.
    commands, make_caller = build_commands(settings, store)
    built = build_runtime(
        settings, environ=env, memory_store=store, commands=commands, make_caller=make_caller
    )
    return built, commands


@pytest.fixture
def store() -> InProcessMemoryStore:
    return InProcessMemoryStore()


async def _bot(
    slack_api: FakeSlackApi, tmp_path: Path, model: FakeModelServer, store: MemoryStore, memory: bool
) -> AsyncIterator[RunningBot]:
    dispatcher, registry = runtime(tmp_path, model, memory=memory, store=store)
    async with running_bot(
        slack_api,
        dispatcher,
        registry=registry,
        caller_factory=registry_caller,
        memory_store=store if memory else None,  # as `switchboard serve` passes it
    ) as bot:
        yield bot


@pytest.fixture
async def bot(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer, store: InProcessMemoryStore
) -> AsyncIterator[RunningBot]:
    async for running in _bot(slack_api, tmp_path, fake_anthropic, store, memory=False):
        yield running


@pytest.fixture
async def memory_bot(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer, store: InProcessMemoryStore
) -> AsyncIterator[RunningBot]:
    async for running in _bot(slack_api, tmp_path, fake_anthropic, store, memory=True):
        yield running


def _turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The Anthropic request's messages as (role, text)."""
    turns = []
    for message in body["messages"]:
        content = message["content"]
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
        turns.append((message["role"], text))
    return turns


def _system(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else "".join(block.get("text", "") for block in system)


async def test_a_mention_in_a_public_channel_gets_one_reply_in_its_thread_carrying_the_models_answer(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer
) -> None:
    slack_api.add_conversation("C1", "public")
    fake_anthropic.script("Deploys run from the `release` branch.")
    posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> where do deploys run from?")

    delivery = await bot.slack.event(as_app_mention(posted))
    await bot.settle()

    assert delivery.status == 200
    [request] = fake_anthropic.bodies()
    assert request["model"] == "e2e-model"
    assert _turns(request) == [("user", "where do deploys run from?")]
    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text == "Deploys run from the `release` branch."
    assert slack_api.calls_to("assistant.threads.setStatus")  # a visible status while it worked


async def test_a_dm_is_answered_in_the_dm(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer
) -> None:
    slack_api.add_conversation("D1", "im")
    fake_anthropic.script("Hello there!")
    posted = slack_api.post_as_user("D1", "U1", "hi bot")

    await bot.slack.event(posted)
    await bot.settle()

    [reply] = slack_api.bot_replies("D1")
    assert reply.text == "Hello there!"
    assert reply.thread_ts == posted["ts"]
    assert _turns(fake_anthropic.bodies()[0]) == [("user", "hi bot")]


async def test_a_follow_up_in_a_bot_thread_without_a_mention_sends_the_threads_history_to_the_model(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer
) -> None:
    slack_api.add_conversation("C1", "public")
    fake_anthropic.script("Port 8080.", "In production it is 443.")
    root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> which port does the api use?")
    await bot.slack.event(as_app_mention(root))
    await bot.settle()

    follow_up = slack_api.post_as_user("C1", "U1", "and in production?", thread_ts=root["ts"])
    await bot.slack.event(follow_up)
    await bot.settle()

    _, second = fake_anthropic.bodies()
    assert _turns(second) == [
        ("user", "which port does the api use?"),
        ("assistant", "Port 8080."),
        ("user", "and in production?"),
    ]
    assert [m.text for m in slack_api.bot_replies("C1", root["ts"])] == [
        "Port 8080.",
        "In production it is 443.",
    ]


async def test_the_same_event_delivered_twice_makes_one_model_call_and_one_reply(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer
) -> None:
    slack_api.add_conversation("C1", "public")
    fake_anthropic.default_reply = "only once"
    event = as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hello"))

    first = await bot.slack.event(event, event_id="EvTWICE")
    second = await bot.slack.event(event, event_id="EvTWICE", retry_num=1)
    await bot.settle()

    assert (first.status, second.status) == (200, 200)
    assert len(fake_anthropic.bodies()) == 1
    assert [m.text for m in slack_api.bot_replies("C1")] == ["only once"]


async def test_a_bad_or_stale_signature_gets_401_and_nothing_is_processed(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer
) -> None:
    slack_api.add_conversation("C1", "public")
    event = as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hello"))

    forged = await bot.slack.event(event, secret="wrong-secret")
    stale = await bot.slack.event(event, timestamp=int(time.time()) - 6 * 60)
    await bot.settle()

    assert (forged.status, stale.status) == (401, 401)
    assert fake_anthropic.requests == []
    assert slack_api.calls == []


async def _seed(store: InProcessMemoryStore) -> None:
    """U1's, C1's and the org's records were learned in public channels (any reply may show them);
    U2's in U2's DM."""
    await store.write(
        "org:acme",
        [
            MemoryCandidate(
                kind="fact",
                text="deploy runs through the release pipeline",
                source_thread_key="slack:C9:1.0",
                origin="public",
                origin_conversation="slack:C9",
            )
        ],
    )
    await store.write(
        "channel:slack:C1",
        [
            MemoryCandidate(
                kind="fact",
                text="this channel owns the deploy tooling",
                source_thread_key="slack:C1:2.0",
                origin="public",
                origin_conversation="slack:C1",
            )
        ],
    )
    await store.write(
        "user:slack:U1",
        [
            MemoryCandidate(
                kind="fact",
                text="this user wants deploy answers as bullet lists",
                source_thread_key="slack:C1:3.0",
                origin="public",
                origin_conversation="slack:C1",
            )
        ],
    )
    await store.write(
        "user:slack:U2",
        [
            MemoryCandidate(
                kind="fact",
                text="another person's deploy preference",
                source_thread_key="slack:D2:4.0",
                origin="dm",
                origin_conversation="slack:D2",
            )
        ],
    )


async def test_memory_list_in_a_thread_is_answered_from_the_store_without_a_model_call(
    memory_bot: RunningBot,
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: InProcessMemoryStore,
) -> None:
    await _seed(store)
    slack_api.add_conversation("C1", "public")
    root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> memory list --scope org")

    await memory_bot.slack.event(as_app_mention(root))
    await memory_bot.settle()

    assert fake_anthropic.requests == []
    [reply] = slack_api.bot_replies("C1", root["ts"])
    assert "deploy runs through the release pipeline" in reply.text
    assert "mem:org:acme:1" in reply.text


async def test_the_memory_slash_command_lists_from_the_store_without_a_model_call(
    memory_bot: RunningBot,
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: InProcessMemoryStore,
) -> None:
    await _seed(store)
    slack_api.add_conversation("C1", "public")

    delivery = await memory_bot.slack.slash(
        text="list", user_id="U1", channel_id="C1", response_url=slack_api.response_url()
    )
    await memory_bot.settle()

    assert delivery.status == 200
    assert fake_anthropic.requests == []
    [response] = slack_api.responses
    assert response["response_type"] == "ephemeral"
    text = response["text"]
    assert "bullet lists" in text  # the caller's own records
    assert "owns the deploy tooling" in text  # this channel's
    assert "release pipeline" in text  # the org's
    assert "another person" not in text  # never someone else's


async def test_with_memory_on_the_model_request_carries_the_background_block_for_org_channel_and_user(
    memory_bot: RunningBot,
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: InProcessMemoryStore,
) -> None:
    await _seed(store)
    slack_api.add_conversation("C1", "public")
    fake_anthropic.script("Use the release pipeline.")
    posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> how does deploy work here?")

    await memory_bot.slack.event(as_app_mention(posted))
    await memory_bot.settle()

    [request] = fake_anthropic.bodies()
    system = _system(request)
    assert system.startswith(
        "Background memory for org:acme + channel:slack:C1 + user:slack:U1 "
        "(may be outdated — verify before acting; dates are UTC, today is "
    )
    assert "release pipeline" in system
    assert "owns the deploy tooling" in system
    assert "bullet lists" in system
    assert "another person" not in system
    assert all("background_memory" not in text for _, text in _turns(request))
    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text == "Use the release pipeline."


# -- one registry, three surfaces -----------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]


async def _terminal(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`switchboard memory …` in a real process, on the same config and data directory as the bot."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_") and k != "MEMORY_TOKEN"}
    env.update(PYTHONPATH=str(ROOT), SWITCHBOARD_CONFIG=str(tmp_path / "switchboard.toml"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "memory",
        *args,
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_one_memory_list_text_answers_alike_in_a_slack_thread_the_slash_command_and_the_terminal(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer
) -> None:
    durable = SqliteMemoryStore(memory_dir(tmp_path / "data"))
    await durable.write(
        "org:acme",
        [
            MemoryCandidate(
                "fact", "deploy runs through the release pipeline", "slack:C9:1.0", origin="public"
            ),
            MemoryCandidate("fact", "standups are at ten", "slack:C9:1.0", origin="public"),
        ],
    )
    await durable.write(
        "org:acme",
        [
            MemoryCandidate(
                "fact", "deploy <prod> only with a ticket & a buddy", "slack:C9:2.0", origin="public"
            )
        ],
    )
    words = ["list", "org", "deploy", "--limit", "5"]
    slack_api.add_conversation("C1", "public")
    fake_anthropic.script("Hello!")
    try:
        async for bot in _bot(slack_api, tmp_path, fake_anthropic, durable, memory=True):
            root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi")
            await bot.slack.event(as_app_mention(root))
            await bot.settle()
            # 1. a message in the bot's thread (no mention needed there), through the real Bolt app
            follow_up = slack_api.post_as_user("C1", "U1", "memory " + " ".join(words), thread_ts=root["ts"])
            await bot.slack.event(follow_up)
            await bot.settle()
            # 2. the `/memory` slash command
            await bot.slack.slash(
                text=" ".join(words), user_id="U1", channel_id="C1", response_url=slack_api.response_url()
            )
            await bot.settle()
            # 3. `switchboard memory …` in a terminal, on the configured (same) store
            code, terminal, err = await _terminal(tmp_path, *words)
    finally:
        await durable.aclose()

    assert len(fake_anthropic.requests) == 1  # only "hi": the commands never reached the model
    in_thread = slack_api.bot_replies("C1", root["ts"])[1].text
    [slash] = slack_api.responses
    assert code == 0, err
    assert re.findall(r"`(mem:[^`]+)`", in_thread) == ["mem:org:acme:3", "mem:org:acme:1"]
    assert "standups" not in in_thread
    # The thread's answer is streamed as Markdown (`markdown_text`); the slash response is mrkdwn.
    assert slash["text"] == markdown_to_mrkdwn(in_thread)
    assert "`deploy &lt;prod&gt; only with a ticket &amp; a buddy`" in slash["text"]
    # The terminal shows the same records in the same order, as a plain-text table for a person.
    rows = [line.split()[0] for line in terminal.splitlines() if line.strip().startswith("mem:")]
    assert rows == ["mem:org:acme:3", "mem:org:acme:1"]
    assert "deploy <prod> only with a ticket & a buddy" in terminal
    assert UNTRUSTED_NOTE not in terminal and "`" not in terminal


# -- forget through the whole bot -----------------------------------------------------------------


async def test_forgetting_an_org_record_in_slack_admin_only_removes_it_from_list_and_the_next_runs_memory(
    memory_bot: RunningBot,
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: InProcessMemoryStore,
) -> None:
    await _seed(store)
    slack_api.add_conversation("C1", "public")

    async def say(user: str, text: str) -> str:
        posted = slack_api.post_as_user("C1", user, f"<@{BOT_USER_ID}> {text}")
        await memory_bot.slack.event(as_app_mention(posted))
        await memory_bot.settle()
        [reply] = slack_api.bot_replies("C1", posted["ts"])
        return reply.text

    question = "how does deploy work here?"
    with capture_logs() as events:
        refused = await say("U1", "memory forget mem:org:acme:1")
    assert refused.startswith("🚫") and "`memory list me`" in refused
    assert [(e["caller"], e["outcome"]) for e in events if e["event"] == "memory.forget"] == [
        ("user:slack:U1", "refused")
    ]
    fake_anthropic.script("Through the release pipeline.")
    await say("U1", question)
    assert "release pipeline" in _system(fake_anthropic.bodies()[-1])  # the record stays
    assert "`mem:org:acme:1`" in await say("U1", "memory list org")

    with capture_logs() as events:
        forgot = await say("U0ADMIN", "memory forget mem:org:acme:1")
    assert forgot == "🧹 Forgot `mem:org:acme:1`."
    assert [(e["caller"], e["id"], e["outcome"]) for e in events if e["event"] == "memory.forget"] == [
        ("user:slack:U0ADMIN", "mem:org:acme:1", "forgotten")
    ]
    listed = await say("U1", "memory list org")
    assert "mem:org:acme:1" not in listed and "no active records" in listed
    fake_anthropic.script("I am not sure; check the docs.")
    await say("U1", question)
    system = _system(fake_anthropic.bodies()[-1])
    assert "owns the deploy tooling" in system  # the next run still reads memory …
    assert "release pipeline" not in system  # … but not the forgotten record
    assert len(fake_anthropic.requests) == 2  # the four commands made no model call


# -- exactly once, reflection included ------------------------------------------------------------


async def test_a_redelivered_event_makes_one_model_call_one_reply_and_schedules_one_reflection(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer, store: InProcessMemoryStore
) -> None:
    built, commands = full_runtime(tmp_path, fake_anthropic, memory=True, store=store)
    slack_api.add_conversation("C1", "public")
    root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> where do we deploy from?")
    slack_api.post_as_bot("C1", "From main.", thread_ts=root["ts"])
    slack_api.post_as_user("C1", "U1", "and staging?", thread_ts=root["ts"])
    slack_api.post_as_bot("C1", "From the staging branch.", thread_ts=root["ts"])
    # Four earlier turns: the run qualifies for reflection without any tool call.
    event = as_app_mention(
        slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> who approves releases?", thread_ts=root["ts"])
    )
    facts = {"facts": [{"text": "the release captain approves releases", "confidence": 0.9}], "summary": ""}
    fake_anthropic.script("The release captain.", json.dumps(facts))
    try:
        async with running_bot(
            slack_api, built.dispatcher, registry=commands, caller_factory=registry_caller, memory_store=store
        ) as bot:
            first = await bot.slack.event(event, event_id="EvREFLECT")
            second = await bot.slack.event(event, event_id="EvREFLECT", retry_num=1)
            third = await bot.slack.event(event, event_id="EvREFLECT", retry_num=2)
            await bot.settle()
            assert await built.lifecycle.drain()  # every scheduled reflection has finished
    finally:
        await built.aclose()

    assert (first.status, second.status, third.status) == (200, 200, 200)
    requests = fake_anthropic.bodies()
    assert [_system(r).startswith(REFLECTION_SYSTEM[:60]) for r in requests] == [False, True]
    assert _turns(requests[0])[-1] == ("user", "who approves releases?")
    assert [m.text for m in slack_api.bot_replies("C1", root["ts"])] == [
        "From main.",
        "From the staging branch.",
        "The release captain.",
    ]
    [record] = store.records("org:acme")
    assert (record.text, record.use_count) == ("the release captain approves releases", 0)
