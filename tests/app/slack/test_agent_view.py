"""The Agent messaging experience and the Assistant one it replaces, over real HTTP: suggested prompts
when the Messages tab opens (no thread) or an Assistant thread starts (its thread), a title for a new
agent conversation, and answers in both shapes of DM thread."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.slack.agent_view import PROMPTS_TITLE, SUGGESTED_PROMPTS, conversation_title
from app.slack.bot import registry_caller
from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.app.slack.test_e2e import full_runtime
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import FakeSlackApi

# An Assistant thread opened in the DM D1 (the Assistant experience's `assistant_thread_started`).
THREAD_STARTED = {
    "type": "assistant_thread_started",
    "assistant_thread": {
        "user_id": "U1",
        "channel_id": "D1",
        "thread_ts": "1700000000.000100",
        "context": {},
    },
    "event_ts": "1700000000.000200",
}


def _prompts(call_args: dict[str, Any]) -> list[dict[str, str]]:
    prompts = call_args["prompts"]
    parsed: list[dict[str, str]] = json.loads(prompts) if isinstance(prompts, str) else prompts
    return parsed


async def test_opening_the_messages_tab_sets_the_suggested_prompts_without_a_thread(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("D1", "im")
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        event = {
            "type": "app_home_opened",
            "user": "U1",
            "channel": "D1",
            "tab": "messages",
            "event_ts": "1.2",
        }
        assert (await bot.slack.event(event)).status == 200
        await bot.settle()

    [call] = slack_api.calls_to("assistant.threads.setSuggestedPrompts")
    assert call.args["channel_id"] == "D1"
    assert "thread_ts" not in call.args  # with it, an agent app's call silently does nothing
    assert _prompts(call.args) == list(SUGGESTED_PROMPTS)
    assert call.args["title"] == PROMPTS_TITLE
    assert slack_api.home_views == {}  # the Messages tab is not the Home tab


async def test_an_assistant_thread_started_gets_its_prompts_on_that_thread(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("D1", "im")
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        assert (await bot.slack.event(THREAD_STARTED)).status == 200
        await bot.settle()

    [call] = slack_api.calls_to("assistant.threads.setSuggestedPrompts")
    assert (call.args["channel_id"], call.args["thread_ts"]) == ("D1", "1700000000.000100")


async def test_a_new_agent_conversation_gets_a_title_and_its_answer_in_its_thread(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("D1", "im")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("D1", "U1", "How do we rotate the staging database password?")
        await bot.slack.event(posted)
        await bot.settle()

    [title] = slack_api.calls_to("assistant.threads.setTitle")
    assert (title.args["channel_id"], title.args["thread_ts"]) == ("D1", posted["ts"])
    assert title.args["title"] == "How do we rotate the staging database password?"
    [reply] = slack_api.bot_replies("D1", thread_ts=posted["ts"])
    assert reply.text.startswith("answer to:")


async def test_a_reply_in_an_assistant_thread_is_answered_there_without_a_new_title(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("D1", "im")
    root = slack_api.post_as_bot("D1", "Hi, how can I help?")  # the Assistant thread's opening
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("D1", "U1", "what changed in the last deploy?", thread_ts=root.ts)
        await bot.slack.event(posted)
        await bot.settle()

    assert slack_api.calls_to("assistant.threads.setTitle") == []
    [message] = dispatcher.messages
    assert message.channel_visibility == "dm" and message.text == "what changed in the last deploy?"
    [reply] = slack_api.bot_replies("D1", thread_ts=root.ts)
    assert reply.text == "answer to: what changed in the last deploy?"


def test_a_long_first_message_is_cut_to_a_one_line_title() -> None:
    title = conversation_title(
        "Please summarize everything we decided about the migration plan in Q3\nand more"
    )
    assert "\n" not in title and len(title) <= 60 and title.endswith("…")


async def test_a_command_in_the_messages_tab_is_answered_but_never_becomes_the_title(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer
) -> None:
    """`memory list` typed as a new conversation is answered by the registry without the agent, and the
    conversation keeps no title of it; the next conversation, a question, is titled by its text."""
    slack_api.add_conversation("D1", "im")
    fake_anthropic.default_reply = "Rotate it in the vault."
    built, commands = full_runtime(tmp_path, fake_anthropic, memory=False, store=InProcessMemoryStore())
    try:
        async with running_bot(
            slack_api, built.dispatcher, registry=commands, caller_factory=registry_caller
        ) as bot:
            for text in ("memory list", "memory listt org", "How do we rotate the staging password?"):
                await bot.slack.event(slack_api.post_as_user("D1", "U1", text))
                await bot.settle()
    finally:
        await built.aclose()

    replies = slack_api.bot_replies("D1")
    assert len(replies) == 3 and replies[-1].text == "Rotate it in the vault."
    assert len(fake_anthropic.requests) == 1  # the two commands reached no model
    [title] = slack_api.calls_to("assistant.threads.setTitle")
    assert title.args["title"] == "How do we rotate the staging password?"
