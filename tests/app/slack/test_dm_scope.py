"""A DM has no shared scope (issue 23), end to end through Bolt, the dispatcher, reflection and SQLite.

What a DM teaches is the person's: a fact the extractor routes to "channel" from a DM lands in the
person's own scope, they can forget it from the DM, `memory forget --user` erases the rest, and
afterwards no file under the data directory (scope databases, WALs, the ledger) holds a byte of it.
"""

from __future__ import annotations

from pathlib import Path

from memory.rules.engine import normalize_text
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.app.slack.test_memory_safety import Workspace, facts, holding, store, workspace
from tests.fakes.slack_api import FakeSlackApi

__all__ = ["store", "workspace"]  # the fixtures, used by name

# The distinctive words of what UA tells the bot in the DM: they must leave the disk.
CHANNEL_WORD = "Quokkavale"
USER_WORD = "Marzipanhorn"
CHANNEL_FACT = f"this DM is where the {CHANNEL_WORD} migration runbook gets drafted"
USER_FACT = f"this user keeps the {USER_WORD} rota in a private spreadsheet"


def files_holding(data_dir: Path, word: str) -> list[str]:
    """Every file under the data directory whose raw bytes hold `word`, case-blind (WALs included)."""
    needle = word.lower().encode()
    return sorted(
        str(path.relative_to(data_dir))
        for path in data_dir.rglob("*")
        if path.is_file() and needle in path.read_bytes().lower()
    )


async def command(workspace: Workspace, channel: str, user: str, text: str) -> str:
    """A memory command typed into a DM with the bot; the bot's one reply."""
    slack = workspace.slack
    posted = slack.post_as_user(channel, user, text)
    assert (await workspace.bot.slack.event(posted)).status == 200
    await workspace.bot.settle()
    [reply] = slack.bot_replies(channel, posted["ts"])
    return reply.text


async def test_a_dm_fact_routed_to_the_channel_is_the_persons_to_forget_and_to_erase(
    workspace: Workspace, store: SqliteMemoryStore, slack_api: FakeSlackApi
) -> None:
    slack_api.add_conversation("D0", "im")  # the admin's own DM with the bot
    data_dir = store.data_dir

    # 1. UA, four turns deep in their DM; the extractor routes one fact to "channel", one to "org".
    await workspace.say(
        "D1",
        "UA",
        f"We draft the {CHANNEL_WORD} runbook here; I keep the {USER_WORD} rota in my own sheet.",
        answer="Noted.",
        extracted=facts((CHANNEL_FACT, "channel"), (USER_FACT, "org")),
    )
    (channel_fact,) = await holding(store, "user:slack:UA", CHANNEL_FACT)
    (user_fact,) = await holding(store, "user:slack:UA", USER_FACT)
    assert (channel_fact.origin, channel_fact.origin_conversation) == ("dm", "slack:D1")
    assert user_fact.origin == "dm"
    assert "channel:slack:D1" not in await store.scope_keys()  # no shared scope was ever made
    assert not store.database_path("channel:slack:D1").exists()
    own_file = store.database_path("user:slack:UA").name
    holders = files_holding(data_dir, CHANNEL_WORD)
    assert holders and all(name.startswith(own_file) for name in holders), holders  # its db or WAL

    # 2. A DM has no channel scope to list, for UA or for an admin in their own DM.
    for channel, user in (("D1", "UA"), ("D0", "U0ADMIN")):
        listed = await command(workspace, channel, user, "memory list --scope channel")
        assert listed.startswith("A DM has no channel scope"), listed
        assert CHANNEL_WORD not in listed

    # 3. UA forgets the "channel" fact from the DM: it is theirs, no admin needed.
    forgot = await command(workspace, "D1", "UA", f"memory forget {channel_fact.id}")
    assert forgot == f"🧹 Forgot `{channel_fact.id}`.", forgot
    assert files_holding(data_dir, CHANNEL_WORD) == []
    assert await holding(store, "user:slack:UA", CHANNEL_FACT) == []

    # 4. An admin erases UA: nothing UA's DM taught survives in any file.
    assert files_holding(data_dir, USER_WORD) != []
    erased = await command(workspace, "D0", "U0ADMIN", "memory forget --user slack:UA")
    assert erased.startswith("🧹 Erased 1 record"), erased
    for word in (CHANNEL_WORD, USER_WORD):
        assert files_holding(data_dir, word) == [], word
    assert all(
        normalize_text(USER_FACT) != normalize_text(r.text) for r in await store.list("user:slack:UA", 50)
    )
