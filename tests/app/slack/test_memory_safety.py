"""Memory never travels somewhere more visible than where it was learned, end to end.

The real Bolt app over HTTP with signed requests, the real dispatcher, reflection and SQLite store, the
real Anthropic SDK against the fake model server: every assertion about what a model saw is made on
the HTTP bodies the fake model server received.

The attack: user A says something personal in a DM; reflection keeps it in A's own scope. A then works
in a public channel, four turns deep, and the extractor re-emits the DM fact with `"audience": "org"`.
It must not land in the org or any public channel's scope, B must never get it in a memory block, and A's
own public-channel run must not see it either (everyone in the channel reads the answer) — only A's DM.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from app.slack.bot import registry_caller
from memory.reflection import REFLECTION_SYSTEM
from memory.rules.restate import meaning_key
from memory.stores.build import memory_dir
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryRecord
from tests.app.slack.harness import RunningBot, running_bot
from tests.app.slack.test_e2e import _system, _turns, full_runtime
from tests.app.slack.test_provenance import citations
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention

DM_FACT = "this user is interviewing at Globex next week and has not told their manager"
PRIVATE_FACT = "this user is drafting the confidential Initech acquisition memo"
PRIVATE_CHANNEL_FACT = "the Initech acquisition closes at the end of the quarter"
PUBLIC_FACT = "interview loops are booked through the recruiting calendar"

PARTNER_FACT = "the partner's launch slips to the first week of March"
PARTNER_PERSONAL_FACT = "this user signs off on the partner's launch checklist"

PUBLIC_SCOPES = ("org:acme", "channel:slack:C1", "channel:slack:C2")


class Workspace:
    """The bot, its runtime and the fake Slack workspace, stepped one message at a time."""

    def __init__(
        self, slack: FakeSlackApi, model: FakeModelServer, runtime: Runtime, bot: RunningBot
    ) -> None:
        self.slack = slack
        self.model = model
        self.runtime = runtime
        self.bot = bot

    async def say(self, channel: str, user: str, text: str, *, answer: str, extracted: Any = None) -> None:
        """One message to the bot, four turns deep when `extracted` (so the run is distilled, and the
        extractor answers `extracted`), else a fresh top-level message. Returns when every answer and
        reflection it started has finished."""
        direct = self.slack.conversations[channel] == "im"
        mention = "" if direct else f"<@{BOT_USER_ID}> "
        thread_ts = None
        if extracted is not None:
            root = self.slack.post_as_user(
                channel, user, f"{mention}can you help me get ready for something?"
            )
            thread_ts = root["ts"]
            self.slack.post_as_bot(channel, "Sure, what is it?", thread_ts=thread_ts)
            self.slack.post_as_user(channel, user, "it is about next week", thread_ts=thread_ts)
            self.slack.post_as_bot(channel, "Go on.", thread_ts=thread_ts)
        event = self.slack.post_as_user(channel, user, f"{mention}{text}", thread_ts=thread_ts)
        self.model.script(answer, *([json.dumps(extracted)] if extracted is not None else []))
        shared = channel in self.slack.ext_shared  # Slack Connect: the envelope says so
        delivery = await self.bot.slack.event(event if direct else as_app_mention(event), ext_shared=shared)
        assert delivery.status == 200
        await self.bot.settle()
        await self.runtime.lifecycle.settle()  # every reflection has finished

    async def org_learns(self, fact: str) -> None:
        """UA, four turns deep in the public channel C1, teaches the organization `fact`."""
        await self.say(
            "C1",
            "UA",
            "how do we book interview loops?",
            answer="The calendar.",
            extracted=facts((fact, "org")),
        )

    async def slash(self, text: str, user: str, channel: str) -> dict[str, Any]:
        """`/memory <text>` typed by `user` in `channel`: its one (ephemeral) response."""
        delivery = await self.bot.slack.slash(
            text=text, user_id=user, channel_id=channel, response_url=self.slack.response_url()
        )
        await self.bot.settle()
        assert delivery.status == 200
        [response] = self.slack.responses
        assert response["response_type"] == "ephemeral"
        return response

    def system_of_run(self, question: str) -> str:
        """The system prompt of the (one) run that answered `question`."""
        found = [
            body
            for body in self.model.bodies()
            if not _system(body).startswith(REFLECTION_SYSTEM[:60]) and _turns(body)[-1] == ("user", question)
        ]
        assert len(found) == 1, [_turns(body)[-1] for body in self.model.bodies()]
        return _system(found[0])

    def extractor_inputs(self) -> list[str]:
        return [
            _turns(body)[0][1]
            for body in self.model.bodies()
            if _system(body).startswith(REFLECTION_SYSTEM[:60])
        ]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    durable = SqliteMemoryStore(memory_dir(tmp_path / "data"))
    yield durable
    await durable.aclose()


@pytest.fixture
async def workspace(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> AsyncIterator[Workspace]:
    for channel, kind in (("D1", "im"), ("C1", "public"), ("C2", "public"), ("G1", "private")):
        slack_api.add_conversation(channel, kind)
    built, commands = full_runtime(tmp_path, fake_anthropic, memory=True, store=store)
    try:
        async with running_bot(
            slack_api, built.dispatcher, registry=commands, caller_factory=registry_caller, memory_store=store
        ) as bot:
            yield Workspace(slack_api, fake_anthropic, built, bot)
    finally:
        await built.aclose()


async def holding(store: SqliteMemoryStore, scope: str, text: str) -> list[MemoryRecord]:
    return [r for r in await store.list(scope, 50) if meaning_key(r.text) == meaning_key(text)]


def facts(*items: tuple[str, str]) -> dict[str, Any]:
    return {"facts": [{"text": t, "confidence": 0.9, "audience": a} for t, a in items], "summary": ""}


async def test_a_dm_fact_cannot_be_laundered_through_a_public_run_into_anyone_elses_prompt(
    workspace: Workspace, store: SqliteMemoryStore
) -> None:
    # 1. A tells the bot something personal in a DM; the extractor even asks for the org.
    await workspace.say(
        "D1",
        "UA",
        "I'm interviewing at Globex next week, I haven't told my manager.",
        answer="Good luck, I'll keep that between us.",
        extracted=facts((DM_FACT, "org")),
    )
    (learned,) = await holding(store, "user:slack:UA", DM_FACT)
    assert (learned.origin, learned.origin_conversation) == ("dm", "slack:D1")
    assert await holding(store, "org:acme", DM_FACT) == []

    # 2. A works in a public channel, four turns deep; the extractor re-emits the DM fact for the org.
    question = "what should I prepare for the Globex interview?"
    await workspace.say(
        "C1",
        "UA",
        question,
        answer="Prepare a system design story.",
        extracted=facts((DM_FACT.upper(), "org"), (DM_FACT, "channel"), (PUBLIC_FACT, "org")),
    )
    assert "Globex" not in workspace.system_of_run(question)  # A's own public run: not in its block
    assert "Globex next week" not in workspace.extractor_inputs()[-1]  # nor shown to its extractor
    for scope in PUBLIC_SCOPES:
        assert await holding(store, scope, DM_FACT) == [], scope
    (still,) = await holding(store, "user:slack:UA", DM_FACT)  # narrowed back into A's scope (a dedup)
    assert (still.origin, still.origin_conversation) == ("dm", "slack:D1")
    assert [r.origin for r in await holding(store, "org:acme", PUBLIC_FACT)] == ["public"]  # the rest lands

    # 3. B, in another channel, asks about the same thing: the org fact, never A's.
    b_question = "how are Globex interview loops booked?"
    await workspace.say("C2", "UB", b_question, answer="Through the recruiting calendar.")
    b_system = workspace.system_of_run(b_question)
    assert PUBLIC_FACT in b_system
    assert "Globex next week" not in b_system

    # 4. A, back in the DM: there it is.
    dm_question = "any last tips for the Globex interview next week?"
    await workspace.say("D1", "UA", dm_question, answer="Sleep well.")
    assert DM_FACT in workspace.system_of_run(dm_question)

    # 0 facts of dm origin in any wider scope.
    for scope in PUBLIC_SCOPES:
        assert {r.origin for r in await store.list(scope, 50)} <= {"public"}, scope


async def test_a_private_channel_fact_cannot_be_laundered_into_a_public_channels_scope(
    workspace: Workspace, store: SqliteMemoryStore
) -> None:
    # 1. In the private channel G1, four turns deep: one fact about A, one about the channel's work.
    await workspace.say(
        "G1",
        "UA",
        "I'm drafting the Initech acquisition memo; it closes at the end of the quarter.",
        answer="Noted.",
        extracted=facts((PRIVATE_FACT, "user"), (PRIVATE_CHANNEL_FACT, "org")),
    )
    (mine,) = await holding(store, "user:slack:UA", PRIVATE_FACT)
    assert (mine.origin, mine.origin_conversation) == ("private", "slack:G1")
    (channel,) = await holding(store, "channel:slack:G1", PRIVATE_CHANNEL_FACT)  # narrowed from org
    assert (channel.origin, channel.origin_conversation) == ("private", "slack:G1")

    # 2. A in the public channel C1; the extractor re-emits the private fact for this channel and the org.
    question = "can you help me tighten the Initech acquisition memo?"
    await workspace.say(
        "C1",
        "UA",
        question,
        answer="Send me a draft.",
        extracted=facts((PRIVATE_FACT, "channel"), (PRIVATE_FACT.lower(), "org")),
    )
    assert "Initech" not in workspace.system_of_run(question)
    assert "confidential Initech" not in workspace.extractor_inputs()[-1]
    for scope in PUBLIC_SCOPES:
        assert await holding(store, scope, PRIVATE_FACT) == [], scope
    assert [r.origin for r in await holding(store, "user:slack:UA", PRIVATE_FACT)] == ["private"]

    # 3. B in another channel never gets either fact.
    b_question = "when does the Initech acquisition close?"
    await workspace.say("C2", "UB", b_question, answer="I don't know.")
    b_system = workspace.system_of_run(b_question)
    assert "Initech" not in b_system

    # 4. Back in G1, both are there for its members.
    g_question = "remind me where the Initech acquisition memo stands"
    await workspace.say("G1", "UA", g_question, answer="Drafting.")
    g_system = workspace.system_of_run(g_question)
    assert PRIVATE_FACT in g_system and PRIVATE_CHANNEL_FACT in g_system

    for scope in PUBLIC_SCOPES:
        assert {r.origin for r in await store.list(scope, 50)} <= {"public"}, scope


async def test_memory_list_in_a_public_thread_withholds_the_dm_fact_and_the_slash_command_shows_it(
    workspace: Workspace, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> None:
    await workspace.say(
        "D1",
        "UA",
        "I'm interviewing at Globex next week.",
        answer="Good luck.",
        extracted=facts((DM_FACT, "user")),
    )
    requests = len(fake_anthropic.requests)

    typed = slack_api.post_as_user("C1", "UA", f"<@{BOT_USER_ID}> memory list me")
    await workspace.bot.slack.event(as_app_mention(typed))
    await workspace.bot.settle()
    [listed] = slack_api.bot_replies("C1", typed["ts"])
    assert "Globex" not in listed.text
    assert "1 more record" in listed.text and "in a DM" in listed.text

    # The /memory slash command answers ephemerally — only A sees it — so it shows A's own DM fact.
    response = await workspace.slash("list me", "UA", "C1")
    assert "Globex" in response["text"] and "from dm" in response["text"]
    assert len(fake_anthropic.requests) == requests  # commands make no model call


async def test_a_fact_reflection_learned_in_one_thread_is_cited_by_the_answer_in_another(
    workspace: Workspace, store: SqliteMemoryStore
) -> None:
    # Learned the way every fact is: a run four turns deep, distilled by the extractor in the background.
    await workspace.say(
        "C1",
        "UA",
        "how do we book the interview loops?",
        answer="Through the recruiting calendar.",
        extracted=facts((PUBLIC_FACT, "org")),
    )
    (learned,) = await holding(store, "org:acme", PUBLIC_FACT)
    assert citations(workspace.slack) == []  # the first answer drew on nothing

    question = "how are interview loops booked?"
    await workspace.say("C2", "UB", question, answer="Through the recruiting calendar, as before.")

    assert PUBLIC_FACT in workspace.system_of_run(question)
    [citation] = citations(workspace.slack)
    assert citation["text"]["text"] == "_Drew on 1 memory_"
    assert citation["accessory"]["text"]["text"] == "Why?"
    assert learned.id not in json.dumps(citation)  # record ids stay bot-side, never in the button


async def test_a_note_remembered_with_the_slash_command_in_a_public_channel_stays_out_of_its_answers(
    workspace: Workspace, slack_api: FakeSlackApi
) -> None:
    # /memory is typed where only the asker sees it (the channel never sees the words, the answer is
    # ephemeral): a note for oneself is said to the bot alone, as from the Home tab.
    assert "Remembered" in (await workspace.slash(f"remember {DM_FACT}", "UA", "C1"))["text"]

    question = "any tips for my Globex interview next week?"
    await workspace.say("C1", "UA", question, answer="Rest well.")
    assert "Globex" not in workspace.system_of_run(question)


async def test_a_shared_channel_learns_only_for_itself_and_is_never_shown_the_organizations_notes(
    workspace: Workspace, slack_api: FakeSlackApi, store: SqliteMemoryStore
) -> None:
    slack_api.add_conversation("C7", "public")
    slack_api.ext_shared.add("C7")  # a channel shared with a partner organization
    await workspace.org_learns(PUBLIC_FACT)

    # 1. In the shared channel, four turns deep: a channel fact the extractor asks for the org, and a
    #    fact about the partner who said it.
    question = "can you note our launch plan? and how are interview loops booked?"
    await workspace.say(
        "C7",
        "UPARTNER",
        question,
        answer="Noted.",
        extracted=facts((PARTNER_FACT, "org"), (PARTNER_PERSONAL_FACT, "user")),
    )
    assert "recruiting calendar" not in workspace.system_of_run(question)  # the org's notes stay out
    assert "recruiting calendar" not in workspace.extractor_inputs()[-1]
    (kept,) = await holding(store, "channel:slack:C7", PARTNER_FACT)  # narrowed from org to the channel
    assert (kept.origin, kept.origin_conversation) == ("external", "slack:C7")
    (own,) = await holding(store, "user:slack:UPARTNER", PARTNER_PERSONAL_FACT)
    assert (own.origin, own.origin_conversation) == ("external", "slack:C7")
    for scope in PUBLIC_SCOPES:
        assert await holding(store, scope, PARTNER_FACT) == [], scope

    # 2. An internal public channel never gets what the shared channel said.
    b_question = "when does the partner's launch happen?"
    await workspace.say("C1", "UB", b_question, answer="I don't know.")
    assert "first week of March" not in workspace.system_of_run(b_question)

    # 3. Back in the shared channel, its own fact is there for its members.
    c_question = "remind me when the partner's launch is"
    await workspace.say("C7", "UA", c_question, answer="March.")
    assert PARTNER_FACT in workspace.system_of_run(c_question)


async def test_the_slash_command_in_a_shared_channel_lists_none_of_the_organizations_notes(
    workspace: Workspace, slack_api: FakeSlackApi, store: SqliteMemoryStore
) -> None:
    """`/memory` answers ephemerally, but the asker may be the partner's: read as the channel (the
    channel's kind comes from conversations.info here: a slash command has no envelope flag)."""
    slack_api.add_conversation("C7", "public")
    slack_api.ext_shared.add("C7")
    await workspace.org_learns(PUBLIC_FACT)
    response = await workspace.slash("list org", "UPARTNER", "C7")
    assert "recruiting calendar" not in response["text"]


GUEST_FACT = "the contractor's audit report is due on the ninth"


async def test_a_guest_is_never_shown_the_organizations_notes_and_what_they_teach_stays_in_the_channel(
    workspace: Workspace, slack_api: FakeSlackApi, store: SqliteMemoryStore
) -> None:
    """A guest of the workspace (users.info `is_restricted`) is read like another organization's
    member: in a public channel and in their DM with the bot alike."""
    slack_api.guests["UGUEST"] = "multi"
    slack_api.add_conversation("D2", "im")
    await workspace.org_learns(PUBLIC_FACT)

    question = "note the audit date please, and how are interview loops booked?"
    await workspace.say("C1", "UGUEST", question, answer="Noted.", extracted=facts((GUEST_FACT, "org")))
    assert "recruiting calendar" not in workspace.system_of_run(question)
    (kept,) = await holding(store, "channel:slack:C1", GUEST_FACT)  # narrowed from org to the channel
    assert (kept.origin, kept.origin_conversation) == ("external", "slack:C1")
    assert await holding(store, "org:acme", GUEST_FACT) == []

    member_question = "when is the audit report due?"
    await workspace.say("C1", "UB", member_question, answer="I don't know.")
    assert "ninth" not in workspace.system_of_run(member_question)

    dm_question = "how are interview loops booked?"
    await workspace.say("D2", "UGUEST", dm_question, answer="Ask HR.")
    assert "recruiting calendar" not in workspace.system_of_run(dm_question)

    response = await workspace.slash("list org", "UGUEST", "C1")
    assert "recruiting calendar" not in response["text"]


async def test_in_a_channel_thread_the_extractor_is_shown_the_askers_earlier_words_as_theirs_alone(
    workspace: Workspace,
) -> None:
    slack = workspace.slack
    root = slack.post_as_user("C1", "UA", f"<@{BOT_USER_ID}> can you help me get ready for something?")
    slack.post_as_bot("C1", "Sure, what is it?", thread_ts=root["ts"])
    slack.post_as_user("C1", "UB", "UA wants every deploy to skip tests", thread_ts=root["ts"])
    slack.post_as_user("C1", "UA", "I prefer short answers", thread_ts=root["ts"])
    slack.post_as_bot("C1", "Go on.", thread_ts=root["ts"])
    event = slack.post_as_user("C1", "UA", f"<@{BOT_USER_ID}> how do we book loops?", thread_ts=root["ts"])
    workspace.model.script("The calendar.", json.dumps(facts()))
    assert (await workspace.bot.slack.event(as_app_mention(event))).status == 200
    await workspace.bot.settle()
    await workspace.runtime.lifecycle.settle()
    [given] = workspace.extractor_inputs()
    assert "\nrequester: I prefer short answers" in given
    assert "\nparticipant: UA wants every deploy to skip tests" in given
