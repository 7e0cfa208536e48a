"""`memory remember`: a person adds a record, through the app's write gate, redaction and origin labels.

The registry is the real one with the real policy (app/policy.py) and a real store; each caller is
what a surface builds for a message typed in a public channel, a DM, a private channel or a terminal.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from app.policy import write_gate
from commands.cli import run_memory_cli
from commands.memory import build_registry
from commands.registry import Caller, CommandRegistry
from commands.remember import REMEMBER_USAGE, parse_remember_args
from memory.rules.visibility import Reader
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryRecord

ADMIN = "UADMIN"
SECRET = "ghp_" + "Zq7Lw2Xk9Rt4Vb8Nm3Pd6Hs1Jf5Gc0Ay2Ue"


def registry(store: MemoryStore, *, gate: bool = True, enabled: bool = True) -> CommandRegistry:
    return build_registry(
        store=store,
        memory_enabled=enabled,
        organization="acme",
        admins=[f"user:slack:{ADMIN}", "user:cli:local"],
        write_gate=write_gate if gate else None,
    )


def slack(user: str, channel: str, visibility: str, repo: str | None = None) -> Caller:
    async def thread_repo() -> str | None:
        return repo

    return Caller(
        user_id=f"slack:{user}",
        channel_id=f"slack:{channel}",
        channel_visibility=visibility,
        thread_key=f"slack:{channel}:1700000000.000100",
        surface="slack",
        thread_repo=thread_repo,
        reader=Reader("self" if visibility == "dm" else "public", f"slack:{user}", f"slack:{channel}"),
    )


def every_record(store: InProcessMemoryStore) -> dict[str, list[MemoryRecord]]:
    keys = ["org:acme", "repo:acme/api", "channel:slack:C1", "channel:slack:G1", "channel:slack:D1"]
    keys += [f"user:slack:{user}" for user in ("U1", ADMIN)] + ["user:cli:local"]
    return {key: store.records(key) for key in keys if store.records(key)}


async def test_remember_goes_into_your_own_scope_by_default_and_names_the_record() -> None:
    store = InProcessMemoryStore()
    with capture_logs() as logs:
        reply = await registry(store).handle(
            "memory remember I review PRs before lunch", slack("U1", "C1", "public")
        )

    assert reply is not None and reply.ok
    [record] = store.records("user:slack:U1")
    assert (record.text, record.origin, record.origin_conversation) == (
        "I review PRs before lunch",
        "public",
        "slack:C1",
    )
    assert record.source_thread_key == "slack:C1:1700000000.000100"
    assert f"`{record.id}`" in reply.text and "`user:slack:U1`" in reply.text
    assert reply.receipt is not None
    assert (reply.receipt.command, reply.receipt.id, reply.receipt.outcome) == (
        "memory.remember",
        record.id,
        "remembered",
    )
    [event] = [entry for entry in logs if entry["event"] == "memory.remember"]
    assert (event["caller"], event["id"], event["scope"], event["origin"], event["inserted"]) == (
        "user:slack:U1",
        record.id,
        "user:slack:U1",
        "public",
        1,
    )
    assert "lunch" not in repr(logs)  # ids and counts, never the text


async def test_an_admin_remembers_into_the_org_from_a_public_channel() -> None:
    store = InProcessMemoryStore()
    reply = await registry(store).handle(
        "memory remember --scope org Deploys go through make ship from main", slack(ADMIN, "C1", "public")
    )

    assert reply is not None and reply.ok, reply
    [record] = store.records("org:acme")
    assert (record.text, record.origin) == ("Deploys go through make ship from main", "public")
    assert f"`{record.id}`" in reply.text and "`org:acme`" in reply.text
    again = await registry(store).handle(
        "memory remember —scope=org deploys go through make ship from main", slack(ADMIN, "C1", "public")
    )
    assert again is not None and again.ok and again.receipt is not None
    assert (again.receipt.outcome, again.receipt.id) == ("already_remembered", record.id)
    assert len(store.records("org:acme")) == 1


@pytest.mark.parametrize("scope", ["org", "channel", "repo"])
async def test_a_non_admins_remember_into_a_shared_scope_is_refused_and_writes_nothing(scope: str) -> None:
    store = InProcessMemoryStore()
    with capture_logs() as logs:
        reply = await registry(store).handle(
            f"memory remember --scope {scope} Deploys go through make ship",
            slack("U1", "C1", "public", repo="acme/api"),
        )

    assert reply is not None and not reply.ok
    assert reply.text.startswith("🚫 Only admins can remember into the shared")
    assert reply.receipt is not None and reply.receipt.outcome == "refused"
    assert every_record(store) == {}
    assert [entry["outcome"] for entry in logs if entry["event"] == "memory.remember"] == ["refused"]


async def test_a_secret_in_the_text_is_stored_redacted() -> None:
    store = InProcessMemoryStore()
    reply = await registry(store).handle(
        f"memory remember the deploy bot token is {SECRET}", slack("U1", "C1", "public")
    )

    assert reply is not None and reply.ok
    [record] = store.records("user:slack:U1")
    assert record.text == "the deploy bot token is [REDACTED]"
    assert SECRET not in repr(store.records("user:slack:U1")) and SECRET not in reply.text
    assert "[REDACTED]" in reply.text  # the receipt says a secret was taken out


@pytest.mark.parametrize("scope", ["org", "repo"])
async def test_an_admins_remember_in_a_dm_is_origin_dm_and_never_lands_in_a_shared_scope(scope: str) -> None:
    store = InProcessMemoryStore()
    reply = await registry(store).handle(
        f"memory remember --scope {scope} the launch slips a week", slack(ADMIN, "D1", "dm", repo="acme/api")
    )

    assert reply is not None and reply.ok
    assert list(every_record(store)) == [f"user:slack:{ADMIN}"]  # narrowed as the gate narrows reflection
    [record] = store.records(f"user:slack:{ADMIN}")
    assert (record.origin, record.origin_conversation) == ("dm", "slack:D1")
    assert reply.text.startswith(f"🧠 Remembered as `{record.id}` in `user:slack:{ADMIN}`.")
    assert "Narrowed from" in reply.text and "a DM" in reply.text


async def test_a_dm_remember_is_private_to_its_owner_everywhere_it_is_read() -> None:
    store = InProcessMemoryStore()
    await registry(store).handle("memory remember my manager is Dana", slack("U1", "D1", "dm"))
    public = await registry(store).handle("memory list me", slack("U1", "C1", "public"))
    private = await registry(store).handle("memory list me", slack("U1", "D1", "dm"))

    assert public is not None and "Dana" not in public.text
    assert private is not None and "Dana" in private.text


async def test_an_admins_org_remember_in_a_private_channel_stays_in_that_channel() -> None:
    store = InProcessMemoryStore()
    reply = await registry(store).handle(
        "memory remember --scope org the acquisition closes in May", slack(ADMIN, "G1", "private")
    )

    assert reply is not None and reply.ok
    assert list(every_record(store)) == ["channel:slack:G1"]
    [record] = store.records("channel:slack:G1")
    assert (record.origin, record.origin_conversation) == ("private", "slack:G1")


async def test_an_admin_remembers_into_the_threads_repo_and_channel_from_public() -> None:
    store = InProcessMemoryStore()
    caller = slack(ADMIN, "C1", "public", repo="acme/api")
    for scope in ("repo", "channel"):
        reply = await registry(store).handle(f"memory remember --scope {scope} CI runs on {scope}", caller)
        assert reply is not None and reply.ok, reply
    assert [r.text for r in store.records("repo:acme/api")] == ["CI runs on repo"]
    assert [r.text for r in store.records("channel:slack:C1")] == ["CI runs on channel"]

    unbound = await registry(store).handle("memory remember --scope repo x y", slack(ADMIN, "C1", "public"))
    assert unbound is not None and not unbound.ok and "no bound repo" in unbound.text


async def test_the_terminal_remembers_as_machine_and_an_admin_reaches_the_org(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory")
    try:
        out = io.StringIO()
        code = await run_memory_cli(
            ["remember", "--scope", "org", "Releases", "are", "cut", "on", "Tuesdays"],
            store=store,
            memory_enabled=True,
            organization="acme",
            admins=["user:cli:local"],
            out=out,
            write_gate=write_gate,
        )
        [record] = await store.list("org:acme", 10)
        refused = io.StringIO()
        refused_code = await run_memory_cli(
            ["remember", "--scope", "org", "not", "an", "admin"],
            store=store,
            memory_enabled=True,
            organization="acme",
            admins=[],
            out=refused,
            write_gate=write_gate,
        )
        after = await store.list("org:acme", 10)
    finally:
        await store.aclose()

    assert code == 0, out.getvalue()
    assert (record.text, record.origin) == ("Releases are cut on Tuesdays", "machine")
    assert out.getvalue().strip() == f"🧠 Remembered as {record.id} in org:acme."  # plain text, no Markdown
    assert refused_code == 1 and [r.id for r in after] == [record.id]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("memory remember", "needs the text"),
        ("memory remember --scope", "needs a value"),
        ("memory remember --scope team x", "must be one of me, org, repo, channel"),
        ("memory remember --scpoe org x", "Unknown option"),
        ("memory remember -s org x", "Unknown option"),
        ("memory remember --scope org --scope me x", "given twice"),
        ("memory remember Deploys use make ship --scope org", "goes before the text"),
    ],
)
async def test_words_outside_the_grammar_are_a_usage_error_and_write_nothing(text: str, error: str) -> None:
    store = InProcessMemoryStore()
    reply = await registry(store).handle(text, slack(ADMIN, "C1", "public"))

    assert reply is not None and reply.usage_error and not reply.ok
    assert error in reply.text and REMEMBER_USAGE in reply.text
    assert every_record(store) == {}


def test_a_double_dash_ends_the_options() -> None:
    assert parse_remember_args(["--scope", "org", "--", "-v", "is", "verbose", "--scope"]).text == (
        "-v is verbose --scope"
    )
    assert parse_remember_args(["use", "--force", "sparingly"]).scope == "me"


async def test_memory_off_no_words_and_no_policy_each_refuse_with_one_line() -> None:
    store = InProcessMemoryStore()
    caller = slack("U1", "C1", "public")
    off = await registry(store, enabled=False).handle("memory remember x marks it", caller)
    no_words = await registry(store).handle("memory remember 🚀 !!", caller)
    no_gate = await registry(store, gate=False).handle("memory remember x marks it", caller)

    assert off is not None and "Memory is off" in off.text
    assert no_words is not None and "no words" in no_words.text
    assert no_gate is not None and "no write policy" in no_gate.text
    assert not (off.ok or no_words.ok or no_gate.ok)
    assert every_record(store) == {}
