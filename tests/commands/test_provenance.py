"""`memory why`, `memory audit` and `memory forget --user` through the real dispatcher and registry.

A series of runs against the fake model server writes the durable read audit (SQLite store); the
commands then answer from it without a model turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from app.agent.agents import build_agents
from app.agent.providers.registry import build_provider_registry
from app.dispatch import Dispatcher
from commands.memory import build_registry
from commands.provenance import explain_run, parse_audit_args, reader_for, render_why
from commands.registry import Caller, UsageError
from memory.rules.retention import Retention
from memory.rules.visibility import Audience, Reader
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import AuditQuery, MemoryCandidate, Origin
from tests.app.runtime_support import RecordingSurface, message, settings_for
from tests.fakes.model_server import FakeModelServer
from tests.memory.store_contract import DAY, FakeClock

ADMIN = "slack:UADMIN"
SETTINGS = {"organization": "acme", "admins": [f"user:{ADMIN}"], "memory": {"enabled": True}}
THREAD_A = "slack:C1:1700000000.000100"
THREAD_B = "slack:C1:1700000500.000100"
THREAD_C = "slack:C1:1700000900.000100"
THREAD_DM = "slack:D1:1700001000.000100"


AUDIENCE: dict[str, Audience] = {"public": "public", "private": "private", "dm": "self"}


def caller(user: str | None = "slack:U1", thread: str = THREAD_A, visibility: str = "public") -> Caller:
    """As a surface builds it: the reader is the reply's audience (app.audience)."""
    return Caller(
        user_id=user,
        channel_id="slack:C1",
        channel_visibility=visibility,
        thread_key=thread,
        surface="slack",
        reader=Reader(AUDIENCE[visibility], user, "slack:C1"),
    )


def alone(user: str | None = "slack:U1") -> Caller:
    """In the asker's DM with the bot: where the audit is answered (only they read the reply)."""
    return caller(user, thread=THREAD_DM, visibility="dm")


def fact(text: str, thread: str = "slack:C0:1.0", origin: Origin = "public") -> MemoryCandidate:
    return MemoryCandidate(kind="fact", text=text, source_thread_key=thread, origin=origin, confidence=0.9)


class Bot:
    """A dispatcher (memory on, SQLite store) with the registry every surface shares."""

    def __init__(self, dispatcher: Dispatcher, store: SqliteMemoryStore) -> None:
        self.dispatcher = dispatcher
        self.store = store
        self.registry = build_registry(
            store=store, memory_enabled=True, organization="acme", admins=[f"user:{ADMIN}"]
        )

    async def ask(
        self, text: str, *, user: str = "slack:U1", thread: str = THREAD_A, dm: bool = False
    ) -> str | None:
        asked = message(text, user=user, thread=thread)
        if dm:
            asked = replace(asked, channel_id="slack:D1", channel_visibility="dm")
        outcome = await self.dispatcher.dispatch(asked, RecordingSurface())
        await self.dispatcher.wait_idle()  # the audit write is a tracked task
        return outcome.run_id

    async def command(self, text: str, who: Caller) -> str:
        reply = await self.registry.handle(text, who)
        assert reply is not None
        return reply.text


@pytest.fixture
async def bot(fake_anthropic: FakeModelServer, tmp_path: Path) -> AsyncIterator[Bot]:
    clock = FakeClock()
    store = SqliteMemoryStore(tmp_path / "memory", clock=clock, retention=Retention(audit_days=30))
    settings = settings_for(fake_anthropic, **SETTINGS)
    async with AsyncExitStack() as stack:
        providers = build_provider_registry(settings, environ={})
        stack.push_async_callback(providers.aclose)
        stack.push_async_callback(store.aclose)
        dispatcher = Dispatcher(
            settings=settings,
            providers=providers,
            agents=build_agents(settings),
            memory_store=store,
            clock=clock,
        )
        await store.write("org:acme", [fact("deploys run from the release branch")])
        await store.write("org:acme", [fact("the staging database is postgres sixteen")])
        await store.write(
            "user:slack:U1", [fact("this user prefers terse answers about deploys", origin="dm")]
        )
        yield Bot(dispatcher, store)


async def series(bot: Bot, fake: FakeModelServer) -> dict[str, str | None]:
    fake.script("answer one", "answer two", "answer three", "answer four", "answer five")
    return {
        "deploy": await bot.ask("how do deploys work?"),
        "staging": await bot.ask("which postgres does staging use?", thread=THREAD_B),
        "nothing": await bot.ask("what is the weather?", thread=THREAD_B),
        "other": await bot.ask("do deploys use the release branch?", user="slack:U2", thread=THREAD_C),
        "dm": await bot.ask("remind me how deploys work", thread=THREAD_DM, dm=True),
    }


async def test_the_audit_answers_run_and_record_after_a_series_of_runs(
    bot: Bot, fake_anthropic: FakeModelServer
) -> None:
    runs = await series(bot, fake_anthropic)
    store = bot.store

    [deploy] = await store.read_audit(AuditQuery(run_id=str(runs["deploy"])))
    assert deploy.asker == "slack:U1" and deploy.thread_key == THREAD_A
    # the user record was learned in a DM: the public run never read it (the read rule)
    assert deploy.records == (("mem:org:acme:1", 1),)
    assert deploy.scope_keys == ("org:acme", "channel:slack:C1", "user:slack:U1")
    [dm] = await store.read_audit(AuditQuery(run_id=str(runs["dm"])))
    assert {record_id for record_id, _ in dm.records} == {"mem:org:acme:1", "mem:user:slack:U1:1"}
    assert sorted(rank for _, rank in dm.records) == [1, 2]
    [nothing] = await store.read_audit(AuditQuery(run_id=str(runs["nothing"])))
    assert nothing.records == ()

    used_release = await store.read_audit(AuditQuery(record_id="mem:org:acme:1"))
    assert [entry.run_id for entry in used_release] == [runs["dm"], runs["other"], runs["deploy"]]
    used_staging = await store.read_audit(AuditQuery(record_id="mem:org:acme:2"))
    assert [entry.run_id for entry in used_staging] == [runs["staging"]]

    text = await bot.command("memory audit --record mem:org:acme:1", alone(ADMIN))
    assert f"`{runs['other']}`" in text and f"`{runs['deploy']}`" in text
    assert f"`{runs['staging']}`" not in text
    assert "release branch" not in text  # the audit shows ids, never text
    text = await bot.command(f"memory audit --run {runs['staging']}", alone(ADMIN))
    assert "`mem:org:acme:2` #1" in text and "mem:org:acme:1`" not in text
    assert len(fake_anthropic.requests) == 5  # no model turn for any command


async def test_the_audits_retention_drops_reads_older_than_it(
    bot: Bot, fake_anthropic: FakeModelServer
) -> None:
    runs = await series(bot, fake_anthropic)
    clock = bot.dispatcher._clock
    assert isinstance(clock, FakeClock)
    clock.advance(31 * DAY)
    assert await bot.store.read_audit(AuditQuery(record_id="mem:org:acme:1")) == []
    fake_anthropic.script("later")
    later = await bot.ask("deploys again?")
    assert [e.run_id for e in await bot.store.read_audit(AuditQuery(record_id="mem:org:acme:1"))] == [later]
    assert str(runs["deploy"]) not in await bot.command("memory audit --record mem:org:acme:1", alone(ADMIN))


async def test_a_non_admin_audits_only_their_own_reads_and_records(
    bot: Bot, fake_anthropic: FakeModelServer
) -> None:
    runs = await series(bot, fake_anthropic)
    assert "🚫 Only admins" in await bot.command("memory audit --record mem:org:acme:1", alone("slack:U1"))
    assert "🚫 Only admins" in await bot.command("memory audit --user U2", alone("slack:U1"))
    own = await bot.command("memory audit --user me", alone("slack:U1"))
    assert f"`{runs['deploy']}`" in own and f"`{runs['other']}`" not in own
    mine = await bot.command("memory audit --record mem:user:slack:U1:1", alone("slack:U1"))
    assert f"`{runs['dm']}`" in mine and f"`{runs['deploy']}`" not in mine
    theirs = await bot.command(f"memory audit --run {runs['other']}", alone("slack:U1"))
    assert str(runs["other"]) not in theirs.split("—", 1)[1].split("\n", 1)[1]  # listed nothing of U2's


async def test_an_audit_typed_in_a_public_channel_names_no_dm_thread_or_record(
    bot: Bot, fake_anthropic: FakeModelServer
) -> None:
    await series(bot, fake_anthropic)
    text = await bot.command("memory audit --user U1", caller(ADMIN))  # an admin, in public C1
    assert "slack:D1" not in text and "mem:user:slack:U1" not in text, text
    assert text.startswith("🚫") and "your DM with me" in text


async def test_memory_why_lists_the_threads_last_answers_records_under_the_read_rule(
    bot: Bot, fake_anthropic: FakeModelServer
) -> None:
    await series(bot, fake_anthropic)
    public = await bot.command("memory why", caller("slack:U1"))
    assert "drew on 1 memory" in public
    assert "- `mem:org:acme:1` · `org:acme` · " in public
    assert "`deploys run from the release branch`" in public
    private = await bot.command("memory why", caller("slack:U1", thread=THREAD_DM, visibility="dm"))
    assert "drew on 2 memories" in private
    assert "`mem:user:slack:U1:1` · `user:slack:U1`" in private
    assert "`this user prefers terse answers about deploys`" in private
    assert "source `slack:C0:1.0`" in private  # no permalink source on this surface: the thread key
    assert "drew on no memories" in await bot.command("memory why", caller("slack:U1", thread=THREAD_B))
    assert "No answer here" in await bot.command("memory why", caller("slack:U1", thread="slack:C1:9.0"))


async def test_why_never_shows_a_record_to_someone_its_origin_does_not_reach(
    bot: Bot, fake_anthropic: FakeModelServer
) -> None:
    await series(bot, fake_anthropic)
    stranger = Reader("self", "slack:U9", "slack:C9")
    answer = await explain_run(bot.store, stranger, thread_key=THREAD_DM)
    assert [r.id for r in answer.shown] == ["mem:org:acme:1"] and answer.hidden == 1
    text = await render_why(answer, machine=False, permalinks=None)
    assert "terse answers" not in text and "1 more is not shown here" in text


async def test_memory_why_leaves_out_what_was_forgotten_since(
    bot: Bot, fake_anthropic: FakeModelServer
) -> None:
    await series(bot, fake_anthropic)
    await bot.store.forget("user:slack:U1", "mem:user:slack:U1:1")
    text = await bot.command("memory why", caller("slack:U1", thread=THREAD_DM, visibility="dm"))
    assert "terse answers" not in text and "1 has been forgotten since" in text


async def test_an_admins_forget_user_erases_that_persons_whole_scope_and_counts(bot: Bot) -> None:
    await bot.store.write("user:slack:U2", [fact("likes tabs"), fact("works from lisbon")])
    refused = await bot.command("memory forget --user U2", caller("slack:U1"))
    assert refused.startswith("🚫") and len(await bot.store.list("user:slack:U2", 10)) == 2

    assert await bot.command("memory forget --user <@U2>", caller(ADMIN)) == (
        "🧹 Erased 2 records of `user:slack:U2`."
    )
    assert await bot.store.list("user:slack:U2", 10) == []
    again = await bot.command("memory forget --user=slack:U2", caller(ADMIN))
    assert again.startswith("🚫 Nobody is known as `user:slack:U2`"), again
    assert len(await bot.store.list("user:slack:U1", 10)) == 1


def test_audit_arguments_name_exactly_one_target() -> None:
    assert parse_audit_args(["--run", "run_1"]) == AuditQuery(run_id="run_1")
    assert parse_audit_args(["--user=me", "--limit", "5"], me="slack:U1") == AuditQuery(
        user_id="slack:U1", limit=5
    )
    for bad in (
        [],
        ["--run", "a", "--user", "b"],
        ["--record", "nope"],
        ["--limit", "0", "--run", "a"],
        ["x"],
    ):
        with pytest.raises(UsageError):
            parse_audit_args(bad)


def test_the_reader_of_a_reply_is_the_surfaces_unless_the_reply_is_private() -> None:
    assert reader_for(caller(visibility="private")).audience == "private"
    assert reader_for(caller(), private=True) == Reader("self", "slack:U1", "slack:C1")
    bare = Caller(user_id="slack:U1", channel_id=None, channel_visibility=None, thread_key="t", surface="x")
    assert reader_for(bare).audience == "public"  # no reader given: shown as little as a public reply
