"""`/memory forget --user <@U…>` with several workspaces, end to end: the real Bolt app over HTTP with
signed slash commands, the real registry and SQLite store, the fake Slack Web API.

Bob remembers something from his DM (it lands under his team-qualified key); an admin of the same
workspace names him as Slack shows him, `<@UBOB>`; afterwards no file under the data directory (scope
databases, WALs, shared memory files, the ledger) holds a byte of his record, and the read audit names
a pseudonym in his place. A name nobody is known by is refused, not answered with "Erased 0".
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import build_commands, build_runtime
from app.slack.bot import registry_caller
from app.slack.options import SlackOptions
from config.settings import load_settings
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import AuditQuery, ReadAudit
from tests.app.slack.harness import RunningBot, running_bot
from tests.app.slack.test_dm_scope import files_holding
from tests.app.slack.test_e2e import MODEL
from tests.app.slack.test_memory_safety import store
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import TEAM_ID, FakeSlackApi

__all__ = ["store"]  # the fixture (a SQLite store under the data directory), used by name

BOB_WORD = "Tamarillocrest"
BOB_TEXT = f"I keep the {BOB_WORD} allotment keys under the blue pot"
BOB = f"user:slack:{TEAM_ID}:UBOB"


@pytest.fixture
async def bot(
    slack_api: FakeSlackApi, tmp_path: Path, fake_anthropic: FakeModelServer, store: SqliteMemoryStore
) -> AsyncIterator[RunningBot]:
    """Wired as `switchboard serve` wires it, with `[slack] multi_workspace = true` and an admin named
    by the team-qualified key that mode derives."""
    config = tmp_path / "switchboard.toml"
    config.write_text(
        f'model = "{MODEL}"\norganization = "acme"\n'
        f'admins = ["user:slack:{TEAM_ID}:U0ADMIN"]\ndata_dir = "{tmp_path / "data"}"\n'
        f'[models.anthropic]\nbase_url = "{fake_anthropic.base_url}"\nmax_retries = 0\n'
        "[memory]\nenabled = true\n[slack]\nmulti_workspace = true\n"
    )
    env = {"ANTHROPIC_API_KEY": "test-anthropic-key"}
    settings = load_settings(env=env, config_path=config)
    assert settings.slack.multi_workspace
    commands, make_caller = build_commands(settings, store)
    built = build_runtime(
        settings, environ=env, memory_store=store, commands=commands, make_caller=make_caller
    )
    for channel, kind in (("D1", "im"), ("C1", "public")):
        slack_api.add_conversation(channel, kind)
    try:
        async with running_bot(
            slack_api,
            built.dispatcher,
            registry=commands,
            caller_factory=registry_caller,
            memory_store=store,
            options=SlackOptions(multi_workspace=settings.slack.multi_workspace),
        ) as running:
            yield running
    finally:
        await built.aclose()


async def slash(bot: RunningBot, slack_api: FakeSlackApi, user: str, channel: str, text: str) -> str:
    """One `/memory …` and its one ephemeral answer."""
    before = len(slack_api.responses)
    delivery = await bot.slack.slash(
        text=text, user_id=user, channel_id=channel, response_url=slack_api.response_url()
    )
    await bot.settle()
    assert delivery.status == 200
    responses: list[dict[str, Any]] = slack_api.responses[before:]
    assert len(responses) == 1, responses
    return str(responses[0]["text"])


async def test_an_admin_erases_bob_by_his_mention_and_no_byte_of_his_record_is_left(
    bot: RunningBot, slack_api: FakeSlackApi, store: SqliteMemoryStore, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    remembered = await slash(bot, slack_api, "UBOB", "D1", f"remember --scope me {BOB_TEXT}")
    assert BOB in remembered, remembered
    [record] = await store.list(BOB, 10)
    await store.record_read(
        ReadAudit(
            "run-1",
            f"slack:{TEAM_ID}:D1:1.0",
            f"slack:{TEAM_ID}:UBOB",
            (BOB,),
            ((record.id, 1),),
            time.time(),
        )
    )
    assert files_holding(data_dir, BOB_WORD) != []

    erased = await slash(bot, slack_api, "U0ADMIN", "C1", "forget --user <@UBOB>")

    assert erased.startswith(f"🧹 Erased 1 record of `{BOB}`"), erased
    assert await store.list(BOB, 10) == []
    assert files_holding(data_dir, BOB_WORD) == []
    # His id is left in no file (his own scope's moved to the pseudonym, the ledger renamed him) and
    # in no file's name.
    assert files_holding(data_dir, "UBOB") == []
    assert [p.name for p in data_dir.rglob("*") if "ubob" in p.name.lower()] == []
    assert await store.read_audit(AuditQuery(user_id=f"slack:{TEAM_ID}:UBOB")) == []
    [renamed] = await store.read_audit(AuditQuery(run_id="run-1"))
    assert renamed.asker is not None and renamed.asker.startswith("erased:")
    assert renamed.scope_keys == (f"user:{renamed.asker}",)


async def test_a_person_nobody_is_known_by_is_refused_in_one_line(
    bot: RunningBot, slack_api: FakeSlackApi
) -> None:
    unknown = await slash(bot, slack_api, "U0ADMIN", "C1", "forget --user <@UNOBODY|nobody>")
    assert unknown.startswith(f"🚫 Nobody is known as `user:slack:{TEAM_ID}:UNOBODY`"), unknown
    assert "Erased" not in unknown

    malformed = await slash(bot, slack_api, "U0ADMIN", "C1", "forget --user bob")
    assert malformed.startswith("🚫 `bob` names no person"), malformed
