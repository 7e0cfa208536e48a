"""Feedback buttons under each answer (real Dispatcher, real Bolt app over HTTP, fake Slack and model),
and a click logged as `answer.feedback` with the run, the verdict and the memory records it read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from app.slack.bot import registry_caller
from app.slack.feedback import FEEDBACK_ACTION
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate
from tests.app.slack.harness import running_bot
from tests.app.slack.test_e2e import runtime
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention, block_action


def _feedback_elements(blocks: Any) -> list[dict[str, Any]]:
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
    return [
        element
        for block in blocks
        if block.get("type") == "context_actions"
        for element in block["elements"]
        if element.get("type") == "feedback_buttons"
    ]


async def test_an_answer_carries_feedback_buttons_and_a_click_is_logged_with_the_runs_records(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    slack_api.add_conversation("C1", "public")
    store = InProcessMemoryStore()
    fact = MemoryCandidate(
        "fact",
        "Deploys go out on the release train",
        "slack:C1:1.000001",
        keywords=("deploys",),
        origin="public",
    )
    await store.write("org:acme", [fact])
    [record] = await store.list("org:acme", 5)
    fake_anthropic.default_reply = "On the release train."
    dispatcher, registry = runtime(tmp_path, fake_anthropic, memory=True, store=store)
    async with running_bot(slack_api, dispatcher, registry=registry, caller_factory=registry_caller) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> when do deploys go out?")
        await bot.slack.event(as_app_mention(posted))
        await bot.settle()
        [stop] = slack_api.calls_to("chat.stopStream")
        [buttons] = _feedback_elements(stop.args.get("blocks"))
        value = buttons["negative_button"]["value"]
        with capture_logs() as logs:
            click = {"action_id": FEEDBACK_ACTION, "type": "feedback_buttons", "value": value}
            delivery = await bot.slack.interaction(block_action("U1", click, channel="C1"))
            await bot.settle()

    assert delivery.status == 200
    assert value.startswith("negative:run_")
    [feedback] = [entry for entry in logs if entry["event"] == "answer.feedback"]
    assert feedback["run_id"] == value.split(":", 1)[1]
    assert feedback["value"] == "negative"
    assert feedback["memory_record_ids"] == [record.id]
    assert "release train" not in json.dumps(logs, default=str)


async def test_a_click_this_bot_never_offered_is_refused_with_a_warning(slack_api: FakeSlackApi) -> None:
    from tests.app.slack.harness import RecordingDispatcher

    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        with capture_logs() as logs:
            click = {"action_id": FEEDBACK_ACTION, "type": "feedback_buttons", "value": "positive; rm -rf"}
            delivery = await bot.slack.interaction(block_action("U1", click, channel="C1"))

    assert delivery.status == 200
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["slack.feedback_refused"]
    assert not [e for e in logs if e["event"] == "answer.feedback"]


async def test_a_plain_posted_answer_carries_the_buttons_under_its_text(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.refuse("chat.startStream", "not_allowed")  # no streaming: chat.postMessage instead
    fake_anthropic.default_reply = "Posted, not streamed."
    dispatcher, registry = runtime(tmp_path, fake_anthropic, memory=False, store=InProcessMemoryStore())
    async with running_bot(slack_api, dispatcher, registry=registry, caller_factory=registry_caller) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi")
        await bot.slack.event(as_app_mention(posted))
        await bot.settle()

    [post] = slack_api.calls_to("chat.postMessage")
    blocks = json.loads(post.args["blocks"]) if isinstance(post.args["blocks"], str) else post.args["blocks"]
    assert blocks[0] == {"type": "section", "text": {"type": "mrkdwn", "text": "Posted, not streamed."}}
    assert _feedback_elements(blocks)[0]["positive_button"]["value"].startswith("positive:run_")


async def test_a_stream_broken_midway_keeps_the_buttons_in_the_message_that_completes_it(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.fail_next("chat.appendStream", "message_not_in_streaming_state")
    fake_anthropic.default_reply = "\n".join(f"step {n}: " + "y" * 80 for n in range(30))
    dispatcher, registry = runtime(tmp_path, fake_anthropic, memory=False, store=InProcessMemoryStore())
    async with running_bot(slack_api, dispatcher, registry=registry, caller_factory=registry_caller) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> steps")
        await bot.slack.event(as_app_mention(posted))
        await bot.settle()

    [update] = slack_api.calls_to("chat.update")
    sent = update.args.get("blocks")
    blocks: list[dict[str, Any]] = json.loads(sent) if isinstance(sent, str) else sent or []
    assert _feedback_elements(blocks)[0]["negative_button"]["value"].startswith("negative:run_")
    assert blocks[0]["text"]["text"].startswith("step 0: ")
