"""Several bot replicas behind one Slack app: two real `switchboard serve` processes (HTTP mode) sharing
one PostgreSQL store are each handed the same event — a retry that reached the other replica — and the
message is answered once; so are two bots behind one memory service. A shared claim the store cannot
answer never silences the message."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from structlog.testing import capture_logs

from memory.service.app import create_app
from memory.stores.http import HttpMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.app.slack.transports.test_serve import _bot_env, serve
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import BOT_USER_ID, SIGNING_SECRET, FakeSlackApi, SlackDelivery, as_app_mention
from tests.memory.postgres_support import TempSchema, temp_schema
from tests.memory.service_support import TOKEN, free_port


@pytest.fixture
def schema() -> Iterator[TempSchema]:
    with temp_schema("sbslack") as created:
        yield created


async def test_two_serve_processes_on_one_postgres_store_answer_an_event_delivered_to_both_once(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path, schema: TempSchema
) -> None:
    slack_api.add_conversation("C1", "public")
    fake_anthropic.default_reply = "Deploys run nightly."
    env = {
        **_bot_env(slack_api, fake_anthropic, tmp_path),
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SWITCHBOARD_ORGANIZATION": "acme",
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_MEMORY__STORE": "postgres",
        "DATABASE_URL": schema.dsn,
    }
    ports = (free_port(), free_port())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        serve(tmp_path / "a", {**env, "PORT": str(ports[0])}, "--host", "127.0.0.1") as first,
        serve(tmp_path / "b", {**env, "PORT": str(ports[1])}, "--host", "127.0.0.1") as second,
    ):
        await asyncio.gather(first.wait_for_port(ports[0]), second.wait_for_port(ports[1]))
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> when do deploys run?")
        event = as_app_mention(posted)
        deliveries = await asyncio.gather(
            SlackDelivery(f"http://127.0.0.1:{ports[0]}/slack/events").event(event, event_id="EvTWICE"),
            SlackDelivery(f"http://127.0.0.1:{ports[1]}/slack/events").event(
                event, event_id="EvTWICE", retry_num=1
            ),
        )
        assert [d.status for d in deliveries] == [200, 200]  # both acknowledge at once
        await slack_api.wait_until(lambda: len(slack_api.bot_replies("C1", posted["ts"])) == 1, within=60)
        lines = first.lines + second.lines
        await slack_api.wait_until(lambda: any("claimed_elsewhere" in line for line in lines), within=60)
        codes = await asyncio.gather(first.stop(), second.stop())

    assert list(codes) == [0, 0], "".join(first.lines + second.lines)
    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text == "Deploys run nightly."
    assert len(fake_anthropic.requests) == 1
    both = first.lines + second.lines
    assert sum("slack.event" in line and "accepted" in line for line in both) == 2  # one answered
    assert sum("claimed_elsewhere" in line for line in both) == 1


async def test_a_shared_claim_that_cannot_be_reached_is_logged_and_the_message_answered(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    unreachable = HttpMemoryStore(f"http://127.0.0.1:{free_port()}", TOKEN, timeout=1.0)  # nobody listens
    dispatcher = RecordingDispatcher()
    try:
        with capture_logs() as logs:
            async with running_bot(slack_api, dispatcher, memory_store=unreachable) as bot:
                posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> still there?")
                assert (await bot.slack.event(as_app_mention(posted))).status == 200
                await bot.settle()
    finally:
        await unreachable.aclose()

    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text == "answer to: still there?"
    [failed] = [entry for entry in logs if entry["event"] == "slack.claim_failed"]
    assert failed["answered"] is True and failed["event_id"] and failed["error"] == "MemoryUnavailable"


async def test_two_bots_behind_one_memory_service_answer_an_event_delivered_to_both_once(
    slack_api: FakeSlackApi, tmp_path: Path
) -> None:
    slack_api.add_conversation("C1", "public")
    backing = SqliteMemoryStore(tmp_path / "memory")
    service = create_app(backing, TOKEN)
    clients = [
        HttpMemoryStore("http://memory.test", TOKEN, transport=httpx.ASGITransport(app=service))
        for _ in range(2)
    ]
    dispatchers = [RecordingDispatcher(), RecordingDispatcher()]
    try:
        async with (
            running_bot(slack_api, dispatchers[0], memory_store=clients[0]) as first,
            running_bot(slack_api, dispatchers[1], memory_store=clients[1]) as second,
        ):
            posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> who is on call?")
            event = as_app_mention(posted)
            await asyncio.gather(
                first.slack.event(event, event_id="EvBOTH"),
                second.slack.event(event, event_id="EvBOTH", retry_num=1),
            )
            await asyncio.gather(first.settle(), second.settle())
    finally:
        for client in clients:
            await client.aclose()
        await backing.aclose()

    assert len(slack_api.bot_replies("C1", posted["ts"])) == 1
    assert sorted(len(d.messages) for d in dispatchers) == [0, 1]
