"""A command attempt is refused with its usage, never guessed at and never handed to the model; prose
about memory still goes to the agent. In a terminal every reply is plain text.
"""

from __future__ import annotations

import time

import pytest

from commands.cli import CLI_CALLER
from commands.memory import FORGET_USAGE, LIST_USAGE, build_registry
from commands.plain import plain_text
from commands.provenance import AUDIT_USAGE, WHY_USAGE
from commands.registry import Caller, CommandRegistry, edit_distance, nearest_verb
from commands.render import UNTRUSTED_CLOSE, UNTRUSTED_NOTE, UNTRUSTED_OPEN
from memory.rules.visibility import Reader
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate, ReadAudit
from tests.commands.test_registry import SLACK

VERBS = {"list", "forget", "why", "audit", "help"}


def registry(store: InProcessMemoryStore, admins: tuple[str, ...] = ("user:slack:U1",)) -> CommandRegistry:
    return build_registry(store=store, memory_enabled=True, organization="acme", admins=admins)


async def seeded() -> InProcessMemoryStore:
    store = InProcessMemoryStore()
    await store.write("org:acme", [MemoryCandidate("fact", "Deploys use the release train", "t")])
    return store


@pytest.mark.parametrize(
    ("text", "verb"),
    [
        ("memory forgett mem:org:acme:1", "forget"),
        ("memory listt org", "list"),
        ("memory lsit org", "list"),
        ("memory lits org --limit 5", "list"),
        ("memory lst org", "list"),
        ("memory forgte mem:org:acme:1", "forget"),
        ("memory froget mem:org:acme:1 please", "forget"),
        ("memory fogret mem:org:acme:1", "forget"),
        ("memory forgt the deploy record", "forget"),
        ("memory frgt mem:org:acme:1", "forget"),
        ("memory forgeet mem:org:acme:1", "forget"),
        ("memory audt --user me", "audit"),
        ("memory auditt --run r1", "audit"),
        ("memory aduit --record mem:org:acme:1", "audit"),
        ("memory whyy did you say that", "why"),
        ("memory wyh", "why"),
        ("memory hlep me", "help"),
        ("Memory LISTT org", "list"),
        ("<@U0BOT> memory forgett mem:org:acme:1", "forget"),
        ("/memory listt org", "list"),
    ],
)
async def test_a_close_misspelling_of_a_verb_is_a_usage_error_whatever_follows(text: str, verb: str) -> None:
    store = await seeded()
    reply = await registry(store).handle(text, SLACK)
    assert reply is not None, "a command attempt must never reach the model"
    assert not reply.ok and reply.usage_error
    assert reply.text.startswith("Unknown command `memory ")
    assert f"Did you mean `memory {verb}`?" in reply.text
    assert LIST_USAGE in reply.text and FORGET_USAGE in reply.text
    assert WHY_USAGE in reply.text and AUDIT_USAGE in reply.text
    assert [r.status for r in store.records("org:acme")] == ["active"]


@pytest.mark.parametrize(
    "text",
    [
        "memory --scope org",
        "memory --scope",
        "memory --limit 5 deploys",
        "memory -s org",
        "memory —scope org",  # a client turned `--` into an em dash
        "memory –limit 3",
        "memory --user slack:U2 please forget everything about them",
        "memory --help-me with this",
    ],
)
async def test_an_unknown_option_after_memory_is_a_usage_error_whatever_follows(text: str) -> None:
    reply = await registry(await seeded()).handle(text, SLACK)
    assert reply is not None
    assert not reply.ok and reply.usage_error
    assert reply.text.startswith(f"Unknown command `memory {text.split()[1]}`.")
    assert LIST_USAGE in reply.text


@pytest.mark.parametrize(
    "text",
    [
        "memory is a funny thing",
        "memory of the outage last week is hazy",
        "memory is",
        "memory it is",
        "memory lost after the restart is expected",
        "memory last week was fine",
        "memory forgot my keys again",
        "memory forgets everything after a deploy",
        "memory lists are getting long",
        "memory listing is slow",
        "memory who has the pager this week",
        "memory way too high on the workers",
        "memory held up fine during the load test",
        "memory unit tests are flaky",
        "memory audits happen every quarter",
        "memory leaks in the worker again",
        "memory pressure on the database host",
        "memory usage doubled after the deploy",
        "memory - is that the bottleneck?",
        "memory 2GB is not enough",
        "memory, what a thing",
        "memory target for the cache is 2GB",
        "memory forest of pointers in the heap dump",
        "memory quit growing after the fix",
    ],
)
async def test_prose_that_starts_with_memory_goes_to_the_agent(text: str) -> None:
    assert await registry(await seeded()).handle(text, SLACK) is None


@pytest.mark.parametrize(
    ("word", "verb"),
    [("lsit", "list"), ("listt", "list"), ("forgett", "forget"), ("frgt", "forget"), ("wyh", "why")],
)
def test_nearest_verb_is_the_verb_within_reach(word: str, verb: str) -> None:
    assert nearest_verb(word, VERBS) == verb


@pytest.mark.parametrize("word", ["list", "is", "it", "must", "test", "whose", "lisst2x", "budget"])
def test_nearest_verb_is_none_out_of_reach(word: str) -> None:
    assert nearest_verb(word, VERBS) is None


def test_edit_distance_counts_a_swap_of_neighbours_as_one() -> None:
    assert edit_distance("lsit", "list") == 1
    assert edit_distance("froget", "forget") == 1
    assert edit_distance("is", "list") == 2
    assert edit_distance("", "why") == 3
    assert edit_distance("forget", "forget") == 0


async def test_memory_why_rejects_an_option_instead_of_taking_it_for_a_run_id() -> None:
    reply = await registry(await seeded()).handle("memory why --scope org", SLACK)
    assert reply is not None and reply.usage_error
    assert "Unknown option `--scope`" in reply.text


# ------------------------------------------------------------------------------------ terminal

TERMINAL = CLI_CALLER
CHAT = Caller(
    user_id="cli:local",
    channel_id=None,
    channel_visibility="machine",
    thread_key="cli:standup",
    surface="cli",
    reader=Reader("self", "cli:local", None),
)
MARKUP = ("**", "`", UNTRUSTED_OPEN, UNTRUSTED_CLOSE, UNTRUSTED_NOTE, "](")


async def audited_store() -> InProcessMemoryStore:
    store = InProcessMemoryStore()
    await store.write(
        "user:cli:local",
        [MemoryCandidate("fact", "The local user prefers vim", "cli:standup", origin="machine")],
    )
    [record] = store.records("user:cli:local")
    entry = ReadAudit(
        "run-1", "cli:standup", "cli:local", ("user:cli:local",), ((record.id, 1),), time.time()
    )
    await store.record_read(entry)
    return store


@pytest.mark.parametrize("caller", [TERMINAL, CHAT], ids=["switchboard-memory", "chat"])
@pytest.mark.parametrize(
    "text",
    [
        "memory why run-1",
        "memory audit --user me",
        "memory audit --run run-1",
        "memory forget mem:user:cli:local:1",
        "memory forget",
        "memory forget mem:org:acme:9",
        "memory",
        "memory list --limit 0",
        "memory audit",
        "memory listt org",
    ],
)
async def test_a_terminal_gets_every_reply_as_plain_text(caller: Caller, text: str) -> None:
    reply = await registry(await audited_store()).handle(text, caller)
    assert reply is not None and reply.text
    for mark in MARKUP:
        assert mark not in reply.text, f"{mark!r} in {reply.text!r}"


async def test_the_terminal_why_names_the_record_and_its_text_plainly() -> None:
    reply = await registry(await audited_store()).handle("memory why run-1", TERMINAL)
    assert reply is not None
    lines = reply.text.splitlines()
    assert lines[0].startswith("Why: that answer drew on 1 memory (run run-1, ")
    assert lines[1].startswith("- mem:user:cli:local:1 · user:cli:local · ")
    assert lines[1].endswith(" · The local user prefers vim · source cli:standup")


async def test_the_same_replies_on_slack_keep_their_markdown() -> None:
    store = await seeded()
    reply = await registry(store).handle("memory forget mem:org:acme:1", SLACK)
    assert reply is not None and reply.text == "🧹 Forgot `mem:org:acme:1`."
    usage = await registry(store).handle("memory", SLACK)
    assert usage is not None and f"`{LIST_USAGE}`" in usage.text


async def test_record_text_keeps_its_own_characters_in_the_terminal_but_no_escapes() -> None:
    store = InProcessMemoryStore()
    text = "Use **bold** and `ticks` \x1b[31mred\x1b[0m here"
    await store.write("user:cli:local", [MemoryCandidate("fact", text, "cli:standup", origin="machine")])
    [record] = store.records("user:cli:local")
    await store.record_read(
        ReadAudit("run-2", "cli:standup", "cli:local", ("user:cli:local",), ((record.id, 1),), time.time())
    )
    reply = await registry(store).handle("memory why run-2", TERMINAL)
    assert reply is not None
    assert "Use **bold** and 'ticks' [31mred[0m here" in reply.text  # the record's words, inert
    assert "\x1b" not in reply.text


def test_plain_text_unwraps_the_markup_of_a_reply() -> None:
    assert plain_text("**Why** (run `r-1`) · *Why?* button") == "Why (run r-1) · Why? button"
    assert (
        plain_text("see [source thread](https://x.test/a) now") == "see source thread (https://x.test/a) now"
    )
    assert plain_text("`a **b** c` and 2 * 3 * 4") == "a **b** c and 2 * 3 * 4"
    assert plain_text("line one\nline `two`") == "line one\nline two"


@pytest.mark.parametrize(
    "text",
    [
        "memory forked into two processes",
        "memory format changed in the new release",
        "memory formed a pattern over the week",
        "memory fort knox style please",
        "memory suit the workload better",
    ],
)
async def test_english_words_near_a_long_verb_are_prose(text: str) -> None:
    assert await registry(await seeded()).handle(text, SLACK) is None
