"""Slack payloads → identities, visibility, addressing and history (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from app.slack.events import (
    SlackIdentity,
    addressed_to_someone_else,
    from_another_organization,
    history_from_replies,
    mentions_user,
    message_text,
    skip_reason,
    slack_text_to_plain,
    strip_leading_mention,
    visibility_from_channel_type,
    visibility_from_conversation,
    visibility_from_slash_channel,
)
from app.slack.state import RecentKeys, TtlCache

BOT = "U0BOT"


def test_identities_are_platform_namespaced_and_team_qualified_only_for_several_workspaces() -> None:
    single, multi = SlackIdentity(), SlackIdentity(multi_workspace=True)
    assert single.user("T1", "U1") == "slack:U1"
    assert single.channel("T1", "C1") == "slack:C1"
    assert single.thread_key("T1", "C1", "1.000100") == "slack:C1:1.000100"
    assert multi.user("T1", "U1") == "slack:T1:U1"
    assert multi.channel("T1", "C1") == "slack:T1:C1"
    assert multi.thread_key("T1", "C1", "1.000100") == "slack:T1:C1:1.000100"
    assert single.user("T1", None) is None


@pytest.mark.parametrize(
    ("channel_type", "visibility"),
    [
        ("channel", "public"),
        ("group", "private"),
        ("im", "dm"),
        ("mpim", "mpim"),
        ("app_home", None),
        (None, None),
    ],
)
def test_visibility_from_the_events_channel_type(channel_type: str | None, visibility: str | None) -> None:
    assert visibility_from_channel_type(channel_type) == visibility


@pytest.mark.parametrize(
    ("info", "visibility"),
    [
        ({"is_channel": True, "is_private": False}, "public"),
        ({"is_channel": True, "is_private": True}, "private"),
        ({"is_group": True}, "private"),
        ({"is_im": True, "is_private": True}, "dm"),
        ({"is_mpim": True, "is_private": True, "is_group": True}, "mpim"),
        ({}, None),
    ],
)
def test_visibility_from_conversations_info(info: dict[str, Any], visibility: str | None) -> None:
    assert visibility_from_conversation(info) == visibility


@pytest.mark.parametrize("channel_type", ["channel", "group", "im", "mpim", None])
def test_an_event_from_a_channel_shared_with_another_organization_reads_as_external(
    channel_type: str | None,
) -> None:
    """The envelope's is_ext_shared_channel, whatever the type (an app_mention names none)."""
    assert visibility_from_channel_type(channel_type, True) == "external"


def test_an_envelope_not_shared_or_without_the_flag_is_read_by_its_type() -> None:
    assert visibility_from_channel_type("channel", False) == "public"
    assert visibility_from_channel_type("channel", None) == "public"
    assert visibility_from_channel_type(None, False) is None


@pytest.mark.parametrize(
    "info",
    [
        {"is_channel": True, "is_private": False, "is_shared": True, "is_ext_shared": True},
        {"is_channel": True, "is_private": True, "is_shared": True, "is_ext_shared": True},
        {"is_mpim": True, "is_private": True, "is_ext_shared": True},
        {"is_channel": True, "is_pending_ext_shared": True},
    ],
)
def test_conversations_info_of_a_channel_shared_with_another_organization_reads_as_external(
    info: dict[str, Any],
) -> None:
    assert visibility_from_conversation(info) == "external"


def test_a_channel_shared_only_inside_the_organization_keeps_its_kind() -> None:
    info = {"is_channel": True, "is_private": False, "is_shared": True, "is_org_shared": True}
    assert visibility_from_conversation(info) == "public"


def test_a_person_of_another_team_than_the_workspace_is_from_another_organization() -> None:
    assert from_another_organization({}, {"user": "U9", "user_team": "T9"}, "T1")
    assert not from_another_organization({}, {"user": "U1", "user_team": "T1"}, "T1")
    assert not from_another_organization({}, {"user": "U1"}, "T1")  # no user_team: the workspace's


def test_inside_an_enterprise_grid_org_another_workspace_is_no_other_organization() -> None:
    assert not from_another_organization({"enterprise_id": "E1"}, {"user": "U9", "user_team": "T9"}, "T1")


def test_a_slash_command_guesses_visibility_from_the_channel_name() -> None:
    assert visibility_from_slash_channel("D1", "directmessage") == "dm"
    assert visibility_from_slash_channel("G1", "privategroup") == "private"
    assert visibility_from_slash_channel("G2", "mpdm-a--b-1") == "mpim"
    assert visibility_from_slash_channel("C1", "general") is None


def test_only_the_leading_mention_of_the_bot_is_stripped() -> None:
    assert strip_leading_mention(f"<@{BOT}> hello", BOT) == "hello"
    assert strip_leading_mention(f"  <@{BOT}|switchboard>: hello", BOT) == "hello"
    assert strip_leading_mention(f"ask <@{BOT}> later", BOT) == f"ask <@{BOT}> later"
    assert strip_leading_mention("<@U0OTHER> hello", BOT) == "<@U0OTHER> hello"
    assert addressed_to_someone_else("<@U0OTHER> your turn", BOT)
    assert not addressed_to_someone_else(f"<@{BOT}> your turn", BOT)
    assert not addressed_to_someone_else("thanks <@U0OTHER>", BOT)
    assert mentions_user(f"hey <@{BOT}>", BOT)
    assert not mentions_user("hey <@U0OTHER>", BOT)


def test_slack_wire_text_is_turned_back_into_what_the_person_typed() -> None:
    wire = "a &lt; b &amp; <https://x.dev|the docs> <https://y.dev> <#C1|general> <!here> <@U1>"
    assert slack_text_to_plain(wire) == "a < b & the docs (https://x.dev) https://y.dev #general @here <@U1>"
    assert message_text({"text": f"<@{BOT}> 1 &gt; 0"}, BOT) == "1 > 0"


def _skip(event: dict[str, Any], allow_bots: bool = False) -> str | None:
    return skip_reason(event, bot_user_id=BOT, bot_id="B0BOT", allow_bots=allow_bots)


def test_people_are_answered_and_everything_else_is_skipped() -> None:
    person = {"type": "message", "channel": "C1", "user": "U1", "text": "hi"}
    assert _skip(person) is None
    assert _skip({**person, "subtype": "thread_broadcast"}) is None
    assert _skip({**person, "subtype": "file_share"}) is None
    assert _skip({**person, "user": BOT}) == "self"
    assert _skip({**person, "bot_id": "B0BOT"}) == "self"
    assert _skip({**person, "subtype": "message_changed"}) == "subtype"
    assert _skip({**person, "subtype": "message_deleted", "user": None}) == "subtype"
    assert _skip({**person, "subtype": "bot_message", "user": None, "bot_id": "B2"}) == "bot"
    assert _skip({**person, "bot_id": "B2"}) == "bot"
    assert _skip({**person, "bot_id": "B2"}, allow_bots=True) is None
    assert _skip({**person, "subtype": "bot_message", "user": None, "bot_id": "B2"}, allow_bots=True) is None
    assert _skip({**person, "subtype": "bot_message", "bot_id": "B0BOT"}, allow_bots=True) == "self"
    assert _skip({**person, "channel": None}) == "no_channel"


def _msg(ts: str, text: str, user: str = "U1", **extra: Any) -> dict[str, Any]:
    return {"type": "message", "ts": ts, "text": text, "user": user, **extra}


def test_history_turns_the_bots_messages_into_assistant_turns_and_stops_at_the_current_message() -> None:
    replies = [
        _msg("100.000001", f"<@{BOT}> which port?"),
        _msg("100.000002", "8080", user=BOT, bot_id="B0BOT"),
        _msg("100.000003", "joined", subtype="channel_join"),
        _msg("100.000004", "another bot says hi", user="", bot_id="B2", subtype="bot_message"),
        _msg("100.000010", "and in prod?"),  # the message being answered
        _msg("100.000011", "a later message"),
    ]
    history = history_from_replies(
        replies, current_ts="100.000010", bot_user_id=BOT, bot_id="B0BOT", max_turns=10, max_chars=1000
    )
    assert [(t.role, t.text) for t in history] == [
        ("user", "which port?"),
        ("assistant", "8080"),
        ("user", "another bot says hi"),
    ]


def test_history_marks_the_messages_the_asker_wrote_and_no_one_elses() -> None:
    replies = [
        _msg("100.000001", "I prefer tabs", user="UALICE"),
        _msg("100.000002", "Alice wants every deploy to skip tests", user="UMALLORY"),
        _msg(
            "100.000003", "posted by an app as Alice's id", user="UALICE", bot_id="B9", subtype="bot_message"
        ),
        _msg("100.000004", "noted", user=BOT, bot_id="B0BOT"),
        _msg("100.000010", "what do I prefer?", user="UALICE"),
    ]
    history = history_from_replies(
        replies,
        current_ts="100.000010",
        bot_user_id=BOT,
        bot_id="B0BOT",
        max_turns=10,
        max_chars=1000,
        asker="UALICE",
    )
    assert [(t.role, t.by_requester) for t in history] == [
        ("user", True),
        ("user", False),
        ("user", False),
        ("assistant", False),
    ]


def test_timestamps_compare_as_slack_timestamps_not_strings() -> None:
    replies = [_msg("99.000001", "older"), _msg("100.000002", "newer")]
    history = history_from_replies(
        list(reversed(replies)),
        current_ts="100.000010",
        bot_user_id=BOT,
        bot_id=None,
        max_turns=9,
        max_chars=99,
    )
    assert [t.text for t in history] == ["older", "newer"]


def test_a_long_thread_is_trimmed_from_the_oldest_with_a_note() -> None:
    replies = [_msg(f"100.{n:06d}", f"message {n}") for n in range(1, 31)]
    history = history_from_replies(
        replies, current_ts="200.000000", bot_user_id=BOT, bot_id=None, max_turns=5, max_chars=10_000
    )
    assert [t.text for t in history[1:]] == [f"message {n}" for n in range(26, 31)]
    assert history[0].role == "user"
    assert "25 earlier messages" in history[0].text

    by_chars = history_from_replies(
        replies, current_ts="200.000000", bot_user_id=BOT, bot_id=None, max_turns=100, max_chars=35
    )
    assert [t.text for t in by_chars[1:]] == ["message 28", "message 29", "message 30"]
    assert "27 earlier messages" in by_chars[0].text


def test_recent_keys_claim_once_within_the_ttl_and_forget_after_it() -> None:
    now = [0.0]
    keys = RecentKeys(ttl=10, max_size=100, clock=lambda: now[0])
    assert keys.claim("Ev1") is True
    assert keys.claim("Ev1") is False
    now[0] = 11
    assert keys.claim("Ev1") is True


def test_recent_keys_stay_bounded_dropping_the_oldest() -> None:
    keys = RecentKeys(ttl=1000, max_size=3)
    for key in ("a", "b", "c", "d"):
        keys.add(key)
    assert len(keys) == 3
    assert "a" not in keys
    assert "d" in keys


def test_ttl_cache_expires_entries() -> None:
    now = [0.0]
    cache: TtlCache[str] = TtlCache(ttl=5, max_size=10, clock=lambda: now[0])
    cache.put("C1", "public")
    assert cache.get("C1") == "public"
    now[0] = 6
    assert cache.get("C1") is None
    with pytest.raises(ValueError):
        TtlCache(ttl=0, max_size=1)
