"""`memory remember` on Slack over real HTTP: the App Home's "Add to memory" button and modal
(`views.open` on the fake Slack Web API, a signed `view_submission` back into Bolt), and `/memory
remember` answered ephemerally. The real registry, policy and store sit behind them."""

from __future__ import annotations

import json
from typing import Any

from structlog.testing import capture_logs

from app.slack.home.view import ADD_ACTION, ADD_SCOPE, ADD_SCOPE_BLOCK, ADD_TEXT, ADD_TEXT_BLOCK, ADD_VIEW
from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.harness import RunningBot
from tests.app.slack.home.support import ADMIN, home_bot, open_home, texts
from tests.app.slack.home.support import submit as submit_view
from tests.fakes.slack_api import FakeSlackApi, block_action

SECRET = "ghp_" + "Zq7Lw2Xk9Rt4Vb8Nm3Pd6Hs1Jf5Gc0Ay2Ue"


async def click_add(bot: RunningBot, user: str, home: dict[str, Any]) -> None:
    action = {"action_id": ADD_ACTION, "type": "button", "value": "add"}
    assert (await bot.slack.interaction(block_action(user, action, view=home))).status == 200
    await bot.settle()


async def submit(bot: RunningBot, user: str, modal: dict[str, Any], text: str, scope: str | None) -> str:
    """The modal's Remember pressed with this text and (for an admin's modal) this scope."""
    values: dict[str, Any] = {ADD_TEXT_BLOCK: {ADD_TEXT: {"type": "plain_text_input", "value": text}}}
    if scope is not None:
        option = {"text": {"type": "plain_text", "text": scope}, "value": scope}
        values[ADD_SCOPE_BLOCK] = {ADD_SCOPE: {"type": "radio_buttons", "selected_option": option}}
    return await submit_view(bot, user, modal, values)


def block_ids(view: dict[str, Any]) -> list[str]:
    return [str(block.get("block_id")) for block in view["blocks"]]


async def test_add_to_memory_opens_a_modal_whose_submission_remembers_and_redraws_the_tab(
    slack_api: FakeSlackApi,
) -> None:
    store = InProcessMemoryStore()
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, "U1")
        home = slack_api.home_views["U1"][-1]
        assert "home_add" in block_ids(home)
        await click_add(bot, "U1", home)
        [modal] = slack_api.modals
        [opened] = [call for call in slack_api.calls if call.method == "views.open"]
        with capture_logs() as logs:
            body = await submit(bot, "U1", modal, f"I deploy with the token {SECRET}\non Fridays", None)

    assert opened.args["trigger_id"] == "1.trigger"
    assert (modal["type"], modal["callback_id"]) == ("modal", ADD_VIEW)
    assert block_ids(modal) == [ADD_TEXT_BLOCK]  # no scope choice for a non-admin
    assert body == ""  # acknowledged at once: the modal closes
    [record] = store.records("user:slack:U1")
    assert record.text == "I deploy with the token [REDACTED] on Fridays"
    assert (record.origin, record.source_thread_key) == ("dm", "slack:home")  # its owner's alone
    redrawn = slack_api.home_views["U1"][-1]
    assert texts(redrawn) == [record.text]
    [notice] = [b["elements"][0]["text"] for b in redrawn["blocks"] if b["type"] == "context"][:1]
    assert "Remembered as" in notice and record.id in notice and "user:slack:U1" in notice
    [event] = [entry for entry in logs if entry["event"] == "memory.remember"]
    assert (event["caller"], event["id"], event["outcome"], event["surface"]) == (
        "user:slack:U1",
        record.id,
        "remembered",
        "slack",
    )
    assert SECRET not in repr(logs) and "Fridays" not in repr(logs)


async def admin_adds_an_org_note(slack_api: FakeSlackApi, store: InProcessMemoryStore) -> dict[str, Any]:
    """The admin opens the tab, clicks Add and submits a note for the org; the modal they got."""
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, ADMIN)
        await click_add(bot, ADMIN, slack_api.home_views[ADMIN][-1])
        [modal] = slack_api.modals
        await submit(bot, ADMIN, modal, "Deploys go through make ship from main", "org")
    return modal


async def test_an_admin_picks_the_org_in_the_modal_and_the_record_lands_there(
    slack_api: FakeSlackApi,
) -> None:
    store = InProcessMemoryStore()
    modal = await admin_adds_an_org_note(slack_api, store)

    assert block_ids(modal) == [ADD_TEXT_BLOCK, ADD_SCOPE_BLOCK]
    options = [o["value"] for o in modal["blocks"][1]["element"]["options"]]
    assert options == ["me", "org"]
    [record] = store.records("org:acme")
    assert (record.text, record.origin) == ("Deploys go through make ship from main", "machine")
    assert store.records(f"user:slack:{ADMIN}") == []
    assert "org:acme" in json.dumps(slack_api.home_views[ADMIN][-1]["blocks"])


async def test_an_admins_org_note_from_the_home_tab_names_no_person_in_its_source(
    slack_api: FakeSlackApi,
) -> None:
    """Who added it is the curation log's `remembered` entry, which a person's erasure renames; a
    source naming them in a shared record would outlive that erasure, shown to everyone."""
    store = InProcessMemoryStore()
    await admin_adds_an_org_note(slack_api, store)

    [record] = store.records("org:acme")
    assert ADMIN not in record.source_thread_key, record.source_thread_key


async def test_a_non_admins_crafted_org_submission_is_refused_by_the_command(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, "U1")
        await click_add(bot, "U1", slack_api.home_views["U1"][-1])
        [modal] = slack_api.modals
        with capture_logs() as logs:
            await submit(bot, "U1", modal, "Everyone gets Fridays off", "org")

    assert store.records("org:acme") == [] and store.records("user:slack:U1") == []
    assert [entry["outcome"] for entry in logs if entry["event"] == "memory.remember"] == ["refused"]
    assert "Only admins can remember" in json.dumps(slack_api.home_views["U1"][-1]["blocks"])


async def test_slash_memory_remember_answers_ephemerally_with_the_channels_origin(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    slack_api.add_conversation("G1", "private")
    store = InProcessMemoryStore()
    async with home_bot(slack_api, store) as bot:
        for channel in ("C1", "G1"):
            await bot.slack.slash(
                text=f"remember --scope org the {channel} plan ships in May",
                user_id=ADMIN,
                channel_id=channel,
                channel_name="general",
                response_url=slack_api.response_url(channel),
            )
            await bot.settle()

    [public] = store.records("org:acme")
    [private] = store.records("channel:slack:G1")
    assert (public.text, public.origin) == ("the C1 plan ships in May", "public")
    assert (private.text, private.origin, private.origin_conversation) == (
        "the G1 plan ships in May",
        "private",
        "slack:G1",
    )
    replies = {response["name"]: response for response in slack_api.responses}
    assert {replies["C1"]["response_type"], replies["G1"]["response_type"]} == {"ephemeral"}
    assert public.id in replies["C1"]["text"] and private.id in replies["G1"]["text"]
    assert "Narrowed from" in replies["G1"]["text"]


async def test_a_guest_named_an_admin_gets_no_scope_choice_and_a_forged_org_note_stays_their_own(
    slack_api: FakeSlackApi,
) -> None:
    """What an outsider teaches stays narrow: their note for the organization is kept as from their DM."""
    slack_api.guests[ADMIN] = "single"
    store = InProcessMemoryStore()
    async with home_bot(slack_api, store) as bot:
        await open_home(bot, ADMIN)
        await click_add(bot, ADMIN, slack_api.home_views[ADMIN][-1])
        [modal] = slack_api.modals
        await submit(bot, ADMIN, modal, "Everyone gets Fridays off", "org")

    assert block_ids(modal) == [ADD_TEXT_BLOCK]
    assert store.records("org:acme") == []
    [record] = store.records(f"user:slack:{ADMIN}")
    assert (record.text, record.origin) == ("Everyone gets Fridays off", "dm")
