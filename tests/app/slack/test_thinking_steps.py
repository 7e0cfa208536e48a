"""Thinking steps, end to end: the real Bolt app over HTTP with signed requests, the real dispatcher,
the fake Anthropic server, the fake Slack Web API (which checks every chunk's shape as Slack documents
it) and a real SQLite store, or the fake GitHub for the coding agent.

A streamed answer carries the memory read as a complete task whose sources link the threads of the
notes the reader was shown, one task per tool call (in progress, then complete or error), a plan for
the coding agent, and then the answer as Markdown; where chunks are refused (by the workspace or an
slack_sdk without chunk models) the answer arrives as it did before, never with a ⚠️.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.github.client import GitHubClient
from app.runtime import Runtime
from app.slack.bot import registry_caller
from app.slack.steps import CHUNK_MODULE
from app.steps import RECALL_STEP, Step
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate
from tests.app.github.harness import Bot, build_bot, make_settings
from tests.app.slack.harness import RunningBot, running_bot
from tests.fakes.github_api import FakeGitHub
from tests.fakes.model_server import FakeModelServer, Reply, ScriptedToolCall, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, Message, as_app_mention

ANSWER = "Deploys run from the release branch."


def link(channel: str, ts: str) -> str:
    return f"https://fake.slack.com/archives/{channel}/p{ts.replace('.', '')}"


@pytest.fixture
async def bot(
    slack_api: FakeSlackApi, runtime: tuple[Runtime, Any], store: SqliteMemoryStore
) -> AsyncIterator[RunningBot]:
    """Memory on (SQLite), as `switchboard serve` wires it; C1 and C2 public, C9 private."""
    for channel, kind in (("C1", "public"), ("C2", "public"), ("C9", "private")):
        slack_api.add_conversation(channel, kind)
    async with running_bot(
        slack_api, runtime[0].dispatcher, caller_factory=registry_caller, memory_store=store
    ) as running:
        yield running


@pytest.fixture
async def coding(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer, github_client: GitHubClient
) -> AsyncIterator[RunningBot]:
    """The coding agent as production wires it (GitHub tools, the verified repo resolver), in Slack."""
    built: Bot = build_bot(make_settings(tmp_path, fake_anthropic.base_url), github_client)
    slack_api.add_conversation("C0REPO", "public")
    try:
        async with running_bot(slack_api, built.dispatcher) as running:
            yield running
    finally:
        await built.aclose()


def add_widgets(github: FakeGitHub) -> None:
    """The repo the coding agent reads, with one two-line file."""
    github.add_repo("acme/widgets")
    github.add_file("acme/widgets", "src/deploy.py", "def deploy():\n    return blue_green()\n")


async def seed_deploy_notes(store: SqliteMemoryStore) -> None:
    """Two notes a public channel may be shown (two threads) and one learned in a private channel."""
    await store.write(
        "org:acme",
        [
            MemoryCandidate(
                "fact", "Deploys run from the release branch", "slack:C1:1700000000.000100",
                origin="public", origin_conversation="slack:C1",
            ),
            MemoryCandidate(
                "fact", "Deploys run after the release captain approves", "slack:C2:1700000000.000300",
                origin="public", origin_conversation="slack:C2",
            ),
            MemoryCandidate(
                "fact", "Deploys run from the hotfix branch in incidents", "slack:C9:1700000000.000900",
                origin="private", origin_conversation="slack:C9",
            ),
        ],
    )  # fmt: skip


async def ask_about_deploys(
    bot: RunningBot, slack_api: FakeSlackApi, fake: FakeModelServer, store: SqliteMemoryStore
) -> Message:
    """The deploy notes in memory, a question in C1 that recalls them: the answer's message."""
    await seed_deploy_notes(store)
    fake.script(ANSWER)
    await ask(bot, slack_api, "C1", "where do deploys run from?")
    return answer_message(slack_api, "C1")


async def ask(running: RunningBot, slack_api: FakeSlackApi, channel: str, text: str) -> None:
    event = slack_api.post_as_user(channel, "U1", f"<@{BOT_USER_ID}> {text}")
    assert (await running.slack.event(as_app_mention(event))).status == 200
    await running.settle()


def answer_message(slack_api: FakeSlackApi, channel: str) -> Message:
    [message] = slack_api.bot_replies(channel)
    return message


def chunk_types(message: Message) -> list[str]:
    """The message's chunk types in order, runs of the same type folded into one."""
    types: list[str] = []
    for chunk in message.chunks:
        if not types or types[-1] != chunk["type"]:
            types.append(chunk["type"])
    return types


def block_kinds(slack_api: FakeSlackApi) -> list[str]:
    """What the answer's closing blocks are (`citation`, `feedback`), by their block ids."""
    [stop] = slack_api.calls_to("chat.stopStream")
    blocks: list[dict[str, Any]] = stop.args.get("blocks") or []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return [str(block.get("block_id", "")).split(":")[0] for block in blocks]


def no_warning(slack_api: FakeSlackApi, channel: str) -> bool:
    return all("⚠️" not in message.text for message in slack_api.bot_replies(channel))


async def test_the_memory_read_is_a_complete_task_linking_the_threads_of_the_notes_shown(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> None:
    message = await ask_about_deploys(bot, slack_api, fake_anthropic, store)
    [recall] = message.task_updates(RECALL_STEP)
    assert (recall["title"], recall["status"]) == ("Recalled 2 notes", "complete")
    assert [source["url"] for source in recall["sources"]] == [
        link("C1", "1700000000.000100"),
        link("C2", "1700000000.000300"),
    ]
    assert all(source["type"] == "url" and source["text"] for source in recall["sources"])
    assert message.task_display_mode is None  # a general answer: Slack's timeline


async def test_a_note_the_reader_may_not_see_is_not_among_the_task_sources(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> None:
    message = await ask_about_deploys(bot, slack_api, fake_anthropic, store)
    [recall] = message.task_updates(RECALL_STEP)
    urls = json.dumps(recall["sources"])
    assert "C9" not in urls and "hotfix" not in json.dumps(recall)
    assert "hotfix" not in fake_anthropic.bodies()[0]["system"]  # the block left it out too


async def test_a_slack_connect_channel_is_not_shown_notes_learned_in_internal_channels(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> None:
    await seed_deploy_notes(store)
    slack_api.add_conversation("C7", "public")
    slack_api.ext_shared.add("C7")  # shared with a partner organization
    fake_anthropic.script(ANSWER)
    event = slack_api.post_as_user("C7", "UPARTNER", f"<@{BOT_USER_ID}> where do deploys run from?")
    assert (await bot.slack.event(as_app_mention(event), ext_shared=True)).status == 200
    await bot.settle()

    assert "release branch" not in fake_anthropic.bodies()[0]["system"]


async def test_the_answer_follows_its_steps_as_markdown_with_the_feedback_and_why_buttons(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> None:
    message = await ask_about_deploys(bot, slack_api, fake_anthropic, store)
    assert chunk_types(message) == ["task_update", "markdown_text"]
    assert message.text == ANSWER
    assert block_kinds(slack_api) == ["citation", "feedback"]  # the Why? button and 👍 / 👎


async def test_no_memory_recalled_means_no_step_and_the_answer_streams_as_before(
    bot: RunningBot, slack_api: FakeSlackApi, fake_anthropic: FakeModelServer
) -> None:
    fake_anthropic.script(ANSWER)
    await ask(bot, slack_api, "C1", "where do deploys run from?")

    message = answer_message(slack_api, "C1")
    assert chunk_types(message) == ["markdown_text"] and message.text == ANSWER


async def test_a_tool_call_is_a_task_going_from_in_progress_to_complete(
    coding: RunningBot, slack_api: FakeSlackApi, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    add_widgets(github_api)
    fake_anthropic.script(tool_reply("read_file", {"path": "src/deploy.py"}), "Blue-green: src/deploy.py.")
    await ask(coding, slack_api, "C0REPO", "code how do deploys work? --repo acme/widgets")

    message = answer_message(slack_api, "C0REPO")
    updates = message.task_updates("tool-1")
    assert [update["status"] for update in updates] == ["in_progress", "complete"]
    assert {update["title"] for update in updates} == {"read_file src/deploy.py"}
    assert updates[-1]["output"] == "3 lines"  # its header line and the two of the file
    assert chunk_types(message)[-1] == "markdown_text" and message.text == "Blue-green: src/deploy.py."


async def test_a_tool_argument_or_an_answer_that_says_channel_notifies_nobody(
    coding: RunningBot, slack_api: FakeSlackApi, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    add_widgets(github_api)
    fake_anthropic.script(
        tool_reply("read_file", {"path": "<!channel> src/deploy.py"}), "Done <!here>, see <@U1>."
    )
    await ask(coding, slack_api, "C0REPO", "code how do deploys work? --repo acme/widgets")

    message = answer_message(slack_api, "C0REPO")
    titles = {update["title"] for update in message.task_updates("tool-1")}
    assert titles == {"read_file @\u2060channel src/deploy.py"}
    assert message.text == "Done @\u2060here, see <@U1>."


async def test_a_card_pings_nobody_the_asker_did_not_name(
    coding: RunningBot, slack_api: FakeSlackApi, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    """A card is addressed to nobody: a person its tool argument mentions is named, not notified."""
    add_widgets(github_api)
    fake_anthropic.script(tool_reply("read_file", {"path": "<@U5|eve> src/deploy.py"}), "Done.")
    await ask(coding, slack_api, "C0REPO", "code how do deploys work? --repo acme/widgets")

    titles = {update["title"] for update in answer_message(slack_api, "C0REPO").task_updates("tool-1")}
    assert titles == {"read_file @\u2060eve src/deploy.py"}


async def test_a_failing_tool_call_ends_its_task_in_error_with_a_short_output(
    coding: RunningBot, slack_api: FakeSlackApi, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    github_api.add_repo("acme/widgets")
    fake_anthropic.script(tool_reply("read_file", {"path": "missing.py"}), "There is no such file.")
    await ask(coding, slack_api, "C0REPO", "code read missing.py --repo acme/widgets")

    updates = answer_message(slack_api, "C0REPO").task_updates("tool-1")
    assert [update["status"] for update in updates] == ["in_progress", "error"]
    assert updates[-1]["output"].startswith("error:") and len(updates[-1]["output"]) <= 200
    assert no_warning(slack_api, "C0REPO")


async def test_the_coding_agent_shows_its_steps_as_a_plan(
    coding: RunningBot, slack_api: FakeSlackApi, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    add_widgets(github_api)
    both = Reply(
        tool_calls=(
            ScriptedToolCall("search_code", {"query": "deploy"}),
            ScriptedToolCall("read_file", {"path": "src/deploy.py"}),
        )
    )
    fake_anthropic.script(both, "Blue-green.")
    await ask(coding, slack_api, "C0REPO", "code how do deploys work? --repo acme/widgets")

    message = answer_message(slack_api, "C0REPO")
    assert message.task_display_mode == "plan"
    assert message.chunks[0] == {"type": "plan_update", "title": "Working in acme/widgets"}
    titles = [update["title"] for update in message.task_updates() if update["status"] == "in_progress"]
    assert titles == ["search_code deploy", "read_file src/deploy.py"]


@pytest.mark.parametrize("error", ["invalid_arguments", "invalid_chunks"])
async def test_a_workspace_that_refuses_chunks_gets_the_answer_as_before_without_a_warning(
    bot: RunningBot,
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: SqliteMemoryStore,
    error: str,
) -> None:
    slack_api.refuse_chunks(error)
    message = await ask_about_deploys(bot, slack_api, fake_anthropic, store)
    assert message.text == ANSWER and message.task_updates() == []
    assert no_warning(slack_api, "C1")
    assert slack_api.calls_to("assistant.threads.setStatus")  # the status line, then the text
    assert block_kinds(slack_api) == ["citation", "feedback"]


async def test_a_refusal_after_the_first_step_keeps_the_answer_in_the_same_message(
    coding: RunningBot, slack_api: FakeSlackApi, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    add_widgets(github_api)
    fake_anthropic.script(tool_reply("read_file", {"path": "src/deploy.py"}), "Blue-green.")
    slack_api.fail_next("chat.appendStream", "invalid_chunks")  # the tool's second update
    await ask(coding, slack_api, "C0REPO", "code how do deploys work? --repo acme/widgets")

    message = answer_message(slack_api, "C0REPO")
    assert message.text == "Blue-green."
    assert [u["status"] for u in message.task_updates("tool-1")] == ["in_progress"]
    assert no_warning(slack_api, "C0REPO")


async def test_an_sdk_without_chunk_models_sends_no_steps_and_the_answer_as_before(
    bot: RunningBot,
    slack_api: FakeSlackApi,
    fake_anthropic: FakeModelServer,
    store: SqliteMemoryStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, CHUNK_MODULE, None)  # `import` now fails, as on slack_sdk < 3.40
    message = await ask_about_deploys(bot, slack_api, fake_anthropic, store)
    assert message.text == ANSWER and message.task_updates() == []
    assert no_warning(slack_api, "C1")


class FailsAfterAStep:
    """A dispatcher whose run shows a step, then breaks (the surface's caller posts the ⚠️)."""

    async def dispatch(self, message: object, surface: Any) -> None:
        await surface.set_status("Thinking…")
        surface.show_step(Step("tool-1", "read_file a.py", "in_progress"))
        raise RuntimeError("boom")


async def test_a_run_that_breaks_after_a_step_leaves_no_message_streaming(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    async with running_bot(slack_api, FailsAfterAStep()) as running:
        await ask(running, slack_api, "C1", "read a.py")

    bot_messages = [m for m in slack_api.messages["C1"] if m.bot_id]
    assert [m.task_updates()[0]["status"] for m in bot_messages if m.chunks] == ["in_progress"]
    assert not any(m.streaming for m in bot_messages)
    assert any("⚠️" in m.text for m in bot_messages)  # the failure is said, as before


async def test_a_stream_that_times_out_after_a_step_still_carries_the_answer_once(
    coding: RunningBot, slack_api: FakeSlackApi, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    add_widgets(github_api)
    coding.bot.client.timeout = 1  # Slack stops answering once the steps' stream has started
    answer = "Blue-green. " * 100
    fake_anthropic.script(tool_reply("read_file", {"path": "src/deploy.py"}), answer)
    released = slack_api.hold("chat.appendStream")
    try:
        await ask(coding, slack_api, "C0REPO", "code how do deploys work? --repo acme/widgets")
        [message] = slack_api.bot_replies("C0REPO")
        assert message.text == answer.strip()  # put in by chat.update, in the message the steps opened
        assert len(slack_api.calls_to("chat.update")) == 1
    finally:
        released.set()


async def test_sixty_tool_calls_take_fewer_stream_calls_than_slack_allows_a_minute_and_all_complete(
    coding: RunningBot, slack_api: FakeSlackApi, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    add_widgets(github_api)
    calls = tuple(ScriptedToolCall("read_file", {"path": "src/deploy.py"}) for _ in range(60))
    fake_anthropic.script(Reply(tool_calls=calls), "Blue-green.")
    await ask(coding, slack_api, "C0REPO", "code how do deploys work? --repo acme/widgets")

    message = answer_message(slack_api, "C0REPO")
    assert message.text == "Blue-green."
    assert {message.task_updates(f"tool-{n}")[-1]["status"] for n in range(1, 61)} == {"complete"}
    stream_calls = [c for c in slack_api.calls if c.method.endswith("Stream")]
    assert len(stream_calls) < 100  # chat.appendStream is Tier 4: 100+ a minute
