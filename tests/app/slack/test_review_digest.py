"""Admins hear of waiting records: a signed mention goes through the real Bolt app and dispatcher to the
fake model server, reflection queues its org and channel facts for review in a real SQLite store, and
the review digest DMs each admin through the fake Slack Web API — once per window, across replicas."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from app.agent.agents import build_agents
from app.agent.tools import Tool, tool
from app.runtime import Runtime, build_runtime
from app.slack.bot import make_web_client
from app.slack.review_digest import SlackDigestSender
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate
from tests.app.runtime_support import settings_for
from tests.app.slack.harness import RunningBot, running_bot
from tests.fakes.model_server import FakeModelServer, tool_reply
from tests.fakes.slack_api import APP_ID, BOT_USER_ID, TEAM_ID, FakeSlackApi, as_app_mention

ADMINS = ("UADMIN1", "UADMIN2")
ORG_FACT = "The api service deploys with make deploy from the main branch"
CHANNEL_FACT = "This channel's standup moves to 10am on Fridays"
SEEDED_FACT = "Staging credentials rotate every quarter"
SOURCE = "slack:C1:1700000000.000100"
HOUR = 3600.0
DAY = 86_400.0


class Clock:
    """The store's clock (claims and record dates): now, shifted by `offset` seconds."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def echo_tool() -> Tool:
    async def handler(arguments: Mapping[str, Any]) -> str:
        return f"echo {arguments.get('word')}"

    return tool(
        "echo", "Echo a word.", {"type": "object", "properties": {"word": {"type": "string"}}}, handler
    )


@dataclass
class Replica:
    runtime: Runtime
    bot: RunningBot
    store: SqliteMemoryStore

    async def ask(self, slack_api: FakeSlackApi, fake: FakeModelServer, *facts: Mapping[str, Any]) -> None:
        """A qualifying run (a tool call, then the answer) whose reflection proposes `facts`."""
        extraction = json.dumps({"facts": list(facts), "summary": ""})
        fake.script(tool_reply("echo", {"word": "deploy"}), "Run make deploy.", extraction)
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> how do I deploy the api?")
        assert (await self.bot.slack.event(as_app_mention(posted))).status == 200
        await self.bot.settle()
        assert self.runtime.reflection is not None
        assert await self.runtime.reflection.drain(10) == 0


@asynccontextmanager
async def replica(
    stack: AsyncExitStack,
    slack_api: FakeSlackApi,
    fake: FakeModelServer,
    data_dir: Path,
    clock: Clock,
    **memory: Any,
) -> AsyncIterator[Replica]:
    """One bot process: its own runtime, Bolt app and store, over a data directory others may share;
    the mentions come from the public channel C1."""
    slack_api.add_conversation("C1", "public")
    settings = settings_for(
        fake,
        organization="acme",
        admins=[f"user:slack:{admin}" for admin in ADMINS],
        memory={"enabled": True, "review": "shared", **memory},
    )
    store = SqliteMemoryStore(data_dir, clock=clock)
    stack.push_async_callback(store.aclose)
    runtime = build_runtime(
        settings,
        environ={},
        memory_store=store,
        agents=build_agents(settings).with_tools("general", (echo_tool(),)),
        with_commands=False,
        review_digest=SlackDigestSender(make_web_client(slack_api.token, slack_api.base_url)),
    )
    stack.push_async_callback(runtime.providers.aclose)
    async with running_bot(slack_api, runtime.dispatcher, memory_store=store) as bot:
        yield Replica(runtime, bot, store)


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


def dms(slack_api: FakeSlackApi, admin: str) -> list[str]:
    return [message.text for message in slack_api.dm_messages(admin)]


def org(text: str = ORG_FACT) -> dict[str, Any]:
    return {"text": text, "confidence": 0.9, "audience": "org"}


def channel(text: str = CHANNEL_FACT) -> dict[str, Any]:
    return {"text": text, "confidence": 0.9, "audience": "channel"}


async def test_two_records_queued_in_one_window_send_each_admin_one_dm_and_the_next_window_another(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path, stack: AsyncExitStack
) -> None:
    clock = Clock()
    async with replica(stack, slack_api, fake_anthropic, tmp_path / "memory", clock) as bot:
        await bot.ask(slack_api, fake_anthropic, org())
        await bot.ask(slack_api, fake_anthropic, org("Deploys are frozen on Fridays"))
        assert [len(dms(slack_api, admin)) for admin in ADMINS] == [1, 1]
        assert len(await bot.store.pending("org:acme", 10)) == 2  # both queued; one DM told of the first

        clock.offset = 24 * HOUR + 60  # the window (24 hours by default) has passed
        await bot.ask(slack_api, fake_anthropic, org("The api's on-call rotates weekly"))

    assert [len(dms(slack_api, admin)) for admin in ADMINS] == [2, 2]
    assert dms(slack_api, "UADMIN1")[1].startswith(":inbox_tray: 3 records wait for your review")


async def test_the_digest_says_how_many_wait_where_how_old_when_the_oldest_expires_and_links_the_home_tab(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path, stack: AsyncExitStack
) -> None:
    clock = Clock()
    clock.offset = -3 * DAY  # a record queued three days ago, before this process started
    seed = SqliteMemoryStore(tmp_path / "memory", clock=clock)
    await seed.write_pending("org:acme", [MemoryCandidate("fact", SEEDED_FACT, SOURCE, origin="public")])
    [seeded] = await seed.pending("org:acme", 10)
    await seed.aclose()
    clock.offset = 0.0
    async with replica(stack, slack_api, fake_anthropic, tmp_path / "memory", clock) as bot:
        with capture_logs() as logs:
            await bot.ask(slack_api, fake_anthropic, org(), channel())

    [text] = dms(slack_api, "UADMIN1")
    assert dms(slack_api, "UADMIN2") == [text]
    lines = text.split("\n")
    assert lines[0] == ":inbox_tray: 3 records wait for your review in shared memory:"
    assert lines[1:3] == ["• `org:acme`: 2", "• <#C1>: 1"]
    expires = int(seeded.created_at + 14 * DAY)  # review_days: 14 by default
    in_utc = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(expires))
    assert lines[3] == (
        "The oldest has waited 3 days; unless someone reviews it, it expires in 11 days "
        f"(<!date^{expires}^{{date_short_pretty}} {{time}}|{in_utc}>)."
    )
    assert lines[4] == (
        f"Approve, edit or reject them in the review section of my "
        f"<slack://app?team={TEAM_ID}&id={APP_ID}&tab=home|App Home>."
    )
    for fact in (ORG_FACT, CHANNEL_FACT, SEEDED_FACT):
        assert fact not in text
        assert not any(fact in json.dumps(event) for event in logs)
    [event] = [e for e in logs if e["event"] == "memory.review_digest"]
    assert (event["sent"], event["waiting"], event["scopes"]) == (2, 3, 2)
    assert sorted(call.args["users"] for call in slack_api.calls_to("conversations.open")) == list(ADMINS)


async def test_a_digest_window_of_zero_hours_sends_no_dm(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path, stack: AsyncExitStack
) -> None:
    async with replica(
        stack, slack_api, fake_anthropic, tmp_path / "memory", Clock(), review_digest_hours=0
    ) as bot:
        with capture_logs() as logs:
            await bot.ask(slack_api, fake_anthropic, org())
        assert len(await bot.store.pending("org:acme", 10)) == 1  # the record waits; nobody is told

    assert not [e for e in logs if str(e["event"]).startswith("memory.review_digest")]  # not even tried
    assert slack_api.calls_to("conversations.open") == []
    assert slack_api.calls_to("chat.postMessage") == []


async def test_two_replicas_sharing_a_store_send_each_admin_one_dm_between_them(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path, stack: AsyncExitStack
) -> None:
    clock = Clock()
    async with (
        replica(stack, slack_api, fake_anthropic, tmp_path / "memory", clock) as first,
        replica(stack, slack_api, fake_anthropic, tmp_path / "memory", clock) as second,
    ):
        with capture_logs() as logs:
            await first.ask(slack_api, fake_anthropic, org())
            await second.ask(slack_api, fake_anthropic, org("Deploys are frozen on Fridays"))

    assert [len(dms(slack_api, admin)) for admin in ADMINS] == [1, 1]
    told = [e for e in logs if e["event"] == "memory.review_digest"]
    assert [(e["sent"], e["claimed_elsewhere"]) for e in told] == [(2, 0), (0, 2)]


async def test_a_restart_within_the_window_sends_no_second_dm(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path, stack: AsyncExitStack
) -> None:
    data_dir = tmp_path / "memory"
    async with replica(stack, slack_api, fake_anthropic, data_dir, Clock()) as before:
        await before.ask(slack_api, fake_anthropic, org())
    # A new process over the same data directory (its store, runtime and Bolt app all new).
    async with replica(stack, slack_api, fake_anthropic, data_dir, Clock()) as after:
        await after.ask(slack_api, fake_anthropic, org("Deploys are frozen on Fridays"))

    assert [len(dms(slack_api, admin)) for admin in ADMINS] == [1, 1]


async def test_a_dm_slack_refuses_is_one_warning_and_the_record_still_waits(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path, stack: AsyncExitStack
) -> None:
    slack_api.refuse("conversations.open", "missing_scope")
    async with replica(stack, slack_api, fake_anthropic, tmp_path / "memory", Clock()) as bot:
        with capture_logs() as logs:
            await bot.ask(slack_api, fake_anthropic, org())
        assert len(await bot.store.pending("org:acme", 10)) == 1

    failed = [e for e in logs if e["event"] == "memory.review_digest_failed"]
    assert [(e["stage"], e["error"], e["log_level"]) for e in failed] == [
        ("send", "SlackApiError", "warning")
    ] * 2
    assert slack_api.calls_to("chat.postMessage") == []
    assert [slack_api.bot_replies("C1")[-1].text] == ["Run make deploy."]  # the answer was never at stake
