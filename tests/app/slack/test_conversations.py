"""A channel's cached visibility follows Slack's word that it was shared with another organization, or
no longer is, at once: not at the channel's next event or the cache's expiry. Signed events into the
real Bolt app; the fake Slack Web API answers conversations.info."""

from __future__ import annotations

from typing import Any

from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.harness import RecordingDispatcher, RunningBot, running_bot
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention


async def ask(bot: RunningBot, slack_api: FakeSlackApi, channel: str) -> None:
    """An app_mention: it names no channel type, so its visibility is the cache's (or Slack's)."""
    await bot.slack.event(as_app_mention(slack_api.post_as_user(channel, "U1", f"<@{BOT_USER_ID}> hi")))
    await bot.settle()


def unshared(*, still_shared: bool) -> dict[str, Any]:
    """`channel_unshared`: one organization left C1; `is_ext_shared` says whether another is still in."""
    return {
        "type": "channel_unshared",
        "previously_connected_team_id": "T0PARTNER",
        "channel": "C1",
        "is_ext_shared": still_shared,
        "event_ts": "1.2",
    }


async def test_a_channel_shared_after_its_visibility_was_cached_reads_as_external_at_once(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await ask(bot, slack_api, "C1")  # cached: public
        slack_api.ext_shared.add("C1")
        shared = {
            "type": "channel_shared",
            "connected_team_id": "T0PARTNER",
            "channel": "C1",
            "event_ts": "1.2",
        }
        assert (await bot.slack.event(shared)).status == 200
        await ask(bot, slack_api, "C1")

    assert [m.channel_visibility for m in dispatcher.messages] == ["public", "external"]
    assert len(slack_api.calls_to("conversations.info")) == 1  # the second read needed no lookup


async def test_an_accepted_slack_connect_invitation_reads_its_channel_as_external_at_once(
    slack_api: FakeSlackApi,
) -> None:
    """`shared_channel_invite_accepted` carries the channel as an object, not an id."""
    slack_api.add_conversation("C1", "private")
    dispatcher = RecordingDispatcher()
    accepted: dict[str, Any] = {
        "type": "shared_channel_invite_accepted",
        "approval_required": False,
        "invite": {"id": "I028YDERZSQ", "date_created": 1626876000, "date_invalid": 1628085600},
        "channel": {"id": "C1", "is_private": True, "is_im": False, "name": "launch"},
        "teams_in_channel": [{"id": "T0PARTNER", "name": "Partner"}],
        "accepting_user": {"id": "UPARTNER", "team_id": "T0PARTNER"},
        "event_ts": "1626877800.000000",
    }
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await ask(bot, slack_api, "C1")
        assert (await bot.slack.event(accepted)).status == 200
        await ask(bot, slack_api, "C1")

    assert [m.channel_visibility for m in dispatcher.messages] == ["private", "external"]


async def test_a_channel_no_longer_shared_is_asked_about_again_at_once(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.ext_shared.add("C1")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await ask(bot, slack_api, "C1")  # cached: external
        slack_api.ext_shared.discard("C1")
        assert (await bot.slack.event(unshared(still_shared=False))).status == 200
        await ask(bot, slack_api, "C1")

    assert [m.channel_visibility for m in dispatcher.messages] == ["external", "public"]
    assert len(slack_api.calls_to("conversations.info")) == 2


async def test_a_channel_one_of_two_organizations_left_stays_external(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher, memory_store=InProcessMemoryStore()) as bot:
        await ask(bot, slack_api, "C1")
        await bot.slack.event(unshared(still_shared=True))
        await ask(bot, slack_api, "C1")

    assert [m.channel_visibility for m in dispatcher.messages] == ["public", "external"]
