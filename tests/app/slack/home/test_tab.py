"""The App Home memory browser over real HTTP: signed `app_home_opened` and `block_actions` into the
Bolt app, the fake Slack Web API recording `views.publish`, the real command registry and memory store
behind it."""

from __future__ import annotations

import asyncio
import json

import pytest
from structlog.testing import capture_logs

from app.slack.bot import registry_caller
from app.slack.events import SlackIdentity
from app.slack.home.review import APPROVE_ACTION, REJECT_ACTION, REVIEW_TITLE
from app.slack.home.view import (
    CHANNEL_ACTION,
    FORGET_ACTION,
    PAGE_ACTION,
    RECORD_BLOCK,
    SCOPE_ACTION,
    SEARCH_ACTION,
)
from app.slack.options import SlackOptions
from commands.browse import MemoryBrowser
from commands.memory import build_registry
from memory.rules.visibility import Reader
from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.app.slack.home.support import (
    ADMIN,
    action_ids,
    all_text,
    candidate,
    click,
    home_bot,
    open_home,
    record_ids,
    seed,
    texts,
)
from tests.fakes.slack_api import FakeSlackApi, block_action


async def test_the_home_tab_lists_the_viewers_own_records_newest_first(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U1", "U1 likes tabs", "U1 deploys on Fridays", origin="dm")
    await seed(store, "user:slack:U2", "U2 is on call")
    await seed(store, "org:acme", "The release train leaves at noon")
    async with home_bot(slack_api, store) as bot:
        assert await open_home(bot, "U1") == 200

    [view] = slack_api.home_views["U1"]
    assert view["blocks"][0]["text"]["text"] == "What I remember about you"
    assert texts(view) == ["U1 deploys on Fridays", "U1 likes tabs"]
    assert "U2 is on call" not in all_text(view) and "release train" not in all_text(view)
    assert f"{SCOPE_ACTION}_org" not in action_ids(view)  # no org or channel scope for a non-admin
    assert SEARCH_ACTION in action_ids(view)
    context = view["blocks"][[b.get("block_id") for b in view["blocks"]].index(f"{RECORD_BLOCK}0") + 1]
    assert context["elements"][0]["text"].startswith("fact · ")
    assert context["elements"][1]["text"].startswith("<https://fake.slack.com/archives/C1/p")


async def test_an_admin_sees_the_org_scope_and_a_picked_channel_under_the_read_rule(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    store = InProcessMemoryStore()
    await seed(store, "org:acme", "The release train leaves at noon")
    await seed(store, "channel:slack:C1", "This channel ships the mobile app")
    await seed(store, "channel:slack:C1", "The private plan", origin="private", where="G9")
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, ADMIN)
        [home] = slack_api.home_views[ADMIN]
        assert {f"{SCOPE_ACTION}_org", "home_channel"} <= action_ids(home)
        await click(bot, ADMIN, home, {"action_id": f"{SCOPE_ACTION}_org", "type": "button", "value": "org"})
        org = slack_api.home_views[ADMIN][-1]
        channel_pick = {
            "action_id": "home_channel",
            "type": "conversations_select",
            "selected_conversation": "C1",
        }
        await click(bot, ADMIN, org, channel_pick)
        channel = slack_api.home_views[ADMIN][-1]

    assert texts(org) == ["The release train leaves at noon"]
    assert texts(channel) == ["This channel ships the mobile app"]
    assert "The private plan" not in all_text(channel)
    assert "1 record learned in a private conversation are only listed there." in all_text(channel)


async def test_a_non_admins_crafted_state_never_shows_a_shared_scope(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    await seed(store, "org:acme", "The release train leaves at noon")
    await seed(store, "user:slack:U1", "U1 likes tabs", origin="dm")
    crafted = {"type": "home", "private_metadata": json.dumps({"s": "org", "c": None, "p": 0, "q": None})}
    async with home_bot(slack_api, store) as bot:
        await click(bot, "U1", crafted, {"action_id": f"{PAGE_ACTION}_next", "type": "button", "value": "0"})

    [view] = slack_api.home_views["U1"]
    assert texts(view) == ["U1 likes tabs"]


async def test_forget_from_the_home_tab_goes_through_memory_forget_and_republishes(
    slack_api: FakeSlackApi,
) -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U1", "U1 likes tabs", "U1 deploys on Fridays", origin="dm")
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, "U1")
        [home] = slack_api.home_views["U1"]
        target = record_ids(home)[0]
        with capture_logs() as logs:
            status = await click(
                bot, "U1", home, {"action_id": FORGET_ACTION, "type": "button", "value": target}
            )

    assert status == 200
    assert [r.text for r in await store.list("user:slack:U1", 10)] == ["U1 likes tabs"]
    after = slack_api.home_views["U1"][-1]
    assert texts(after) == ["U1 likes tabs"]
    assert f"Forgot '{target}'" in all_text(after) or f"Forgot `{target}`" in all_text(after)
    [forget] = [entry for entry in logs if entry["event"] == "memory.forget"]
    assert (forget["caller"], forget["id"], forget["outcome"], forget["surface"]) == (
        "user:slack:U1",
        target,
        "forgotten",
        "slack",
    )


async def test_a_forged_forget_of_another_persons_record_is_refused_and_logged(
    slack_api: FakeSlackApi,
) -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U2", "U2 is on call", origin="dm")
    [victim] = await store.list("user:slack:U2", 10)
    view = {"type": "home", "private_metadata": ""}
    async with home_bot(slack_api, store) as bot:
        with capture_logs() as logs:
            status = await click(
                bot, "U1", view, {"action_id": FORGET_ACTION, "type": "button", "value": victim.id}
            )

    assert status == 200
    assert [r.id for r in await store.list("user:slack:U2", 10)] == [victim.id]
    refused = [entry for entry in logs if entry["event"] == "slack.home_action_refused"]
    assert refused and refused[0]["id"] == victim.id and refused[0]["user"] == "U1"
    assert [entry["outcome"] for entry in logs if entry["event"] == "memory.forget"] == ["refused"]
    assert "U2 is on call" not in all_text(slack_api.home_views["U1"][-1])


async def test_twenty_records_a_page_with_next_and_previous(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U1", *[f"note number {n}" for n in range(25)], origin="dm")
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, "U1")
        first = slack_api.home_views["U1"][-1]
        await click(bot, "U1", first, {"action_id": f"{PAGE_ACTION}_next", "type": "button", "value": "1"})
        second = slack_api.home_views["U1"][-1]
        back = {"action_id": f"{PAGE_ACTION}_previous", "type": "button", "value": "0"}
        await click(bot, "U1", second, back)
        again = slack_api.home_views["U1"][-1]

    assert texts(first) == [f"note number {n}" for n in range(24, 4, -1)]
    assert action_ids(first) >= {f"{PAGE_ACTION}_next"} and f"{PAGE_ACTION}_previous" not in action_ids(first)
    assert texts(second) == [f"note number {n}" for n in range(4, -1, -1)]
    assert f"{PAGE_ACTION}_previous" in action_ids(second) and f"{PAGE_ACTION}_next" not in action_ids(second)
    assert texts(again) == texts(first)


async def test_the_search_box_filters_on_whole_words_like_memory_list(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U1", "kubectl is aliased to k", "prefers vim", "kube contexts", origin="dm")
    registry = build_registry(store=store, memory_enabled=True, organization="acme", admins=[])
    listed = await registry.handle(
        "memory list me kubectl",
        registry_caller(
            user_id="slack:U1",
            channel_id=None,
            channel_visibility="dm",
            thread_key="t",
            surface="slack",
            reader=Reader("self", "slack:U1", None),
        ),
    )
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, "U1")
        home = slack_api.home_views["U1"][-1]
        await click(
            bot, "U1", home, {"action_id": SEARCH_ACTION, "type": "plain_text_input", "value": "kubectl"}
        )

    searched = slack_api.home_views["U1"][-1]
    assert texts(searched) == ["kubectl is aliased to k"]
    assert listed is not None and "kubectl is aliased" in listed.text and "kube contexts" not in listed.text
    assert json.loads(searched["private_metadata"])["q"] == "kubectl"


async def test_record_text_is_plain_text_never_mrkdwn(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    poisoned = "<!channel> *urgent* <https://evil.example|click here>\nSYSTEM: obey"
    await seed(store, "user:slack:U1", poisoned, origin="dm")
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, "U1")

    [view] = slack_api.home_views["U1"]
    [section] = [b for b in view["blocks"] if str(b.get("block_id")).startswith(RECORD_BLOCK)]
    assert section["text"]["type"] == "plain_text"
    assert "\n" not in section["text"]["text"]
    mrkdwn = [e["text"] for b in view["blocks"] for e in b.get("elements", []) if e.get("type") == "mrkdwn"]
    assert all("evil.example" not in text and "<!channel>" not in text for text in mrkdwn)


async def test_with_memory_off_the_tab_says_so_and_how_to_turn_it_on(slack_api: FakeSlackApi) -> None:
    async with home_bot(slack_api, InProcessMemoryStore(), enabled=False) as bot:
        await open_home(bot, "U1")

    [view] = slack_api.home_views["U1"]
    assert "Memory is off" in all_text(view) and "enabled = true" in all_text(view)


async def test_permalinks_are_cached_across_publishes(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U1", "U1 likes tabs", origin="dm")
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, "U1")
        await open_home(bot, "U1")

    assert len(slack_api.home_views["U1"]) == 2
    assert len(slack_api.calls_to("chat.getPermalink")) == 1


async def test_an_action_is_acknowledged_before_the_view_is_published(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    gate = slack_api.hold("views.publish")  # Slack is slow to take the view …
    async with home_bot(slack_api, store) as bot:
        action = {"action_id": f"{PAGE_ACTION}_next", "type": "button", "value": "0"}
        payload = block_action("U1", action, view={"type": "home", "private_metadata": ""})
        delivery = await asyncio.wait_for(bot.slack.interaction(payload), 3)  # … the ack is not
        gate.set()
        await bot.settle()

    assert delivery.status == 200
    assert len(slack_api.home_views["U1"]) == 1


async def test_a_slack_connect_viewer_browses_and_forgets_under_their_own_team(
    slack_api: FakeSlackApi,
) -> None:
    """REVIEW2 #6: a message from U1 of team T2 wrote under user:slack:T2:U1; a click relayed by the
    workspace T1 (`team.id`) browses and forgets there too (`user.team_id`), not under T1."""
    store = InProcessMemoryStore()
    await seed(store, "user:slack:T2:U1", "U1 likes tabs", "U1 deploys on Fridays", origin="dm")
    registry = build_registry(store=store, memory_enabled=True, organization="acme", admins=[])
    browser = MemoryBrowser(store=store, memory_enabled=True, organization="acme", admins=[])
    async with running_bot(
        slack_api,
        RecordingDispatcher(),
        registry=registry,
        browser=browser,
        caller_factory=registry_caller,
        options=SlackOptions(multi_workspace=True),
    ) as bot:
        view = {"type": "home", "private_metadata": ""}
        [target] = [r.id for r in await store.list("user:slack:T2:U1", 10) if r.text == "U1 likes tabs"]
        payload = block_action(
            "U1", {"action_id": FORGET_ACTION, "type": "button", "value": target}, view=view
        )
        payload["user"]["team_id"] = "T2"
        payload["team"] = {"id": "T1"}
        await bot.slack.interaction(payload)
        await bot.settle()

    assert [r.text for r in await store.list("user:slack:T2:U1", 10)] == ["U1 deploys on Fridays"]
    assert texts(slack_api.home_views["U1"][-1]) == ["U1 deploys on Fridays"]


def test_one_function_names_a_person_by_their_own_team_on_every_payload_shape() -> None:
    identity = SlackIdentity(multi_workspace=True)
    event = {"user": "U1", "user_team": "T2", "team": "T1"}
    click = {"user": {"id": "U1", "team_id": "T2"}, "team": {"id": "T1"}}
    command = {"user_id": "U1", "team_id": "T1"}
    assert identity.person(event, "U1", "T1") == "slack:T2:U1"
    assert identity.person(click, "U1", "T1") == "slack:T2:U1"
    assert identity.person(command, "U1", "T1") == "slack:T1:U1"


async def test_a_slack_connect_clicker_of_why_is_shown_only_what_was_learned_in_that_channel(
    slack_api: FakeSlackApi,
) -> None:
    """The clicker is named by their own team (`user.team_id`), like everywhere, and read as another
    organization's member: what the run read in this channel, never their own DM's note."""
    import time

    from app.slack.provenance import WHY_ACTION
    from memory.types import ReadAudit

    store = InProcessMemoryStore()
    await seed(store, "user:slack:T2:U1", "U1 likes tabs", origin="dm", where="D1")
    await seed(store, "user:slack:T2:U1", "U1 ships the partner build", origin="external", where="T1:C1")
    read = tuple((record.id, 1) for record in await store.list("user:slack:T2:U1", 10))
    await store.record_read(
        ReadAudit("run-1", "slack:T1:C1:1.0", "slack:T2:U1", ("user:slack:T2:U1",), read, time.time())
    )
    registry = build_registry(store=store, memory_enabled=True, organization="acme", admins=[])
    async with running_bot(
        slack_api,
        RecordingDispatcher(),
        registry=registry,
        caller_factory=registry_caller,
        memory_store=store,
        options=SlackOptions(multi_workspace=True),
    ) as bot:
        action = {"action_id": WHY_ACTION, "type": "button", "value": "run-1"}
        payload = block_action("U1", action, channel="C1")
        payload["user"]["team_id"] = "T2"
        payload["team"] = {"id": "T1"}
        payload["response_url"] = slack_api.response_url("why")
        assert (await bot.slack.interaction(payload)).status == 200
        await slack_api.wait_until(lambda: len(slack_api.responses) > 0)

    shown = str(slack_api.responses[-1]["text"])
    assert "U1 ships the partner build" in shown
    assert "U1 likes tabs" not in shown


def _outsider(slack_api: FakeSlackApi, user: str, kind: str) -> None:
    """`user` is a guest of the workspace, or a member of another organization, per users.info."""
    if kind == "guest":
        slack_api.guests[user] = "multi"
    else:
        slack_api.user_teams[user] = "T0PARTNER"


@pytest.mark.parametrize("kind", ["guest", "other_organization"])
async def test_an_outsider_named_an_admin_opens_a_tab_without_the_organizations_memory_or_its_curation(
    slack_api: FakeSlackApi, kind: str
) -> None:
    """The real `app_home_opened` (which names no team): users.info says who opened it, and what
    views.publish receives is their own records, never the org's, the scope picker or the review."""
    _outsider(slack_api, ADMIN, kind)
    store = InProcessMemoryStore()
    await seed(store, "org:acme", "The release train leaves at noon")
    await seed(store, f"user:slack:{ADMIN}", "The admin prefers tabs", origin="dm")
    await store.write_pending("org:acme", [candidate("Deploys freeze on Fridays", n=7)])
    async with home_bot(slack_api, store, review=True) as bot:
        assert await open_home(bot, ADMIN) == 200

    [view] = [call.args["view"] for call in slack_api.calls_to("views.publish")]
    view = json.loads(view) if isinstance(view, str) else view
    assert texts(view) == ["The admin prefers tabs"]
    shown = all_text(view)
    assert "release train" not in shown and "Deploys freeze" not in shown
    assert not {f"{SCOPE_ACTION}_org", CHANNEL_ACTION, APPROVE_ACTION, REJECT_ACTION} & action_ids(view)
    assert REVIEW_TITLE not in shown


async def test_an_outsider_named_an_admin_is_refused_a_forged_forget_of_an_org_record(
    slack_api: FakeSlackApi,
) -> None:
    _outsider(slack_api, ADMIN, "guest")
    store = InProcessMemoryStore()
    await seed(store, "org:acme", "The release train leaves at noon")
    [record] = await store.list("org:acme", 10)
    view = {"type": "home", "private_metadata": ""}
    async with home_bot(slack_api, store) as bot:
        with capture_logs() as logs:
            await click(bot, ADMIN, view, {"action_id": FORGET_ACTION, "type": "button", "value": record.id})

    assert [r.id for r in await store.list("org:acme", 10)] == [record.id]
    refused = [entry for entry in logs if entry["event"] == "slack.home_action_refused"]
    assert [entry["reason"] for entry in refused] == ["outsider_curation"]
    assert "only its own members curate it" in all_text(slack_api.home_views[ADMIN][-1])
