"""Guests of the workspace and members of another organization are read as outsiders: their messages
read as `external` (like a Slack Connect channel's), in a channel and in a DM with the bot alike.
Signed events into the real Bolt app; the fake Slack Web API answers `users.info`."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from app.slack.bot import make_web_client
from app.slack.options import SlackOptions
from app.slack.people import People
from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention


def _user_change(user: str, team: str) -> dict[str, object]:
    """The `user_change` event Slack sends when a member's data changes (a guest made a member)."""
    person = {"id": user, "team_id": team, "is_restricted": False, "is_ultra_restricted": False}
    return {"type": "user_change", "user": person, "cache_ts": 1, "event_ts": "1.2"}


@pytest.mark.parametrize("guest", ["multi", "single"])
async def test_a_guest_asking_in_a_public_channel_reads_as_external(
    slack_api: FakeSlackApi, guest: str
) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.guests["UGUEST"] = guest
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await bot.slack.event(slack_api.post_as_user("C1", "UGUEST", f"<@{BOT_USER_ID}> hi"))
        await bot.slack.event(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi"))
        await bot.settle()

    assert [(m.user_id, m.channel_visibility) for m in dispatcher.messages] == [
        ("slack:UGUEST", "external"),
        ("slack:U1", "public"),
    ]


async def test_a_dm_with_a_guest_reads_as_external(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("D9", "im")
    slack_api.guests["UGUEST"] = "single"
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await bot.slack.event(slack_api.post_as_user("D9", "UGUEST", "what do you know?"))
        await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["external"]


async def test_a_member_of_another_team_named_only_by_users_info_reads_as_external(
    slack_api: FakeSlackApi,
) -> None:
    """An app_mention names no `user_team`: users.info's `team_id` is the same rule's word."""
    slack_api.add_conversation("C1", "public")
    slack_api.user_teams["UPARTNER"] = "T0PARTNER"
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await bot.slack.event(
            as_app_mention(slack_api.post_as_user("C1", "UPARTNER", f"<@{BOT_USER_ID}> hi"))
        )
        await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["external"]


async def test_users_info_is_asked_once_per_person_while_its_answer_is_fresh(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        for text in ("one", "two", "three"):
            await bot.slack.event(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> {text}"))
            await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["public"] * 3
    assert [call.args["user"] for call in slack_api.calls_to("users.info")] == ["U1"]


async def test_a_person_users_info_cannot_tell_about_reads_as_external(slack_api: FakeSlackApi) -> None:
    """Fail closed: an unknown person is shown less, never more, and the warning names no text."""
    slack_api.add_conversation("C1", "public")
    slack_api.refuse("users.info", "missing_scope")
    dispatcher = RecordingDispatcher()
    with capture_logs() as logs:
        async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
            await bot.slack.event(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> secret words"))
            await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["external"]
    [failed] = [entry for entry in logs if entry["event"] == "slack.user_info_failed"]
    assert failed["user"] == "U1" and "secret" not in str(failed)


async def test_user_change_makes_the_next_message_ask_users_info_again(slack_api: FakeSlackApi) -> None:
    """A guest made a full member reads as the channel at their next message, not minutes later."""
    slack_api.add_conversation("C1", "public")
    slack_api.guests["U1"] = "multi"
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await bot.slack.event(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> one"))
        await bot.settle()
        del slack_api.guests["U1"]
        await bot.slack.event(_user_change("U1", slack_api.team_id))
        await bot.slack.event(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> two"))
        await bot.settle()

    assert [m.channel_visibility for m in dispatcher.messages] == ["external", "public"]
    assert len(slack_api.calls_to("users.info")) == 2


async def test_with_memory_off_nobody_is_looked_up(slack_api: FakeSlackApi) -> None:
    """The visibility feeds only memory's write gate and read rule: no users.info without memory."""
    slack_api.add_conversation("C1", "public")
    slack_api.guests["UGUEST"] = "multi"
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, options=SlackOptions()) as bot:
        await bot.slack.event(slack_api.post_as_user("C1", "UGUEST", f"<@{BOT_USER_ID}> hi"))
        await bot.settle()

    assert len(dispatcher.messages) == 1
    assert slack_api.calls_to("users.info") == []


async def test_a_person_is_read_per_workspace_one_app_serves(slack_api: FakeSlackApi) -> None:
    """A member of T0HOME writing through another workspace the app serves is another organization's
    member there: what one workspace's users.info said is never another's answer."""
    slack_api.user_teams["U1"] = "T0HOME"
    people = People(make_web_client(slack_api.token, slack_api.base_url), ttl_seconds=600)

    assert await people.outsider({}, {}, "U1", "T0HOME") is False
    assert await people.outsider({}, {}, "U1", "T0ELSEWHERE") is True
    assert len(slack_api.calls_to("users.info")) == 2


async def test_a_failed_lookup_reads_as_an_outsider_only_until_it_is_asked_again(
    slack_api: FakeSlackApi,
) -> None:
    """A member is not read as an outsider for the whole cache time over one error or rate limit."""
    people = People(
        make_web_client(slack_api.token, slack_api.base_url), ttl_seconds=600, failure_ttl_seconds=0.2
    )
    slack_api.refuse("users.info", "ratelimited")
    assert await people.outsider({}, {}, "U1", slack_api.team_id) is True
    assert await people.outsider({}, {}, "U1", slack_api.team_id) is True  # not asked again at once
    del slack_api.refused["users.info"]
    await asyncio.sleep(0.25)
    assert await people.outsider({}, {}, "U1", slack_api.team_id) is False
    assert len(slack_api.calls_to("users.info")) == 2
