"""Memory follows Slack, end to end: the real Bolt app over HTTP with signed requests, the real dispatcher
and registry, the fake Anthropic server, the fake Slack Web API and a real SQLite store.

An answer that drew on memory carries the citation line; *Why?* (a signed `block_actions`) returns the
records with permalinks, ephemerally; a deleted source message makes its records unreachable by
retrieve, list, the home tab and Why?; a redelivered deletion changes nothing; an edit erases, an
unfurl does not; a deleted channel empties its channel scope.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from typing import Any

import pytest
from structlog.testing import capture_logs

from app.runtime import Runtime
from app.slack.bot import registry_caller
from app.slack.provenance import WHY_ACTION
from commands.browse import MemoryBrowser
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate, SourceLink
from tests.app.slack.harness import RunningBot, running_bot
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention, block_action

SEEDED = "Deploys run from the release branch"
LEARNED = "the release captain approves releases"


@pytest.fixture
async def bot(
    slack_api: FakeSlackApi, runtime: tuple[Runtime, Any], store: SqliteMemoryStore
) -> AsyncIterator[RunningBot]:
    built, commands = runtime
    slack_api.add_conversation("C1", "public")
    browser = MemoryBrowser(store=store, memory_enabled=True, organization="acme", admins=[])
    async with running_bot(
        slack_api,
        built.dispatcher,
        registry=commands,
        caller_factory=registry_caller,
        memory_store=store,
        browser=browser,
    ) as running:
        yield running


async def settle(bot: RunningBot, runtime: tuple[Runtime, Any]) -> None:
    await bot.settle()
    await runtime[0].lifecycle.drain()  # reflections and audit writes
    await bot.settle()


def citations(slack_api: FakeSlackApi) -> list[dict[str, Any]]:
    """Every citation block the bot attached to an answer (stopStream or postMessage blocks)."""
    found = []
    for call in slack_api.calls:
        blocks = call.args.get("blocks")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        found += [b for b in blocks or [] if str(b.get("block_id", "")).startswith("citation:")]
    return found


async def ask(bot: RunningBot, slack_api: FakeSlackApi, text: str, thread_ts: str | None = None) -> None:
    await bot.slack.event(
        as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> {text}", thread_ts=thread_ts))
    )


async def why(bot: RunningBot, slack_api: FakeSlackApi, run_id: str, user: str = "U1") -> str:
    payload = block_action(user, {"action_id": WHY_ACTION, "type": "button", "value": run_id}, channel="C1")
    payload["response_url"] = slack_api.response_url("why")
    before = len(slack_api.responses)
    assert (await bot.slack.interaction(payload)).status == 200
    await slack_api.wait_until(lambda: len(slack_api.responses) > before)
    response = slack_api.responses[-1]
    assert response["response_type"] == "ephemeral" and response["replace_original"] is False
    return str(response["text"])


async def test_an_answer_that_drew_on_memory_carries_the_citation_and_why_shows_the_records_with_links(
    bot: RunningBot,
    runtime: tuple[Runtime, Any],
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: SqliteMemoryStore,
) -> None:
    seeded = MemoryCandidate(
        "fact", SEEDED, "slack:C1:1700000000.000100", origin="public", origin_conversation="slack:C1"
    )
    await store.write("org:acme", [seeded])
    fake_anthropic.script("From the release branch.", "No idea.")
    await ask(bot, slack_api, "where do deploys run from?")
    await settle(bot, runtime)

    [citation] = citations(slack_api)
    assert citation["text"]["text"] == "_Drew on 1 memory_"
    assert citation["accessory"]["text"]["text"] == "Why?"
    run_id = citation["accessory"]["value"]

    text = await why(bot, slack_api, run_id)
    assert "`mem:org:acme:1`" in text and "`org:acme`" in text and f"`{SEEDED}`" in text
    assert "<https://fake.slack.com/archives/C1/p1700000000000100|source thread>" in text
    assert len(fake_anthropic.requests) == 1  # no model turn for Why?

    await ask(bot, slack_api, "what is the weather?")  # nothing matches: no citation line
    await settle(bot, runtime)
    assert len(citations(slack_api)) == 1


async def learn_then_cite(
    bot: RunningBot,
    runtime: tuple[Runtime, Any],
    slack_api: FakeSlackApi,
    fake: FakeModelServer,
    store: SqliteMemoryStore,
) -> tuple[str, str]:
    """A fact distilled from a thread's run (its sources linked as reflection links them); a new
    thread's answer then reads it. Returns the source thread's root ts and the second answer's run id."""
    root = slack_api.post_as_user("C1", "U1", "where do we deploy from, and who approves?")
    sources = (f"slack:C1:{root['ts']}",)
    scopes = ("org:acme", "channel:slack:C1", "user:slack:U1")
    await store.link_sources(SourceLink("run_source", scopes, sources))
    learned = MemoryCandidate(
        "fact",
        LEARNED,
        f"slack:C1:{root['ts']}",
        source_run_id="run_source",
        origin="public",
        origin_conversation="slack:C1",
    )
    await store.write("org:acme", [learned])
    fake.script("The release captain approves them.")
    await ask(bot, slack_api, "who approves releases?")
    await settle(bot, runtime)
    [citation] = citations(slack_api)
    return str(root["ts"]), str(citation["accessory"]["value"])


def deleted(ts: str, event_ts: str = "1800000000.000001") -> dict[str, Any]:
    return {
        "type": "message",
        "subtype": "message_deleted",
        "hidden": True,
        "channel": "C1",
        "channel_type": "channel",
        "ts": event_ts,
        "deleted_ts": ts,
        "previous_message": {"type": "message", "user": "U1", "text": "gone", "ts": ts},
    }


async def test_a_deleted_source_message_makes_its_records_unreachable_everywhere(
    bot: RunningBot,
    runtime: tuple[Runtime, Any],
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: SqliteMemoryStore,
) -> None:
    root_ts, run_id = await learn_then_cite(bot, runtime, slack_api, fake_anthropic, store)
    assert f"`{LEARNED}`" in await why(bot, slack_api, run_id)
    assert [r.text for r in await store.list("org:acme", 10)] == [LEARNED]

    assert (await bot.slack.event(deleted(root_ts))).status == 200
    await settle(bot, runtime)

    assert await store.retrieve("org:acme", "who approves releases", 5) == []
    assert await store.list("org:acme", 10) == []
    listed = await runtime[1].handle(
        "memory list org",
        registry_caller(
            user_id="slack:U1",
            channel_id="slack:C1",
            channel_visibility="public",
            thread_key="t",
            surface="slack",
        ),
    )
    assert LEARNED not in listed.text
    await bot.slack.event(
        {"type": "app_home_opened", "user": "U1", "channel": "DU1", "tab": "home", "event_ts": "1.2"}
    )
    await settle(bot, runtime)
    assert LEARNED not in json.dumps(slack_api.home_views["U1"][-1])
    text = await why(bot, slack_api, run_id)
    assert LEARNED not in text and "1 has been forgotten since" in text
    with closing(sqlite3.connect(store.database_path("org:acme"))) as connection:
        assert connection.execute("SELECT erased_reason FROM records").fetchall() == [("source_deleted",)]


async def test_a_redelivered_deletion_changes_nothing_the_second_time(
    bot: RunningBot,
    runtime: tuple[Runtime, Any],
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: SqliteMemoryStore,
) -> None:
    root_ts, _ = await learn_then_cite(bot, runtime, slack_api, fake_anthropic, store)
    path = store.database_path("org:acme")
    with capture_logs() as logs:
        await bot.slack.event(deleted(root_ts), event_id="EvDEL1")
        await settle(bot, runtime)
        with closing(sqlite3.connect(path)) as connection:
            first = connection.execute("SELECT * FROM records ORDER BY seq").fetchall()
        await bot.slack.event(deleted(root_ts), event_id="EvDEL1", retry_num=1)  # Slack's retry
        await bot.slack.event(deleted(root_ts), event_id="EvDEL2")  # after a restart: a new id
        await settle(bot, runtime)
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT * FROM records ORDER BY seq").fetchall() == first
    erased = [entry["erased"] for entry in logs if entry["event"] == "memory.source_erased"]
    assert erased == [1, 0]


def changed(ts: str, old: str, new: str, user: str = "U1") -> dict[str, Any]:
    return {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "channel": "C1",
        "channel_type": "channel",
        "ts": "1800000000.000002",
        "message": {
            "type": "message",
            "user": user,
            "text": new,
            "ts": ts,
            "edited": {"user": user, "ts": "1"},
        },
        "previous_message": {"type": "message", "user": user, "text": old, "ts": ts},
    }


async def test_an_edit_that_changes_the_words_erases_an_unfurl_or_the_bots_own_edit_does_not(
    bot: RunningBot,
    runtime: tuple[Runtime, Any],
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: SqliteMemoryStore,
) -> None:
    root_ts, _ = await learn_then_cite(bot, runtime, slack_api, fake_anthropic, store)
    await bot.slack.event(changed(root_ts, "where do we deploy from?", "where do we deploy from?"))
    await bot.slack.event(changed(root_ts, "a", "b", user=BOT_USER_ID))
    await settle(bot, runtime)
    assert [r.text for r in await store.list("org:acme", 10)] == [LEARNED]

    await bot.slack.event(changed(root_ts, "where do we deploy from?", "where do we ship from?"))
    await settle(bot, runtime)
    assert await store.list("org:acme", 10) == []
    with closing(sqlite3.connect(store.database_path("org:acme"))) as connection:
        assert connection.execute("SELECT erased_reason FROM records").fetchall() == [("source_edited",)]


async def test_a_deleted_channel_erases_its_channel_scope_and_nothing_else(
    bot: RunningBot, runtime: tuple[Runtime, Any], store: SqliteMemoryStore
) -> None:
    await store.write(
        "channel:slack:C1", [MemoryCandidate("fact", "this channel ships the api", "slack:C1:1.0")]
    )
    await store.write("org:acme", [MemoryCandidate("fact", "org knowledge", "slack:C1:1.0")])
    assert (
        await bot.slack.event({"type": "channel_deleted", "channel": "C1", "event_ts": "1.3"})
    ).status == 200
    await settle(bot, runtime)
    assert await store.list("channel:slack:C1", 10) == []
    assert [r.text for r in await store.list("org:acme", 10)] == ["org knowledge"]


async def test_why_in_a_channel_since_shared_with_another_organization_lists_none_of_its_notes(
    bot: RunningBot,
    runtime: tuple[Runtime, Any],
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: SqliteMemoryStore,
) -> None:
    """An answer that drew on the organization's notes before its channel was shared: a partner's
    click on its Why? (answered to them alone) lists none of them."""
    seeded = MemoryCandidate("fact", SEEDED, "slack:C1:1700000000.000100", origin="public")
    await store.write("org:acme", [seeded])
    slack_api.add_conversation("C7", "public")
    fake_anthropic.script("From the release branch.")
    question = slack_api.post_as_user("C7", "U1", f"<@{BOT_USER_ID}> where do deploys run from?")
    await bot.slack.event(as_app_mention(question))
    await settle(bot, runtime)
    [citation] = citations(slack_api)

    slack_api.ext_shared.add("C7")  # shared with a partner; its next event says so
    await bot.slack.event(slack_api.post_as_user("C7", "UPARTNER", "hello all"), ext_shared=True)
    payload = block_action(
        "UPARTNER",
        {"action_id": WHY_ACTION, "type": "button", "value": citation["accessory"]["value"]},
        channel="C7",
    )
    payload["response_url"] = slack_api.response_url("why")
    assert (await bot.slack.interaction(payload)).status == 200
    await slack_api.wait_until(lambda: len(slack_api.responses) > 0)
    assert SEEDED not in slack_api.responses[-1]["text"]
