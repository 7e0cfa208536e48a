"""With memory off the bot makes no Slack call it did not make before memory existed: the channel's
visibility (which only memory's write gate and read rule need) comes from the events alone, never
from `conversations.info`. With memory on, a mention (whose event has no channel type) still asks."""

from __future__ import annotations

from pathlib import Path

from app.slack.bot import registry_caller
from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.harness import running_bot
from tests.app.slack.test_e2e import full_runtime
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention

# What answering a mention, a thread follow-up and a DM calls without memory (threads, replies, status).
WITHOUT_MEMORY = {
    "auth.test",
    "conversations.replies",
    "chat.postMessage",
    "chat.update",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "assistant.threads.setStatus",
    "assistant.threads.setTitle",
    "reactions.add",
    "reactions.remove",
}


async def _converse(slack_api: FakeSlackApi, tmp_path: Path, fake: FakeModelServer, *, memory: bool) -> None:
    for channel, kind in (("C1", "public"), ("G1", "private"), ("D1", "im")):
        slack_api.add_conversation(channel, kind)
    fake.default_reply = "An answer."
    store = InProcessMemoryStore()
    built, commands = full_runtime(tmp_path, fake, memory=memory, store=store)
    try:
        async with running_bot(
            slack_api,
            built.dispatcher,
            registry=commands,
            caller_factory=registry_caller,
            memory_store=store if memory else None,  # as `switchboard serve` passes it
        ) as bot:
            for channel in ("C1", "G1"):
                root = slack_api.post_as_user(channel, "U1", f"<@{BOT_USER_ID}> how do we deploy?")
                await bot.slack.event(as_app_mention(root))
                await bot.settle()
                follow_up = slack_api.post_as_user(channel, "U1", "and roll back?", thread_ts=root["ts"])
                await bot.slack.event(follow_up)
                await bot.settle()
            await bot.slack.event(slack_api.post_as_user("D1", "U1", "what is on call today?"))
            await bot.settle()
    finally:
        await built.aclose()
    assert len(slack_api.bot_replies("C1")) == len(slack_api.bot_replies("G1")) == 2


async def test_with_memory_off_no_mention_asks_slack_for_the_channels_visibility(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer
) -> None:
    await _converse(slack_api, tmp_path, fake_anthropic, memory=False)
    called = {call.method for call in slack_api.calls}
    assert "conversations.info" not in called
    assert called <= WITHOUT_MEMORY, called - WITHOUT_MEMORY


async def test_with_memory_on_a_mention_asks_once_per_channel_for_its_write_gate(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer
) -> None:
    await _converse(slack_api, tmp_path, fake_anthropic, memory=True)
    asked = sorted(call.args["channel"] for call in slack_api.calls_to("conversations.info"))
    assert asked == ["C1", "G1"]
