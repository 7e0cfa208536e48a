"""The command registry: one grammar per command, prose left to the agent, usage errors answered."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from commands.curate import APPROVE_USAGE, EDIT_USAGE, HISTORY_USAGE, PENDING_USAGE, REJECT_USAGE
from commands.memory import FORGET_USAGE, LIST_USAGE, build_registry
from commands.provenance import AUDIT_USAGE, WHY_USAGE
from commands.registry import (
    Caller,
    CommandRegistry,
    CommandReply,
    UsageError,
)
from commands.remember import REMEMBER_USAGE
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate

SLACK = Caller(
    user_id="slack:U1",
    channel_id="slack:C1",
    channel_visibility="public",
    thread_key="slack:C1:1700000000.000100",
    surface="slack",
)


def memory_registry(store: InProcessMemoryStore | None = None) -> CommandRegistry:
    return build_registry(
        store=store or InProcessMemoryStore(),
        memory_enabled=True,
        organization="acme",
        admins=["user:slack:UADMIN"],
    )


@pytest.mark.parametrize(
    "text",
    [
        "what does memory do?",
        "memory is great",
        "Memory is what makes this bot useful, right?",
        "can you memory list for me",
        "I ran memory list yesterday",
        "memory?",
        "memories list",
        "memory listing is slow",
        "",
        "   ",
    ],
)
async def test_prose_that_mentions_memory_is_not_a_command(text: str) -> None:
    assert await memory_registry().handle(text, SLACK) is None


@pytest.mark.parametrize(
    "text",
    [
        "memory list org",
        "Memory List org",
        "MEMORY LIST org",
        "<@U0BOT> memory list org",
        "<@U0BOT|switchboard>: memory list org",
        "/memory list org",
        "  memory   list\torg ",
    ],
)
async def test_a_command_is_its_leading_words_whatever_the_case_mention_or_slash(text: str) -> None:
    store = InProcessMemoryStore()
    await store.write(
        "org:acme", [MemoryCandidate("fact", "Deploys use the release train", "t", origin="public")]
    )
    reply = await memory_registry(store).handle(text, SLACK)
    assert reply is not None
    assert "`mem:org:acme:1`" in reply.text


@pytest.mark.parametrize(
    "text", ["memory", "memory help", "memory --help", "memory -h", "/memory", "memory "]
)
async def test_the_bare_group_word_or_help_answers_with_every_usage_line(text: str) -> None:
    reply = await memory_registry().handle(text, SLACK)
    assert reply is not None and reply.ok
    assert f"`{LIST_USAGE}`" in reply.text
    assert f"`{FORGET_USAGE}`" in reply.text


async def test_command_help_option_answers_with_that_commands_usage_line() -> None:
    reply = await memory_registry().handle("memory list --help", SLACK)
    assert reply is not None and reply.ok
    assert reply.text == f"Usage: `{LIST_USAGE}`"


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("memory lsit", "Did you mean `memory list`?"),
        ("memory forgot", "Did you mean `memory forget`?"),
        ("memory --scope", ""),
    ],
)
async def test_a_mistyped_verb_or_a_lone_option_is_a_usage_error_naming_the_commands(
    text: str, hint: str
) -> None:
    reply = await memory_registry().handle(text, SLACK)
    assert reply is not None
    assert not reply.ok
    assert reply.text.startswith(f"Unknown command `{text}`.")
    assert hint in reply.text
    assert LIST_USAGE in reply.text and FORGET_USAGE in reply.text


@pytest.mark.parametrize(
    "text",
    [
        "memory leaks",
        "memory matters",
        "memory growing",
        "memory is",
        "memory usage on the workers doubled after the deploy",
        "memory dump from the crash is in the bucket",
        "memory show me what the team decided about deploys last quarter",
    ],
)
async def test_prose_that_starts_with_memory_still_reaches_the_agent(text: str) -> None:
    assert await memory_registry().handle(text, SLACK) is None


@pytest.mark.parametrize(
    "text",
    [
        "memory delete mem:org:acme:1",
        "memory remove all of my records from the org scope right now please",
        "memory clear",
        "memory erase everything",
        "Memory purge everything please",
        "memory wipe",
        "/memory rm mem:org:acme:1",
        "<@U0BOT> memory drop org",
    ],
)
async def test_a_destructive_verb_after_memory_is_a_usage_error_and_changes_nothing(text: str) -> None:
    store = InProcessMemoryStore()
    await store.write("org:acme", [MemoryCandidate("fact", "Deploys use the release train", "t")])
    reply = await memory_registry(store).handle(text, SLACK)
    assert reply is not None, "a destructive verb must never reach the model"
    assert not reply.ok
    assert reply.text.startswith("Unknown command `memory ")
    assert "Nothing was changed." in reply.text
    assert LIST_USAGE in reply.text and FORGET_USAGE in reply.text
    assert [r.status for r in store.records("org:acme")] == ["active"]


@pytest.mark.parametrize(
    "text", ["memory zap", "memory show all", "memory add deploys on tuesday", "memory search"]
)
async def test_any_other_verb_or_lone_word_after_memory_is_a_usage_error_listing_the_verbs(text: str) -> None:
    reply = await memory_registry().handle(text, SLACK)
    assert reply is not None
    assert not reply.ok
    assert reply.text.startswith(f"Unknown command `{' '.join(text.split()[:2])}`.")
    assert "Nothing was changed." not in reply.text
    assert LIST_USAGE in reply.text and FORGET_USAGE in reply.text


async def test_a_usage_error_is_answered_with_the_commands_one_usage_line() -> None:
    async def strict(args: Sequence[str], caller: Caller) -> CommandReply:
        raise UsageError("`ping pong` takes no words.")

    registry = CommandRegistry()
    registry.add("ping pong", "ping pong", strict)
    reply = await registry.handle("ping pong now", SLACK)
    assert reply == CommandReply(
        "`ping pong` takes no words.\nUsage: `ping pong`", ok=False, usage_error=True
    )


async def test_a_handler_that_raises_becomes_a_warning_line_never_a_crash() -> None:
    async def broken(args: Sequence[str], caller: Caller) -> CommandReply:
        raise RuntimeError("boom")

    registry = CommandRegistry()
    registry.add("ping pong", "ping pong", broken)
    reply = await registry.handle("ping pong", SLACK)
    assert reply is not None
    assert not reply.ok
    assert reply.text.startswith("⚠️")
    assert "boom" not in reply.text


async def test_the_handler_gets_the_remaining_words_and_the_caller() -> None:
    seen: list[tuple[list[str], Caller]] = []

    async def record(args: Sequence[str], caller: Caller) -> CommandReply:
        seen.append((list(args), caller))
        return CommandReply("ok")

    registry = CommandRegistry()
    registry.add("ping pong", "ping pong [<words>…]", record)
    await registry.handle("<@U0BOT> Ping PONG Hello  World", SLACK)
    assert seen == [(["Hello", "World"], SLACK)]


async def test_the_longest_registered_words_win() -> None:
    async def short(args: Sequence[str], caller: Caller) -> CommandReply:
        return CommandReply("short " + " ".join(args))

    async def long(args: Sequence[str], caller: Caller) -> CommandReply:
        return CommandReply("long " + " ".join(args))

    registry = CommandRegistry()
    registry.add("repo list", "repo list [<words>…]", short)
    registry.add("repo list all", "repo list all", long)
    assert await registry.handle("repo list all x", SLACK) == CommandReply("long x")
    assert await registry.handle("repo list mine", SLACK) == CommandReply("short mine")


def test_registering_checks_names_and_usage_lines() -> None:
    async def noop(args: Sequence[str], caller: Caller) -> CommandReply:
        return CommandReply("")

    registry = CommandRegistry()
    registry.add("ping pong", "ping pong", noop)
    with pytest.raises(ValueError, match="already registered"):
        registry.add("ping pong", "ping pong", noop)
    with pytest.raises(ValueError, match="group word and a verb"):
        registry.add("ping", "ping", noop)
    with pytest.raises(ValueError, match="must start with"):
        registry.add("ping ding", "pong ding", noop)


def test_build_registry_registers_the_memory_commands_with_one_usage_line_each() -> None:
    registry = memory_registry()
    assert {c.name: c.usage for c in registry.commands} == {
        "memory list": LIST_USAGE,
        "memory forget": FORGET_USAGE,
        "memory remember": REMEMBER_USAGE,
        "memory pending": PENDING_USAGE,
        "memory approve": APPROVE_USAGE,
        "memory reject": REJECT_USAGE,
        "memory edit": EDIT_USAGE,
        "memory history": HISTORY_USAGE,
        "memory why": WHY_USAGE,
        "memory audit": AUDIT_USAGE,
    }
    assert LIST_USAGE == (
        "memory list [<words>…] [--scope me|org|repo|channel|all] [--limit 1-50] [--repo owner/name]"
    )


async def test_the_slash_command_text_reaches_the_same_command_as_a_message() -> None:
    store = InProcessMemoryStore()
    await store.write(
        "org:acme", [MemoryCandidate("fact", "Deploys use the release train", "t", origin="public")]
    )
    registry = memory_registry(store)
    as_message = await registry.handle("memory list org", SLACK)
    as_slash = await registry.handle("memory " + "list org", SLACK)
    empty_slash = await registry.handle("memory " + "", SLACK)
    assert as_message is not None and as_message == as_slash
    assert empty_slash is not None and LIST_USAGE in empty_slash.text


async def test_forget_is_an_inline_run_with_a_receipt_and_list_is_a_plain_reply() -> None:
    store = InProcessMemoryStore()
    await store.write(
        "user:slack:U1", [MemoryCandidate("fact", "This user likes tabs", "t", origin="public")]
    )
    registry = memory_registry(store)
    listed = await registry.handle("memory list", SLACK)
    forgot = await registry.handle("memory forget mem:user:slack:U1:1", SLACK)
    assert listed is not None and listed.receipt is None
    assert forgot is not None and forgot.receipt is not None
    assert forgot.receipt.as_dict() == {
        "command": "memory.forget",
        "caller": "user:slack:U1",
        "id": "mem:user:slack:U1:1",
        "outcome": "forgotten",
        "ok": True,
    }


def test_caller_is_a_frozen_value_with_an_optional_lazy_repo_lookup() -> None:
    assert SLACK.thread_repo is None
    with pytest.raises(AttributeError):
        SLACK.user_id = "slack:U2"  # type: ignore[misc]
