"""The App Home's curation over real HTTP: the review section admins get under `memory.review =
"shared"` (Approve / Edit / Reject), and Edit beside Forget on a record. Signed `block_actions` and
`view_submission` go into Bolt, the fake Slack Web API records `views.publish` / `views.open`, and
the real registry (`memory approve|reject|edit`) and a real curating store sit behind them."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from app.slack.bot import registry_caller
from app.slack.home.edit import EDIT_ACTION, EDIT_TEXT, EDIT_TEXT_BLOCK, EDIT_VIEW
from app.slack.home.review import APPROVE_ACTION, PENDING_BLOCK, REJECT_ACTION, REVIEW_TITLE
from app.slack.home.view import FORGET_ACTION
from commands.memory import build_registry
from memory.rules.visibility import Reader
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryRecord, Origin
from tests.app.slack.harness import RunningBot
from tests.app.slack.home.support import (
    ADMIN,
    all_text,
    buttons,
    candidate,
    click,
    home_bot,
    open_home,
    seed,
    submit,
    texts,
    waiting_texts,
)
from tests.fakes.slack_api import FakeSlackApi

ORG = "org:acme"
LEARNED = "The release train leaves at noon"


async def waiting_store(*texts_: str) -> InProcessMemoryStore:
    """A store where reflection's org facts wait for review, the first the oldest."""
    store = InProcessMemoryStore()
    for n, text in enumerate(texts_ or (LEARNED,)):
        await store.write_pending(ORG, [candidate(text, n=n + 1)])
    return store


def button(kind: str, record_id: str) -> dict[str, Any]:
    return {"action_id": kind, "type": "button", "value": record_id}


def edit_values(text: str) -> dict[str, Any]:
    return {EDIT_TEXT_BLOCK: {EDIT_TEXT: {"type": "plain_text_input", "value": text}}}


def notice(view: dict[str, Any]) -> str:
    """The outcome of the last action: the tab's first block."""
    first = view["blocks"][0]
    assert first["type"] == "context"
    return str(first["elements"][0]["text"])


async def opened_by(bot: RunningBot, slack_api: FakeSlackApi, user: str) -> dict[str, Any]:
    await open_home(bot, user)
    return slack_api.home_views[user][-1]


async def test_an_admin_sees_what_waits_with_where_and_when_it_was_learned(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    store = await waiting_store()
    [waiting] = await store.pending(ORG, 10)
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)

    assert home["blocks"][0]["text"]["text"] == REVIEW_TITLE
    assert waiting_texts(home) == [LEARNED]
    assert texts(home) == []  # not listed among the org's records: it is not in memory yet
    [row] = buttons(home, PENDING_BLOCK)
    assert row == {"Approve": waiting.id, "Edit": waiting.id, "Reject": waiting.id}
    details = home["blocks"][2]["elements"]
    assert details[0]["text"].startswith(f"{ORG} · fact · learned ")
    assert "in a public channel" in details[0]["text"] and waiting.id in details[0]["text"]
    assert details[1]["text"].startswith("<https://fake.slack.com/archives/C1/p")


async def test_nobody_but_an_admin_sees_the_review_section(slack_api: FakeSlackApi) -> None:
    store = await waiting_store()
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, "U1")

    assert REVIEW_TITLE not in all_text(home) and LEARNED not in all_text(home)
    assert APPROVE_ACTION not in all_text(home)


async def test_with_review_off_an_admin_gets_no_review_section(slack_api: FakeSlackApi) -> None:
    async with home_bot(slack_api, await waiting_store(), review=False) as bot:
        home = await opened_by(bot, slack_api, ADMIN)

    assert REVIEW_TITLE not in all_text(home) and LEARNED not in all_text(home)


async def test_approve_makes_the_record_active_and_listed(slack_api: FakeSlackApi) -> None:
    store = await waiting_store()
    [waiting] = await store.pending(ORG, 10)
    registry = build_registry(store=store, memory_enabled=True, organization="acme", admins=[])
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)
        with capture_logs() as logs:
            assert await click(bot, ADMIN, home, button(APPROVE_ACTION, waiting.id)) == 200
    listed = await registry.handle(
        "memory list org",
        registry_caller(
            user_id="cli:local",
            channel_id=None,
            channel_visibility="machine",
            thread_key="cli:memory",
            surface="cli",
            reader=Reader("self", "cli:local", None),
        ),
    )

    assert [r.id for r in await store.list(ORG, 10)] == [waiting.id]
    assert await store.pending(ORG, 10) == []
    assert listed is not None and LEARNED in listed.text
    after = slack_api.home_views[ADMIN][-1]
    assert f"Approved `{waiting.id}`" in notice(after) and waiting_texts(after) == []
    [event] = [e for e in logs if e["event"] == "memory.approve" and "caller" in e]  # the command's
    assert (event["caller"], event["id"], event["outcome"], event["surface"]) == (
        f"user:slack:{ADMIN}",
        waiting.id,
        "approved",
        "slack",
    )
    assert LEARNED not in repr(logs)


async def test_reject_erases_the_waiting_record(slack_api: FakeSlackApi) -> None:
    store = await waiting_store()
    [waiting] = await store.pending(ORG, 10)
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)
        await click(bot, ADMIN, home, button(REJECT_ACTION, waiting.id))

    assert await store.pending(ORG, 10) == [] and await store.list(ORG, 10) == []
    [version] = await store.history(ORG, waiting.id)
    assert (version.status, version.text, version.erased_reason) == ("forgotten", None, "rejected")
    after = slack_api.home_views[ADMIN][-1]
    assert f"Rejected `{waiting.id}`" in notice(after)
    assert LEARNED not in all_text(after)


async def test_edit_opens_a_prefilled_modal_whose_submission_makes_a_new_version(
    slack_api: FakeSlackApi,
) -> None:
    store = await waiting_store()
    [waiting] = await store.pending(ORG, 10)
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)
        await click(bot, ADMIN, home, button(EDIT_ACTION, waiting.id))
        [modal] = slack_api.modals
        with capture_logs() as logs:
            body = await submit(bot, ADMIN, modal, edit_values("The release train leaves at one"))

    assert modal["callback_id"] == EDIT_VIEW
    assert modal["blocks"][0]["element"]["initial_value"] == LEARNED
    assert body == ""  # acknowledged at once: the modal closes
    [new] = await store.pending(ORG, 10)  # an edit of a waiting record still waits
    assert (new.text, new.supersedes) == ("The release train leaves at one", waiting.id)
    assert [v.id for v in await store.history(ORG, new.id)] == [waiting.id, new.id]
    after = slack_api.home_views[ADMIN][-1]
    assert f"Edited `{waiting.id}`" in notice(after)
    assert waiting_texts(after) == ["The release train leaves at one"]
    assert [e["outcome"] for e in logs if e["event"] == "slack.home_edit"] == ["edited"]
    assert "leaves at" not in repr(logs)


async def test_edit_sits_beside_forget_on_an_owned_record_and_edits_it(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U1", "U1 deploys on Fridays", origin="dm")
    [mine] = await store.list("user:slack:U1", 10)
    async with home_bot(slack_api, store) as bot:
        home = await opened_by(bot, slack_api, "U1")
        await click(bot, "U1", home, button(EDIT_ACTION, mine.id))
        [modal] = slack_api.modals
        await submit(bot, "U1", modal, edit_values("U1 deploys on Thursdays"))

    assert buttons(home) == [{"Edit": mine.id, "Forget": mine.id}]
    assert modal["blocks"][0]["element"]["initial_value"] == "U1 deploys on Fridays"
    [now] = await store.list("user:slack:U1", 10)
    assert (now.text, now.supersedes) == ("U1 deploys on Thursdays", mine.id)
    assert texts(slack_api.home_views["U1"][-1]) == ["U1 deploys on Thursdays"]


async def test_a_non_admins_forged_approve_is_refused_and_logged(slack_api: FakeSlackApi) -> None:
    store = await waiting_store()
    [waiting] = await store.pending(ORG, 10)
    async with home_bot(slack_api, store, review=True) as bot:
        with capture_logs() as logs:
            await click(
                bot, "U1", {"type": "home", "private_metadata": ""}, button(APPROVE_ACTION, waiting.id)
            )

    assert [r.id for r in await store.pending(ORG, 10)] == [waiting.id]
    assert await store.list(ORG, 10) == []
    refused = [e for e in logs if e["event"] == "slack.home_action_refused"]
    assert [(e["user"], e["reason"], e["id"]) for e in refused] == [("U1", "approve_refused", waiting.id)]
    assert [e.get("outcome") for e in logs if e["event"] == "memory.approve"] == ["refused"]
    after = slack_api.home_views["U1"][-1]
    assert "Only admins can approve" in notice(after) and LEARNED not in all_text(after)


async def test_a_stale_approve_says_nothing_waits_any_more(slack_api: FakeSlackApi) -> None:
    store = await waiting_store()
    [waiting] = await store.pending(ORG, 10)
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)
        await click(bot, ADMIN, home, button(REJECT_ACTION, waiting.id))
        await click(bot, ADMIN, home, button(APPROVE_ACTION, waiting.id))  # the old tab, clicked again

    assert "is not waiting for review" in notice(slack_api.home_views[ADMIN][-1])
    assert await store.list(ORG, 10) == []


async def test_a_forged_edit_of_another_persons_record_opens_nothing(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U2", "U2 is on call", origin="dm")
    [theirs] = await store.list("user:slack:U2", 10)
    async with home_bot(slack_api, store) as bot:
        with capture_logs() as logs:
            await click(bot, "U1", {"type": "home", "private_metadata": ""}, button(EDIT_ACTION, theirs.id))

    assert slack_api.modals == []
    assert [e["reason"] for e in logs if e["event"] == "slack.home_action_refused"] == ["edit_refused"]
    after = slack_api.home_views["U1"][-1]
    assert "another person's scope" in notice(after) and "U2 is on call" not in all_text(after)


async def test_a_long_queue_beside_a_full_page_fits_in_slacks_100_blocks(slack_api: FakeSlackApi) -> None:
    store = await waiting_store(*[f"waiting fact number {n}" for n in range(40)])
    await seed(store, ORG, *[f"org fact number {n}" for n in range(25)])
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)
        org = {"action_id": "home_scope_org", "type": "button", "value": "org"}
        await click(bot, ADMIN, home, org)
        page = slack_api.home_views[ADMIN][-1]

    assert len(page["blocks"]) <= 100
    assert len(texts(page)) == 20  # the page is whole; the queue gets what is left
    shown = waiting_texts(page)
    assert shown and shown[0] == "waiting fact number 39"  # newest first
    assert "`memory pending` lists them all" in all_text(page)
    assert len(waiting_texts(home)) > len(shown)  # the tab's own page was shorter


async def test_forget_still_goes_through_memory_forget_beside_edit(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U1", "U1 likes tabs", origin="dm")
    [mine] = await store.list("user:slack:U1", 10)
    async with home_bot(slack_api, store) as bot:
        home = await opened_by(bot, slack_api, "U1")
        await click(bot, "U1", home, button(FORGET_ACTION, mine.id))

    assert await store.list("user:slack:U1", 10) == []
    assert json.dumps(slack_api.home_views["U1"][-1]).count("U1 likes tabs") == 0


async def test_a_record_longer_than_slacks_text_box_is_left_to_memory_edit(slack_api: FakeSlackApi) -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:slack:U1", "U1 notes " + "word " * 700, origin="dm")
    [mine] = await store.list("user:slack:U1", 10)
    async with home_bot(slack_api, store) as bot:
        await click(bot, "U1", {"type": "home", "private_metadata": ""}, button(EDIT_ACTION, mine.id))

    assert len(mine.text) > 3000 and slack_api.modals == []
    assert f"`memory edit {mine.id} -- <new text>`" in notice(slack_api.home_views["U1"][-1])


async def test_a_picked_channels_waiting_records_join_the_orgs(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    store = await waiting_store()
    await store.write_pending("channel:slack:C1", [candidate("This channel ships the mobile app", n=9)])
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)
        pick = {"action_id": "home_channel", "type": "conversations_select", "selected_conversation": "C1"}
        await click(bot, ADMIN, home, pick)
        channel = slack_api.home_views[ADMIN][-1]

    assert waiting_texts(home) == [LEARNED]
    assert sorted(waiting_texts(channel)) == sorted([LEARNED, "This channel ships the mobile app"])


async def test_the_review_works_the_same_on_sqlite(slack_api: FakeSlackApi, tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory")
    try:
        for n, text in enumerate(("Keep me", "Drop me", "Fix me")):
            await store.write_pending(ORG, [candidate(text, n=n + 1)])
        waiting = {r.text: r for r in await store.pending(ORG, 10)}
        keep, drop, fix = waiting["Keep me"], waiting["Drop me"], waiting["Fix me"]
        async with home_bot(slack_api, store, review=True) as bot:
            home = await opened_by(bot, slack_api, ADMIN)
            await click(bot, ADMIN, home, button(APPROVE_ACTION, keep.id))
            await click(bot, ADMIN, home, button(REJECT_ACTION, drop.id))
            await click(bot, ADMIN, home, button(EDIT_ACTION, fix.id))
            [modal] = slack_api.modals
            await submit(bot, ADMIN, modal, edit_values("Fixed"))
        assert [r.text for r in await store.list(ORG, 10)] == ["Keep me"]
        assert [r.text for r in await store.pending(ORG, 10)] == ["Fixed"]
        assert waiting_texts(slack_api.home_views[ADMIN][-1]) == ["Fixed"]
        assert [v.text for v in await store.history(ORG, drop.id)] == [None]
    finally:
        await store.aclose()


async def test_a_store_failure_reading_the_queue_is_a_warning_line_and_the_page_still_shows(
    slack_api: FakeSlackApi,
) -> None:
    class Broken(InProcessMemoryStore):
        async def pending(self, scope_key: str, limit: int) -> list[MemoryRecord]:
            raise sqlite3.OperationalError("database is locked")

    store = Broken()
    await seed(store, ORG, "The org keeps its records")
    async with home_bot(slack_api, store, review=True) as bot:
        with capture_logs() as logs:
            home = await opened_by(bot, slack_api, ADMIN)
        await click(bot, ADMIN, home, {"action_id": "home_scope_org", "type": "button", "value": "org"})

    assert "⚠️ Couldn't read what waits for review (OperationalError)." in all_text(home)
    assert texts(slack_api.home_views[ADMIN][-1]) == ["The org keeps its records"]
    [failed] = [e for e in logs if e["event"] == "memory.review_browse_failed"]
    assert failed["error"] == "OperationalError"


async def correction_waiting(
    origin: Origin = "public", where: str = "C1"
) -> tuple[InProcessMemoryStore, str, str]:
    """An active org record and reflection's correction of it waiting: (store, active id, pending id)."""
    store = InProcessMemoryStore()
    await store.write(ORG, [candidate("The release train leaves at ten", origin=origin, where=where)])
    [active] = await store.list(ORG, 10)
    await store.write_pending(ORG, [replace(candidate(LEARNED, n=2), supersedes=active.id)])
    [waiting] = await store.pending(ORG, 10)
    return store, active.id, waiting.id


async def test_a_waiting_correction_names_the_record_its_approval_supersedes(slack_api: FakeSlackApi) -> None:
    store, active, waiting = await correction_waiting()
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)
        await click(bot, ADMIN, home, button(APPROVE_ACTION, waiting))

    assert waiting_texts(home) == [LEARNED]
    details = [e["text"] for e in home["blocks"][2]["elements"]]
    assert f"Approving it supersedes {active}: The release train leaves at ten" in details
    after = notice(slack_api.home_views[ADMIN][-1])
    assert f"It supersedes `{active}`" in after and "now superseded" in after


async def test_a_waiting_correction_names_without_its_text_a_record_the_tab_may_not_show(
    slack_api: FakeSlackApi,
) -> None:
    store, active, _ = await correction_waiting(origin="private", where="G1")
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)

    details = [e["text"] for e in home["blocks"][2]["elements"]]
    assert f"Approving it supersedes {active} (learned where this tab cannot show it)." in details
    assert "leaves at ten" not in all_text(home)
