"""An edit never widens who may read, end to end through Bolt, the dispatcher, the registry and SQLite.

Alice's record was learned in a public channel; she edits it from her DM and adds something private.
The new version is kept as from that DM: it reaches her own DM's prompt and listing, never a public
channel's prompt nor a `memory list` posted there.
"""

from __future__ import annotations

import pytest

from memory.stores.sqlite.store import SqliteMemoryStore
from tests.app.slack.test_dm_scope import workspace
from tests.app.slack.test_memory_safety import Workspace, holding, store
from tests.fakes.slack_api import BOT_USER_ID, as_app_mention

__all__ = ["store", "workspace"]  # the fixtures, used by name

PUBLIC_FACT = "the Fernhollow deploy runs on Fridays"
PRIVATE_WORD = "Pelicanbrook"
EDITED_FACT = f"the Fernhollow deploy runs on Fridays; my {PRIVATE_WORD} diagnosis is why I skip it"


async def said(workspace: Workspace, channel: str, text: str) -> str:
    """A memory command UA types (a mention in a channel, plain in the DM); the bot's one reply."""
    slack = workspace.slack
    direct = slack.conversations[channel] == "im"
    posted = slack.post_as_user(channel, "UA", text if direct else f"<@{BOT_USER_ID}> {text}")
    delivery = await workspace.bot.slack.event(posted if direct else as_app_mention(posted))
    assert delivery.status == 200
    await workspace.bot.settle()
    [reply] = slack.bot_replies(channel, posted["ts"])
    return reply.text


@pytest.fixture
async def edited_in_dm(workspace: Workspace, store: SqliteMemoryStore) -> str:
    """UA's public-origin record, then edited from UA's DM with a private word; the receipt."""
    remembered = await said(workspace, "C1", f"memory remember {PUBLIC_FACT}")
    assert remembered.startswith("🧠"), remembered
    (public,) = await holding(store, "user:slack:UA", PUBLIC_FACT)
    assert public.origin == "public"
    return await said(workspace, "D1", f"memory edit {public.id} -- {EDITED_FACT}")


async def test_an_edit_typed_in_a_dm_keeps_the_new_version_as_from_that_dm(
    edited_in_dm: str, store: SqliteMemoryStore
) -> None:
    (edited,) = await holding(store, "user:slack:UA", EDITED_FACT)
    assert (edited.origin, edited.origin_conversation) == ("dm", "slack:D1")
    assert "Kept as from a DM: it shows only to you, privately." in edited_in_dm, edited_in_dm


async def test_a_public_record_edited_from_a_dm_never_reaches_a_public_channels_prompt(
    workspace: Workspace, edited_in_dm: str
) -> None:
    question = "when does the Fernhollow deploy run?"
    await workspace.say("C1", "UA", question, answer="On Fridays.")
    assert PRIVATE_WORD not in workspace.system_of_run(question)

    in_dm = "and when does the Fernhollow deploy run, remind me?"
    await workspace.say("D1", "UA", in_dm, answer="On Fridays.")
    assert PRIVATE_WORD in workspace.system_of_run(in_dm)  # the read would have found it


async def test_a_public_record_edited_from_a_dm_is_withheld_from_a_public_memory_list(
    workspace: Workspace, edited_in_dm: str
) -> None:
    listed = await said(workspace, "C1", "memory list me")
    assert PRIVATE_WORD not in listed and "1 more record" in listed, listed
    assert PRIVATE_WORD in await said(workspace, "D1", "memory list me")


async def test_an_edit_typed_with_the_slash_command_in_a_public_channel_is_kept_as_from_a_dm(
    workspace: Workspace, store: SqliteMemoryStore
) -> None:
    remembered = await said(workspace, "C1", f"memory remember {PUBLIC_FACT}")
    assert remembered.startswith("🧠"), remembered
    (public,) = await holding(store, "user:slack:UA", PUBLIC_FACT)
    # /memory in C1: the channel never sees the new words, only UA does.
    await workspace.bot.slack.slash(
        text=f"edit {public.id} -- {EDITED_FACT}",
        user_id="UA",
        channel_id="C1",
        response_url=workspace.slack.response_url(),
    )
    await workspace.bot.settle()
    (edited,) = await holding(store, "user:slack:UA", EDITED_FACT)
    assert edited.origin == "dm"
