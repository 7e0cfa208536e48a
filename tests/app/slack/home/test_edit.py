"""The App Home's Edit modal labels what it writes as its Add modal does: the tab is seen by the viewer
alone, so an edit of their own record is kept as from a DM (like an Add "for me"); an admin's edit of a
shared record is written for the scope's audience (a machine surface, like an Add for the org)."""

from __future__ import annotations

from app.slack.home.edit import EDIT_ACTION
from memory.rules.visibility import Reader, may_show
from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.home.support import ADMIN, candidate, click, home_bot, seed, submit
from tests.app.slack.home.test_review import ORG, button, edit_values, notice, opened_by
from tests.fakes.slack_api import FakeSlackApi

MINE = "user:slack:U1"


async def test_an_edit_of_ones_own_public_record_from_the_tab_is_kept_as_from_a_dm(
    slack_api: FakeSlackApi,
) -> None:
    store = InProcessMemoryStore()
    await seed(store, MINE, "U1 deploys on Fridays", origin="public")
    [mine] = await store.list(MINE, 10)
    async with home_bot(slack_api, store) as bot:
        home = await opened_by(bot, slack_api, "U1")
        await click(bot, "U1", home, button(EDIT_ACTION, mine.id))
        [modal] = slack_api.modals
        await submit(bot, "U1", modal, edit_values("U1 deploys on Fridays, after the Quillmoss appointment"))

    [now] = await store.list(MINE, 10)
    assert (now.supersedes, now.origin, now.origin_conversation) == (mine.id, "dm", None)
    assert not may_show(now, Reader("public", "slack:U1", "slack:C1"))
    assert may_show(now, Reader("self", "slack:U1", None))
    assert "Kept as from a DM" in notice(slack_api.home_views["U1"][-1])


async def test_an_admins_edit_of_a_waiting_org_record_keeps_it_for_the_org_as_the_add_modal_does(
    slack_api: FakeSlackApi,
) -> None:
    store = InProcessMemoryStore()
    await store.write_pending(ORG, [candidate("The release train leaves at noon")])
    [waiting] = await store.pending(ORG, 10)
    async with home_bot(slack_api, store, review=True) as bot:
        home = await opened_by(bot, slack_api, ADMIN)
        await click(bot, ADMIN, home, button(EDIT_ACTION, waiting.id))
        [modal] = slack_api.modals
        await submit(bot, ADMIN, modal, edit_values("The release train leaves at one"))

    [new] = await store.pending(ORG, 10)
    assert (new.supersedes, new.status) == (waiting.id, "pending")
    assert (new.origin, new.origin_conversation) == ("public", "slack:C1")
    assert "Kept as from" not in notice(slack_api.home_views[ADMIN][-1])
