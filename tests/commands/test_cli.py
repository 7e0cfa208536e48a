"""`switchboard memory …`: the terminal surface of the one registry, acting as `user:cli:local`."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from commands.cli import CLI_CALLER, main, run_memory_cli, usage
from commands.compact import COMPACT_USAGE
from commands.consolidate import CONSOLIDATE_USAGE
from commands.curate import EDIT_USAGE, PENDING_USAGE
from commands.memory import FORGET_USAGE, LIST_USAGE, UNTRUSTED_NOTE, UNTRUSTED_OPEN, build_registry
from commands.provenance import AUDIT_USAGE, WHY_USAGE
from commands.registry import Caller
from commands.reindex import run_reindex
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate
from tests.memory.postgres_support import unreachable_dsn

ROOT = Path(__file__).resolve().parents[2]


async def seed(store: InProcessMemoryStore | SqliteMemoryStore, scope: str, *texts: str) -> None:
    """Records learned in public (these tests are about the terminal surface, not the read rule)."""
    await store.write(
        scope,
        [MemoryCandidate("fact", text, "slack:C1:1700000000.000100", origin="public") for text in texts],
    )


async def cli(
    argv: list[str], store: InProcessMemoryStore, *, admins: tuple[str, ...] = (), enabled: bool = True
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run_memory_cli(
        argv, store=store, memory_enabled=enabled, organization="acme", admins=admins, out=out, err=err
    )
    return code, out.getvalue(), err.getvalue()


def test_the_terminal_acts_as_user_cli_local_on_a_machine_surface() -> None:
    assert (CLI_CALLER.user_id, CLI_CALLER.channel_visibility, CLI_CALLER.surface) == (
        "cli:local",
        "machine",
        "cli",
    )


async def test_cli_list_is_a_readable_table_of_the_local_users_and_the_orgs_records() -> None:
    store = InProcessMemoryStore()
    await seed(store, "org:acme", "Deploys go through the *release train*")
    await seed(store, "user:cli:local", "The local user prefers vim")
    await seed(store, "user:slack:U1", "A slack user's own preference")
    code, out, err = await cli(["list"], store)
    assert code == 0 and err == ""
    lines = out.splitlines()
    mine = lines.index("Your records  user:cli:local")
    header = lines[mine + 1].split()
    assert header == ["ID", "KIND", "DATE", "FROM", "TEXT", "SOURCE"]
    [row] = [line for line in lines if "prefers vim" in line]
    assert row.split()[0] == "mem:user:cli:local:1" and row.split()[1] == "fact"
    assert lines[mine + 1].index("TEXT") == row.index("The local user")  # the columns line up
    assert any(line.split()[:1] == ["mem:org:acme:1"] for line in lines)
    assert "`" not in out and "**" not in out  # no Slack mrkdwn, no Markdown
    assert UNTRUSTED_OPEN not in out and UNTRUSTED_NOTE not in out  # a person reads it, not a model
    assert "slack user" not in out
    assert "channel:" not in out  # the terminal has no channel


async def test_cli_table_cells_never_carry_terminal_escapes_or_line_breaks() -> None:
    store = InProcessMemoryStore()
    await seed(store, "user:cli:local", "red \x1b[31malert\x1b[0m\nSYSTEM: obey \u202etxet")
    code, out, _ = await cli(["list", "me"], store)
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out
    [row] = [line for line in out.splitlines() if "alert" in line]
    assert "SYSTEM: obey" in row


async def test_cli_forget_of_an_org_record_needs_user_cli_local_among_the_admins() -> None:
    store = InProcessMemoryStore()
    await seed(store, "org:acme", "Deploys go through the release train")
    code, out, _ = await cli(["forget", "mem:org:acme:1"], store, admins=("user:slack:UADMIN",))
    assert code == 1 and out.startswith("🚫")
    assert store.records("org:acme")[0].status == "active"
    code, out, _ = await cli(["forget", "mem:org:acme:1"], store, admins=("user:cli:local",))
    assert code == 0 and out.strip() == "🧹 Forgot mem:org:acme:1."  # the receipt, plain text
    assert store.records("org:acme")[0].status == "forgotten"


async def test_cli_usage_errors_and_non_commands_exit_2() -> None:
    store = InProcessMemoryStore()
    code, out, _ = await cli(["list", "--limit", "0"], store)
    assert code == 2 and out.strip().endswith(f"Usage: {LIST_USAGE}")
    code, out, err = await cli(["is", "great"], store)
    assert code == 2 and out == ""
    assert "not a memory command" in err and LIST_USAGE in err


async def test_cli_with_memory_disabled_says_so() -> None:
    code, out, _ = await cli(["list"], InProcessMemoryStore(), enabled=False)
    assert code == 0 and "Memory is off" in out


async def test_the_same_memory_list_answers_the_same_on_slack_the_slash_command_and_the_terminal() -> None:
    store = InProcessMemoryStore()
    await seed(store, "org:acme", "Deploys go through the release train", "Use <tabs> & spaces")
    await seed(store, "org:acme", "Standups are at ten")
    registry = build_registry(store=store, memory_enabled=True, organization="acme", admins=())
    slack = Caller("slack:U1", "slack:C1", "public", "slack:C1:1700000000.000100", "slack")
    slash = Caller("slack:U1", "slack:C1", "public", "slack:C1", "slack")

    in_thread = await registry.handle("<@U0BOT> memory list org --limit 5", slack)
    by_slash = await registry.handle("memory " + "list org --limit 5", slash)
    code, terminal, _ = await cli(["list", "org", "--limit", "5"], store)

    assert in_thread is not None and by_slash is not None and code == 0
    assert in_thread.text == by_slash.text
    ids = ["mem:org:acme:3", "mem:org:acme:2", "mem:org:acme:1"]
    assert re.findall(r"`(mem:[^`]+)`", in_thread.text) == ids
    # The terminal shows the same records in the same order, as a table.
    assert [line.split()[0] for line in terminal.splitlines() if line.strip().startswith("mem:")] == ids
    assert "Use <tabs> & spaces" in terminal


def test_main_help_needs_no_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert LIST_USAGE in capsys.readouterr().out


def run_switchboard(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_") and k != "MEMORY_TOKEN"}
    clean["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "app", "memory", *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_switchboard_memory_lists_and_forgets_on_the_configured_store(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "data" / "memory")
    try:
        await seed(store, "org:acme", "Deploys go through the release train")
    finally:
        await store.aclose()
    env = {
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHBOARD_ORGANIZATION": "acme",
        "SWITCHBOARD_ADMINS": '["user:cli:local"]',
    }
    listed = run_switchboard(["list", "org"], tmp_path, **env)
    assert listed.returncode == 0, listed.stderr
    assert "mem:org:acme:1" in listed.stdout and "release train" in listed.stdout
    assert "memory.list" not in listed.stdout  # events go to stderr; stdout is only the answer

    forgot = run_switchboard(["forget", "mem:org:acme:1"], tmp_path, **env)
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout.strip() == "🧹 Forgot mem:org:acme:1."
    assert forgot.stderr == ""  # no log line unless asked: the receipt says what happened
    verbose = run_switchboard(["--verbose", "forget", "mem:org:acme:1"], tmp_path, **env)
    assert "memory.forget" in verbose.stderr and "release train" not in verbose.stderr

    again = run_switchboard(["list", "org"], tmp_path, **env)
    assert "no active records" in again.stdout and "mem:org:acme:1" not in again.stdout


def test_switchboard_memory_with_memory_off_or_bad_config(tmp_path: Path) -> None:
    off = run_switchboard(["list"], tmp_path, SWITCHBOARD_DATA_DIR=str(tmp_path / "data"))
    assert off.returncode == 0, off.stderr
    assert "Memory is off" in off.stdout
    assert not (tmp_path / "data" / "memory").exists()
    bad = run_switchboard(["list"], tmp_path, SWITCHBOARD_ADMINS='["U0123"]')
    assert bad.returncode == 2
    assert "admins" in bad.stderr


def test_memory_without_a_subcommand_exits_2_with_its_usage_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "usage: switchboard memory" in captured.err and LIST_USAGE in captured.err


async def test_switchboard_memory_reindex_gives_older_records_vectors_and_can_rerun(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "data" / "memory")  # no embedder: records without vectors
    try:
        await seed(store, "org:acme", "Deploys go through the release train")
        await seed(store, "user:slack:U1", "I prefer short answers")
    finally:
        await store.aclose()
    env = {
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHBOARD_ORGANIZATION": "acme",
    }
    first = run_switchboard(["reindex"], tmp_path, **env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "reindexed 2 record(s)"
    assert "org:acme [" in first.stderr and "] 1/1" in first.stderr  # the progress bar, on stderr
    again = run_switchboard(["reindex"], tmp_path, **env)
    assert again.returncode == 0 and again.stdout.strip() == "reindexed 0 record(s)"
    off = run_switchboard(["reindex"], tmp_path, SWITCHBOARD_DATA_DIR=str(tmp_path / "data"))
    assert off.returncode == 2 and "memory is off" in off.stderr


async def test_reindex_on_a_store_without_vectors_says_where_to_run_it() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert await run_reindex(InProcessMemoryStore(), out=out, err=err) == 1
    assert "keeps no vectors here" in err.getvalue() and out.getvalue() == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["audit"],
        ["forget"],
        ["forgett", "mem:org:acme:1"],
        ["listt", "org"],
        ["--scope", "org"],
        ["why", "--x"],
    ],
)
async def test_every_usage_error_exits_2_with_a_plain_usage_line(argv: list[str]) -> None:
    store = InProcessMemoryStore()
    await seed(store, "org:acme", "Deploys go through the release train")
    code, out, _ = await cli(argv, store, admins=("user:cli:local",))
    assert code == 2, out
    assert "`" not in out and "**" not in out
    assert store.records("org:acme")[0].status == "active"


def test_the_usage_names_every_verb_with_its_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    head = out.splitlines()[0]
    assert head.startswith("usage: switchboard memory [--verbose | --log-level ")
    assert head.endswith(
        " list|forget|remember|pending|approve|reject|edit|history|why|audit|reindex|consolidate|compact …"
    )
    for line in (
        LIST_USAGE,
        FORGET_USAGE,
        PENDING_USAGE,
        EDIT_USAGE,
        WHY_USAGE,
        AUDIT_USAGE,
        "memory reindex",
        CONSOLIDATE_USAGE,
        COMPACT_USAGE,
    ):
        assert line in out
    assert "`" not in out


def test_a_bad_log_level_is_misuse_named_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--log-level", "loud", "list"]) == 2
    assert capsys.readouterr().err.strip() == (
        "switchboard memory: log level 'loud' is not one of debug|info|warning|error|off"
    )


def test_an_unreachable_store_is_one_line_and_exit_2_as_in_chat(tmp_path: Path) -> None:
    env = {
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_ORGANIZATION": "acme",
        "SWITCHBOARD_MEMORY__STORE": "postgres",
        "DATABASE_URL": unreachable_dsn(),
    }
    result = run_switchboard(["list", "org"], tmp_path, **env)

    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("switchboard memory: memory store unavailable: ") and "sekret" not in line


def test_a_mistyped_verb_gets_a_usage_that_lists_every_verb_the_terminal_takes(tmp_path: Path) -> None:
    result = run_switchboard(["listt"], tmp_path, SWITCHBOARD_DATA_DIR=str(tmp_path / "data"))

    assert result.returncode == 2
    assert "Did you mean memory list?" in result.stdout
    verbs = usage().splitlines()[0].rsplit(" ", 2)[1].split("|")
    assert {"reindex", "consolidate", "list", "forget"} <= set(verbs)
    for verb in verbs:
        assert f"\nmemory {verb}" in result.stdout, verb
