"""A DM has no shared scope, end to end through Bolt, the dispatcher, reflection and SQLite.

What a DM teaches is the person's: a fact the extractor routes to "channel" from a DM lands in the
person's own scope, they can forget it from the DM, `memory forget --user` erases the rest, and
afterwards no file under the data directory (scope databases, WALs, the ledger) holds a byte of it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.slack.bot import registry_caller
from app.slack.provenance import WHY_ACTION
from memory.rules.restate import meaning_key
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate, ReadAudit
from tests.app.slack.harness import running_bot
from tests.app.slack.test_e2e import full_runtime
from tests.app.slack.test_memory_safety import Workspace, facts, holding, store
from tests.app.slack.test_provenance import citations
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import FakeSlackApi, block_action

__all__ = ["store"]  # the fixture, used by name

# The distinctive words of what UA tells the bot in the DM: they must leave the disk.
CHANNEL_WORD = "Quokkavale"
USER_WORD = "Marzipanhorn"
CHANNEL_FACT = f"this DM is where the {CHANNEL_WORD} migration runbook gets drafted"
USER_FACT = f"this user keeps the {USER_WORD} rota in a private spreadsheet"


@pytest.fixture
async def workspace(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> AsyncIterator[Workspace]:
    """test_memory_safety's workspace, with the memory store the *Why?* button reads."""
    for channel, kind in (("D1", "im"), ("C1", "public")):
        slack_api.add_conversation(channel, kind)
    built, commands = full_runtime(tmp_path, fake_anthropic, memory=True, store=store)
    try:
        async with running_bot(
            slack_api, built.dispatcher, registry=commands, caller_factory=registry_caller, memory_store=store
        ) as bot:
            yield Workspace(slack_api, fake_anthropic, built, bot)
    finally:
        await built.aclose()


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
    assert all(meaning_key(USER_FACT) != meaning_key(r.text) for r in await store.list("user:slack:UA", 50))


async def test_the_bots_start_up_moves_an_old_dm_channel_scope_into_its_owners(
    workspace: Workspace, store: SqliteMemoryStore
) -> None:
    """A data directory an older version wrote: UA's DM fact in `channel:slack:D1`, the read audit
    naming UA for that thread. `Runtime.start` migrates it; UA's next DM run reads it as their own."""
    old = f"the {CHANNEL_WORD} runbook lives in the ops wiki"
    await store.write(
        "channel:slack:D1",
        [
            MemoryCandidate(
                "fact",
                old,
                "slack:D1:1.0",
                source_run_id="run-old",
                origin="dm",
                origin_conversation="slack:D1",
            )
        ],
    )
    await store.record_read(
        ReadAudit("run-old", "slack:D1:1.0", "slack:UA", ("org:acme", "user:slack:UA"), (), time.time())
    )

    await workspace.runtime.start()

    assert await store.list("channel:slack:D1", 50) == []
    (moved,) = await holding(store, "user:slack:UA", old)
    assert (moved.origin, moved.origin_conversation) == ("dm", "slack:D1")
    own_file = store.database_path("user:slack:UA").name
    assert all(name.startswith(own_file) for name in files_holding(store.data_dir, CHANNEL_WORD))
    question = f"where does the {CHANNEL_WORD} runbook live?"
    await workspace.say("D1", "UA", question, answer="In the ops wiki.")
    assert old in workspace.system_of_run(question)


async def test_a_why_payload_from_another_person_naming_the_dm_shows_none_of_its_records(
    workspace: Workspace, store: SqliteMemoryStore, slack_api: FakeSlackApi
) -> None:
    """A crafted *Why?* click by UB naming UA's DM (and UA's run id) would show UA's DM records if
    naming the conversation were enough; the read rule ties them to UA. UA's own click shows them."""
    await workspace.say("D1", "UA", "I keep the rota.", answer="Noted.", extracted=facts((USER_FACT, "user")))
    question = f"who keeps the {USER_WORD} rota?"
    await workspace.say("D1", "UA", question, answer="You do.")
    assert USER_FACT in workspace.system_of_run(question)
    [citation] = citations(slack_api)
    run_id = citation["accessory"]["value"]

    async def why(user: str, channel: str, team: str | None = None) -> str:
        payload = block_action(
            user, {"action_id": WHY_ACTION, "type": "button", "value": run_id}, channel=channel
        )
        if team is not None:
            payload["team"] = {"id": team}
        payload["response_url"] = slack_api.response_url("why")
        before = len(slack_api.responses)
        assert (await workspace.bot.slack.interaction(payload)).status == 200
        await slack_api.wait_until(lambda: len(slack_api.responses) > before)
        return str(slack_api.responses[-1]["text"])

    for channel in ("D1", "C1"):
        forged = await why("UB", channel)
        assert USER_WORD not in forged, (channel, forged)
    assert USER_WORD in await why("UA", "D1")
