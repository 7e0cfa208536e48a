"""Thread history without hammering `conversations.replies`: the bounded cache of what the bot saw,
alone and through the Bolt app over real HTTP against the fake Slack Web API."""

from __future__ import annotations

from app.slack.thread_cache import ThreadCache
from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention

KEY = "slack:C1:100.000001"


def _message(ts: str, text: str, thread_ts: str | None = None, **extra: str) -> dict[str, str]:
    message = {"type": "message", "channel": "C1", "user": "U1", "ts": ts, "text": text, **extra}
    if thread_ts:
        message["thread_ts"] = thread_ts
    return message


def test_a_thread_whose_root_was_seen_is_whole_and_one_seen_from_the_middle_is_a_gap() -> None:
    cache = ThreadCache()
    cache.observe(KEY, _message("100.000001", "root"))
    cache.observe(KEY, _message("100.000002", "reply", thread_ts="100.000001"))
    cache.observe("slack:C1:200.000001", _message("200.000005", "late", thread_ts="200.000001"))

    assert [m["text"] for m in cache.messages(KEY) or []] == ["root", "reply"]
    assert cache.messages("slack:C1:200.000001") is None
    assert cache.messages("slack:C1:300.000001") is None


def test_an_edit_or_deletion_sends_the_thread_back_to_slack() -> None:
    cache = ThreadCache()
    cache.observe(KEY, _message("100.000001", "root"))
    cache.observe(KEY, {"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "100.000009"})
    assert cache.messages(KEY) is None


def test_the_cache_is_bounded_in_threads_and_in_messages_per_thread() -> None:
    cache = ThreadCache(max_threads=2, max_messages=3)
    for n in range(3):
        cache.observe(f"slack:C1:{n}.000001", _message(f"{n}.000001", "root"))
    assert len(cache) == 2
    cache.seed(KEY, [_message(f"100.00000{n}", f"m{n}", thread_ts="100.000001") for n in range(1, 4)])
    assert cache.messages(KEY) is not None
    cache.observe(KEY, _message("100.000009", "one too many", thread_ts="100.000001"))
    assert cache.messages(KEY) is None  # the start was dropped: fetch again


def test_the_bots_own_reply_keeps_its_posted_text_over_a_thinner_event() -> None:
    cache = ThreadCache()
    cache.observe(KEY, _message("100.000001", "root"))
    cache.record_reply(KEY, {"ts": "100.000002", "user": BOT_USER_ID, "text": "the full answer"})
    cache.observe(KEY, {"type": "message", "user": BOT_USER_ID, "ts": "100.000002", "text": ""})
    assert [m["text"] for m in cache.messages(KEY) or []] == ["root", "the full answer"]


async def test_a_conversation_in_one_thread_never_fetches_replies(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> how do we deploy?")
        await bot.slack.event(root)
        await bot.slack.event(as_app_mention(root))
        await bot.settle()
        for text in ("and on fridays?", "thanks"):
            follow_up = slack_api.post_as_user("C1", "U1", text, thread_ts=root["ts"])
            await bot.slack.event(follow_up)
            await bot.settle()

    assert slack_api.calls_to("conversations.replies") == []
    last = dispatcher.messages[-1]
    assert [(t.role, t.text) for t in last.history] == [
        ("user", "how do we deploy?"),
        ("assistant", "answer to: how do we deploy?"),
        ("user", "and on fridays?"),
        ("assistant", "answer to: and on fridays?"),
    ]


async def test_after_a_restart_a_thread_is_fetched_once_and_then_kept(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> how do we deploy?")
    slack_api.post_as_bot("C1", "With the release train.", thread_ts=root["ts"])  # before the restart
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        for text in ("which train?", "ok"):
            follow_up = slack_api.post_as_user("C1", "U1", text, thread_ts=root["ts"])
            await bot.slack.event(follow_up)
            await bot.settle()

    assert len(slack_api.calls_to("conversations.replies")) == 1
    assert [m.text for m in dispatcher.messages] == ["which train?", "ok"]
    assert ("assistant", "With the release train.") in [
        (t.role, t.text) for t in dispatcher.messages[-1].history
    ]


async def test_a_rate_limited_fetch_is_retried_after_retry_after(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    root = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi")
    slack_api.post_as_bot("C1", "Hello.", thread_ts=root["ts"])
    slack_api.rate_limit_next("conversations.replies", retry_after=1)
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        follow_up = slack_api.post_as_user("C1", "U1", "still there?", thread_ts=root["ts"])
        await bot.slack.event(follow_up)
        await bot.settle()

    assert len(slack_api.calls_to("conversations.replies")) == 2  # the 429, then the retry
    [message] = dispatcher.messages
    assert ("assistant", "Hello.") in [(t.role, t.text) for t in message.history]
