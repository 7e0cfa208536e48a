"""The Slack adapter over real HTTP: signed Events API requests into the Bolt app, the fake Slack Web API
behind it, and a recording dispatcher in place of the runtime (adapter-level behaviour only)."""

from __future__ import annotations

import asyncio
import json
import re
import time

from app.slack.format import POST_TEXT_LIMIT
from app.slack.messages import WARNING_REPLY
from app.slack.options import SlackOptions
from app.slack.surface import WORKING_REACTION
from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.harness import RecordingDispatcher, RecordingRegistry, running_bot
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlackApi, as_app_mention, signed_headers


async def test_mention_in_public_channel_is_answered_once_in_its_thread(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    # Memory on: the channel's visibility feeds its write gate and read rule.
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> what's new?")
        delivery = await bot.slack.event(as_app_mention(posted))
        await bot.settle()

    assert delivery.status == 200
    [message] = dispatcher.messages
    assert message.text == "what's new?"
    assert message.user_id == "slack:U1"
    assert message.channel_id == "slack:C1"
    assert message.channel_visibility == "public"  # app_mention has no channel_type: conversations.info
    assert message.thread_key == f"slack:C1:{posted['ts']}"
    assert message.surface == "slack"
    assert message.history == ()
    [reply] = slack_api.bot_replies("C1", thread_ts=posted["ts"])
    assert reply.text == "answer to: what's new?"
    assert slack_api.calls_to("chat.startStream")[0].args["recipient_user_id"] == "U1"
    assert slack_api.calls_to("chat.startStream")[0].args["recipient_team_id"] == TEAM_ID
    [status] = slack_api.calls_to("assistant.threads.setStatus")
    assert status.args["status"] == "is thinking…"
    assert status.args["thread_ts"] == posted["ts"]
    assert status.args["loading_messages"]


async def test_the_app_mention_and_message_twins_of_one_message_are_answered_once(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        first = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> one")
        await bot.slack.event(first)  # message.channels first …
        await bot.slack.event(as_app_mention(first))
        second = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> two")
        await bot.slack.event(as_app_mention(second))  # … or app_mention first
        await bot.slack.event(second)
        await bot.settle()

    assert [m.text for m in dispatcher.messages] == ["one", "two"]
    assert len(slack_api.bot_replies("C1", first["ts"])) == 1
    assert len(slack_api.bot_replies("C1", second["ts"])) == 1


async def test_a_retried_delivery_of_the_same_event_never_starts_a_second_run(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher(gate=asyncio.Event())
    async with running_bot(slack_api, dispatcher) as bot:
        event = as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi"))
        first = await bot.slack.event(event, event_id="EvSAME")
        # Slack retries while the first run is still working (it thinks the ack was lost).
        retries = [await bot.slack.event(event, event_id="EvSAME", retry_num=n) for n in (1, 2, 3)]
        assert dispatcher.gate is not None
        dispatcher.gate.set()
        await bot.settle()

    assert first.status == 200
    assert [r.status for r in retries] == [200, 200, 200]
    assert len(dispatcher.messages) == 1
    assert len(slack_api.bot_replies("C1")) == 1


async def test_a_bad_or_stale_signature_is_refused_with_401_and_nothing_runs(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        event = as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi"))
        forged = await bot.slack.event(event, secret="not-the-signing-secret")
        stale = await bot.slack.event(event, timestamp=int(time.time()) - 10 * 60)
        unsigned = await bot.slack.post(json.dumps({"type": "event_callback", "event": event}), {})
        await bot.settle()

    assert (forged.status, stale.status, unsigned.status) == (401, 401, 401)
    assert dispatcher.messages == []
    assert slack_api.calls == []  # not even auth.test: refused before any processing


async def test_url_verification_challenge_is_answered(slack_api: FakeSlackApi) -> None:
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        body = json.dumps({"token": "t", "challenge": "c-123", "type": "url_verification"})
        reply = await bot.slack.post(body, signed_headers(body, content_type="application/json"))
    assert reply.status == 200
    assert "c-123" in reply.body


async def test_a_direct_message_is_answered_without_a_mention_in_the_dm(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("D1", "im")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("D1", "U1", "how do I deploy?")
        await bot.slack.event(posted)
        await bot.settle()

    [message] = dispatcher.messages
    assert message.text == "how do I deploy?"
    assert message.channel_visibility == "dm"
    assert message.channel_id == "slack:D1"
    [reply] = slack_api.bot_replies("D1")
    assert reply.thread_ts == posted["ts"]
    assert reply.text == "answer to: how do I deploy?"
    assert slack_api.calls_to("conversations.info") == []  # channel_type said it already


async def test_a_follow_up_in_a_bot_thread_needs_no_mention_and_carries_the_thread_history(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> which port does it use?")
        await bot.slack.event(as_app_mention(root))
        await bot.settle()
        follow_up = slack_api.post_as_user("C1", "U2", "and in production?", thread_ts=root["ts"])
        await bot.slack.event(follow_up)
        await bot.settle()

    assert [m.text for m in dispatcher.messages] == ["which port does it use?", "and in production?"]
    second = dispatcher.messages[1]
    assert second.thread_key == dispatcher.messages[0].thread_key
    assert second.user_id == "slack:U2"
    assert [(t.role, t.text) for t in second.history] == [
        ("user", "which port does it use?"),
        ("assistant", "answer to: which port does it use?"),
    ]
    assert len(slack_api.bot_replies("C1", root["ts"])) == 2


async def test_a_thread_message_that_addresses_someone_else_is_left_to_them(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> draft a plan")
        await bot.slack.event(as_app_mention(root))
        await bot.settle()
        aside = slack_api.post_as_user("C1", "U1", "<@U2> does this look right to you?", thread_ts=root["ts"])
        await bot.slack.event(aside)
        await bot.settle()

    assert [m.text for m in dispatcher.messages] == ["draft a plan"]


async def test_after_a_restart_a_thread_with_the_bots_messages_still_counts_as_a_bot_thread(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "private")
    root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hello")
    slack_api.post_as_bot("C1", "hello! how can I help?", thread_ts=root["ts"])
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:  # a fresh process: no in-memory thread set
        follow_up = slack_api.post_as_user("C1", "U1", "tell me more", thread_ts=root["ts"])
        await bot.slack.event(follow_up)
        await bot.settle()

    [message] = dispatcher.messages
    assert message.channel_visibility == "private"
    assert [t.role for t in message.history] == ["user", "assistant"]
    assert len(slack_api.calls_to("conversations.replies")) == 1  # fetched once: check + history


async def test_messages_that_do_not_address_the_bot_are_left_alone(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        top = slack_api.post_as_user("C1", "U1", "just chatting")
        await bot.slack.event(top)
        foreign = slack_api.post_as_user("C1", "U2", "a people-only thread", thread_ts=top["ts"])
        await bot.slack.event(foreign)
        await bot.settle()
        again = slack_api.post_as_user("C1", "U1", "still people-only", thread_ts=top["ts"])
        await bot.slack.event(again)
        await bot.settle()

    assert dispatcher.messages == []
    assert slack_api.bot_replies("C1") == []
    # The bot saw the thread start, so it knows without asking Slack that it is not in it.
    assert slack_api.calls_to("conversations.replies") == []


async def test_own_messages_edits_deletions_and_other_bots_are_ignored(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("D1", "im")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        own = {
            "type": "message",
            "channel": "D1",
            "channel_type": "im",
            "user": BOT_USER_ID,
            "text": "my own reply",
            "ts": slack_api.next_ts(),
        }
        edited = {
            "type": "message",
            "subtype": "message_changed",
            "channel": "D1",
            "channel_type": "im",
            "message": {"user": "U1", "text": "edited"},
            "ts": slack_api.next_ts(),
        }
        deleted = {
            "type": "message",
            "subtype": "message_deleted",
            "channel": "D1",
            "channel_type": "im",
            "deleted_ts": "1.0",
            "ts": slack_api.next_ts(),
        }
        other_bot = {
            "type": "message",
            "subtype": "bot_message",
            "channel": "D1",
            "channel_type": "im",
            "bot_id": "B0OTHER",
            "text": "beep",
            "ts": slack_api.next_ts(),
        }
        joined = {
            "type": "message",
            "subtype": "channel_join",
            "channel": "D1",
            "channel_type": "im",
            "user": "U1",
            "text": "joined",
            "ts": slack_api.next_ts(),
        }
        for event in (own, edited, deleted, other_bot, joined):
            assert (await bot.slack.event(event)).status == 200
        await bot.settle()

    assert dispatcher.messages == []
    assert slack_api.bot_replies("D1") == []


async def test_other_bots_are_answered_when_configured(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("D1", "im")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, options=SlackOptions(allow_bots=True)) as bot:
        other_bot = {
            "type": "message",
            "channel": "D1",
            "channel_type": "im",
            "user": "U0OTHERBOT",
            "bot_id": "B0OTHER",
            "text": "status report?",
            "ts": slack_api.next_ts(),
        }
        own = {
            "type": "message",
            "channel": "D1",
            "channel_type": "im",
            "user": BOT_USER_ID,
            "bot_id": "B0BOT",
            "text": "never me",
            "ts": slack_api.next_ts(),
        }
        await bot.slack.event(other_bot)
        await bot.slack.event(own)
        await bot.settle()

    assert [m.text for m in dispatcher.messages] == ["status report?"]


async def test_visibility_comes_from_the_channel_type_of_message_events(slack_api: FakeSlackApi) -> None:
    for channel, kind in (("C1", "public"), ("G1", "private"), ("M1", "mpim")):
        slack_api.add_conversation(channel, kind)
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        for channel in ("C1", "G1", "M1"):
            await bot.slack.event(slack_api.post_as_user(channel, "U1", f"<@{BOT_USER_ID}> hi"))
        await bot.settle()

    assert {m.channel_id: m.channel_visibility for m in dispatcher.messages} == {
        "slack:C1": "public",
        "slack:G1": "private",
        "slack:M1": "mpim",
    }
    assert slack_api.calls_to("conversations.info") == []


async def test_an_event_from_a_channel_shared_with_another_organization_reads_as_external(
    slack_api: FakeSlackApi,
) -> None:
    """The envelope's is_ext_shared_channel, with no conversations.info call: a message event's
    channel_type (`channel`) and an app_mention's missing one alike."""
    slack_api.add_conversation("C7", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await bot.slack.event(slack_api.post_as_user("C7", "U1", f"<@{BOT_USER_ID}> one"), ext_shared=True)
        mention = as_app_mention(slack_api.post_as_user("C7", "U1", f"<@{BOT_USER_ID}> two"))
        await bot.slack.event(mention, ext_shared=True)
        await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["external", "external"]
    assert slack_api.calls_to("conversations.info") == []


async def test_conversations_info_of_a_channel_shared_with_another_organization_reads_as_external(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C7", "public")
    slack_api.ext_shared.add("C7")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await bot.slack.event(as_app_mention(slack_api.post_as_user("C7", "U1", f"<@{BOT_USER_ID}> hi")))
        await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["external"]
    assert len(slack_api.calls_to("conversations.info")) == 1


async def test_a_dm_from_a_member_of_another_organization_reads_as_external(slack_api: FakeSlackApi) -> None:
    """Their own team is not the workspace's: not the asker alone as an insider (who is shown the
    organization's open records), whatever the envelope says of the DM."""
    slack_api.add_conversation("D9", "im")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        partner = {**slack_api.post_as_user("D9", "UPARTNER", "hi"), "user_team": "T0PARTNER"}
        await bot.slack.event(partner)
        await bot.slack.event({**slack_api.post_as_user("D9", "U1", "hi"), "user_team": TEAM_ID})
        await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["external", "dm"]


async def test_conversations_info_is_cached_per_channel(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("G1", "private")
    dispatcher = RecordingDispatcher()
    # Memory on: the channel's visibility feeds its write gate and read rule.
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        for text in ("one", "two", "three"):
            await bot.slack.event(
                as_app_mention(slack_api.post_as_user("G1", "U1", f"<@{BOT_USER_ID}> {text}"))
            )
            await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["private"] * 3
    assert len(slack_api.calls_to("conversations.info")) == 1


async def test_a_message_event_refreshes_a_channels_cached_visibility(slack_api: FakeSlackApi) -> None:
    """REVIEW2 #2: a channel made public after conversations.info said private is read as public at the
    next mention, once any event with its channel_type came by (here one nobody addressed to the bot)."""
    slack_api.add_conversation("G1", "private")
    dispatcher = RecordingDispatcher()
    # Memory on: the channel's visibility feeds its write gate and read rule.
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await bot.slack.event(as_app_mention(slack_api.post_as_user("G1", "U1", f"<@{BOT_USER_ID}> one")))
        await bot.settle()
        slack_api.add_conversation("G1", "public")
        await bot.slack.event(slack_api.post_as_user("G1", "U2", "chatter nobody addressed to the bot"))
        await bot.slack.event(as_app_mention(slack_api.post_as_user("G1", "U1", f"<@{BOT_USER_ID}> two")))
        await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["private", "public"]
    assert len(slack_api.calls_to("conversations.info")) == 1


async def test_slacks_made_private_notice_makes_the_next_mention_private(slack_api: FakeSlackApi) -> None:
    """Public → private: Slack's `channel_convert_to_private` message carries the new channel_type."""
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    # Memory on: the channel's visibility feeds its write gate and read rule.
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await bot.slack.event(as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> one")))
        await bot.settle()
        slack_api.add_conversation("C1", "private")
        notice = slack_api.post_as_user(
            "C1", "U2", "made this channel *private*.", subtype="channel_convert_to_private"
        )
        await bot.slack.event(notice)
        await bot.slack.event(as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> two")))
        await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["public", "private"]


def test_a_channels_looked_up_visibility_is_trusted_for_a_minute_at_most() -> None:
    """Without an event naming the channel's type, a conversion is seen within this window."""
    assert SlackOptions().channel_cache_ttl_seconds <= 60


async def test_several_workspaces_qualify_ids_with_the_team(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, options=SlackOptions(multi_workspace=True)) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi")
        await bot.slack.event(as_app_mention(posted))
        await bot.settle()

    [message] = dispatcher.messages
    assert message.user_id == f"slack:{TEAM_ID}:U1"
    assert message.channel_id == f"slack:{TEAM_ID}:C1"
    assert message.thread_key == f"slack:{TEAM_ID}:C1:{posted['ts']}"


async def test_where_streaming_is_refused_the_answer_is_posted_as_mrkdwn(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.refuse("chat.startStream", "feature_not_enabled")
    dispatcher = RecordingDispatcher(answer=lambda m: "## Steps\n**Run** `make`, see [docs](https://x.dev).")
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> how?")
        await bot.slack.event(posted)
        await bot.settle()

    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text == "*Steps*\n*Run* `make`, see <https://x.dev|docs>."
    assert len(slack_api.calls_to("chat.postMessage")) == 1


async def test_a_posted_answer_with_a_markdown_link_to_channel_notifies_nobody(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.refuse("chat.startStream", "feature_not_enabled")  # the chat.postMessage fallback
    answer = "Read [this](!channel), [this too](!subteam^S0TEAM) and ![it](!here)."
    async with running_bot(slack_api, RecordingDispatcher(answer=lambda m: answer)) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> summarize the file")
        await bot.slack.event(posted)
        await bot.settle()

    [call] = slack_api.calls_to("chat.postMessage")
    assert "<!" not in json.dumps(call.args)


async def test_a_long_answer_is_split_under_slacks_message_limit(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.refuse("chat.startStream")
    paragraphs = [f"Paragraph {n}: " + "word " * 150 for n in range(20)]  # ≈ 15,000 characters
    dispatcher = RecordingDispatcher(answer=lambda m: "\n\n".join(paragraphs))
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> essay please")
        await bot.slack.event(posted)
        await bot.settle()

    replies = slack_api.bot_replies("C1", posted["ts"])
    assert len(replies) >= 4
    assert all(len(r.text) <= POST_TEXT_LIMIT for r in replies)
    joined = "\n\n".join(r.text for r in replies)
    assert all(p.strip() in joined for p in paragraphs)


async def test_a_very_long_answer_streams_as_several_messages(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    lines = [f"line {n} " + "x" * 90 for n in range(300)]  # ≈ 30,000 characters
    dispatcher = RecordingDispatcher(answer=lambda m: "\n".join(lines))
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> everything")
        await bot.slack.event(posted)
        await bot.settle()

    replies = slack_api.bot_replies("C1", posted["ts"])
    assert len(replies) == len(slack_api.calls_to("chat.stopStream")) >= 3
    assert "\n".join(r.text for r in replies) == "\n".join(lines)
    for call in slack_api.calls_to("chat.appendStream"):
        assert sum(len(c["text"]) for c in call.args["chunks"]) <= 12_000


async def test_a_stream_that_breaks_midway_is_completed_with_chat_update(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    answer = "\n".join(f"step {n}: " + "y" * 80 for n in range(30))
    slack_api.fail_next("chat.appendStream", "message_not_in_streaming_state")
    dispatcher = RecordingDispatcher(answer=lambda m: answer)
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> steps")
        await bot.slack.event(posted)
        await bot.settle()

    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text == answer
    assert len(slack_api.calls_to("chat.update")) == 1


async def test_where_the_assistant_status_is_refused_a_reaction_shows_the_work(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.refuse("assistant.threads.setStatus", "not_allowed")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi")
        await bot.slack.event(posted)
        await bot.settle()

    [added] = slack_api.calls_to("reactions.add")
    assert added.args == {"channel": "C1", "timestamp": posted["ts"], "name": WORKING_REACTION}
    [removed] = slack_api.calls_to("reactions.remove")
    assert removed.args == added.args
    assert len(slack_api.bot_replies("C1", posted["ts"])) == 1


async def test_a_failing_run_becomes_a_warning_reply_in_the_thread(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher(error=RuntimeError("model exploded"))
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi")
        await bot.slack.event(posted)
        await bot.settle()

    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text.startswith("⚠️")
    assert WARNING_REPLY.split("(")[0].strip() in reply.text
    assert "exploded" not in reply.text


async def test_slack_rate_limits_are_retried_by_the_client(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.rate_limit_next("chat.stopStream", retry_after=0)
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi")
        await bot.slack.event(posted)
        await bot.settle()

    assert len(slack_api.calls_to("chat.stopStream")) == 2
    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text == "answer to: hi"


async def test_a_bare_mention_gets_a_hint_and_no_run(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}>")
        await bot.slack.event(posted)
        await bot.settle()

    assert dispatcher.messages == []
    [reply] = slack_api.bot_replies("C1", posted["ts"])
    assert reply.text.startswith("👋")


async def test_the_memory_slash_command_goes_to_the_registry_and_answers_ephemerally(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    registry = RecordingRegistry(reply="*your records* (`user:slack:U1`)\n- no active records")
    async with running_bot(slack_api, dispatcher, registry=registry) as bot:
        delivery = await bot.slack.slash(
            text="list deploy --scope me",
            user_id="U1",
            channel_id="C1",
            response_url=slack_api.response_url(),
        )
        await bot.settle()

    assert delivery.status == 200
    assert dispatcher.messages == []
    [(text, caller)] = registry.calls
    assert text == "memory list deploy --scope me"
    assert caller["user_id"] == "slack:U1"
    assert caller["channel_id"] == "slack:C1"
    assert caller["channel_visibility"] == "public"
    assert caller["surface"] == "slack"
    [response] = slack_api.responses
    assert response["response_type"] == "ephemeral"
    assert response["text"] == "_your records_ (`user:slack:U1`)\n• no active records"


async def test_the_slash_command_in_a_dm_the_bot_cannot_see_still_knows_it_is_a_dm(
    slack_api: FakeSlackApi,
) -> None:
    registry = RecordingRegistry()
    async with running_bot(slack_api, RecordingDispatcher(), registry=registry) as bot:
        await bot.slack.slash(
            text="list",
            user_id="U1",
            channel_id="D0OTHER",
            channel_name="directmessage",
            response_url=slack_api.response_url(),
        )
        await bot.settle()

    [(_, caller)] = registry.calls
    assert caller["channel_visibility"] == "dm"


async def test_a_registry_failure_answers_the_slash_command_with_a_warning(slack_api: FakeSlackApi) -> None:
    class Broken:
        async def handle(self, text: str, caller: object) -> None:
            raise RuntimeError("store down")

    slack_api.add_conversation("C1", "public")
    async with running_bot(slack_api, RecordingDispatcher(), registry=Broken()) as bot:
        await bot.slack.slash(
            text="list", user_id="U1", channel_id="C1", response_url=slack_api.response_url()
        )
        await bot.settle()

    [response] = slack_api.responses
    assert response["text"].startswith("⚠️")


async def test_shutdown_waits_for_a_running_answer_and_refuses_new_events(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher(gate=asyncio.Event())
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> long job")
        await bot.slack.event(posted)
        bot.bot.stop_accepting()
        late = await bot.slack.event(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> late"))
        assert await bot.bot.drain(within=0.05) is False  # still running
        assert dispatcher.gate is not None
        dispatcher.gate.set()
        assert await bot.bot.drain(within=5) is True

    assert late.status == 503  # Slack retries it later, against a process that is running
    assert [m.text for m in dispatcher.messages] == ["long job"]
    assert len(slack_api.bot_replies("C1", posted["ts"])) == 1


async def test_a_retried_thread_reply_is_checked_against_the_thread_only_once(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hello")
    slack_api.post_as_bot("C1", "hi!", thread_ts=root["ts"])
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        checking = slack_api.hold("conversations.replies")  # the first check is still in flight …
        follow_up = slack_api.post_as_user("C1", "U1", "more please", thread_ts=root["ts"])
        await bot.slack.event(follow_up, event_id="EvRETRY")
        await bot.slack.event(follow_up, event_id="EvRETRY", retry_num=1)  # … when the retry arrives
        checking.set()
        await bot.settle()

    assert len(dispatcher.messages) == 1
    assert len(slack_api.calls_to("conversations.replies")) == 1  # the retry never got past the event id


async def test_an_answer_pings_those_the_asker_named_and_at_most_three_others(
    slack_api: FakeSlackApi,
) -> None:
    """A planted "mention everyone on the team" list notifies three people, not dozens; the rest are
    named as inert text. The asker and the people they mentioned are always notified."""
    slack_api.add_conversation("C1", "public")
    others = " ".join(f"<@U{n:03d}>" for n in range(1, 31))
    dispatcher = RecordingDispatcher(answer=lambda message: f"<@U1> <@U777> fyi {others}")
    async with running_bot(slack_api, dispatcher) as bot:
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> loop in <@U777> please")
        await bot.slack.event(as_app_mention(posted))
        await bot.settle()

    [reply] = slack_api.bot_replies("C1", thread_ts=posted["ts"])
    pinged = re.findall(r"<@(U[0-9]+)>", reply.text)
    assert pinged == ["U1", "U777", "U001", "U002", "U003"]
    assert "@\u2060U004" in reply.text and "@\u2060U030" in reply.text
