"""`switchboard memory list|forget|remember …`: the memory commands in a terminal, as `user:cli:local`.

The same registry as Slack and chat answers: the terminal is just another surface. It acts on the
configured store and is an admin only when `admins` lists `user:cli:local`. `switchboard memory` is
started by the app (app/memory_cli.py), which lends it the write policy `memory remember` asks.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from commands.compact import COMPACT_USAGE, run_compact
from commands.consolidate import CONSOLIDATE_USAGE, run_consolidate
from commands.memory import build_registry
from commands.plain import plain_text
from commands.registry import Caller, CommandRegistry, CommandReply, Handler
from commands.reindex import run_reindex
from commands.remember import WriteGateFor
from commands.transcripts import ChatTranscripts, Transcripts
from memory.rules.visibility import Reader
from memory.stores.contract import MemoryStore
from memory.stores.null import NullMemoryStore
from ops.exit_codes import EXIT_UNUSABLE
from ops.log_setup import LEVEL_NAMES, configure_logging

CLI_USER_ID = "cli:local"
CLI_READER = Reader("self", CLI_USER_ID, None)  # the terminal is the local user's own
CLI_CALLER = Caller(
    user_id=CLI_USER_ID,
    channel_id=None,
    channel_visibility="machine",
    thread_key="cli:memory",
    surface="cli",
    reader=CLI_READER,
)
_HELP = frozenset({"-h", "--help", "help"})
_VERBOSE = frozenset({"--verbose", "-v"})
LOG_LEVEL_ENV = "SWITCHBOARD_LOG_LEVEL"
# The terminal's own verbs, run on the configured store itself rather than through the registry's
# handlers, but registered in the terminal's registry (usage → summary), so every usage the terminal
# prints — `--help`, a mistyped verb — lists them with the rest and cannot leave one out.
REINDEX_USAGE = "memory reindex — give older records their vectors (progress on stderr; safe to rerun)"
TERMINAL_VERBS: dict[str, str] = {
    "reindex": REINDEX_USAGE,
    "consolidate": CONSOLIDATE_USAGE,
    "compact": COMPACT_USAGE,
}
_STORE_VERBS = frozenset(TERMINAL_VERBS)


async def run_memory_cli(
    argv: Sequence[str],
    *,
    store: MemoryStore,
    memory_enabled: bool,
    organization: str | None,
    admins: Iterable[str],
    out: TextIO,
    err: TextIO | None = None,
    write_gate: WriteGateFor | None = None,
    transcripts: Transcripts | None = None,
) -> int:
    """Answer one `memory …` command on `store`; 0 when it did what was asked, 1 when not, 2 on misuse."""
    registry = terminal_registry(
        store=store,
        memory_enabled=memory_enabled,
        organization=organization,
        admins=admins,
        write_gate=write_gate,
        transcripts=transcripts,
    )
    reply = await registry.handle(" ".join(["memory", *argv]), CLI_CALLER)
    if reply is None:
        print(f"switchboard memory: not a memory command: {' '.join(argv)}", file=err or sys.stderr)
        print(plain_text(registry.usage("memory")), file=err or sys.stderr)
        return 2
    print(reply.text, file=out)
    return 2 if reply.usage_error else 0 if reply.ok else 1


def terminal_registry(**parts: Any) -> CommandRegistry:
    """The registry every surface shares (`build_registry`'s `parts`), with the terminal's own verbs."""
    registry = build_registry(**parts)
    for verb, line in TERMINAL_VERBS.items():
        usage, _, summary = line.partition(" — ")
        registry.add(f"memory {verb}", usage, _run_from_the_terminal(verb), summary)
    return registry


def _run_from_the_terminal(verb: str) -> Handler:
    async def handler(args: Sequence[str], caller: Caller) -> CommandReply:
        return CommandReply(f"`memory {verb}` runs in a terminal: `switchboard memory {verb}`.", ok=False)

    return handler


def main(argv: list[str], *, write_gate: WriteGateFor | None = None) -> int:
    """`switchboard memory …`: load the settings, open the configured store, answer, close it."""
    try:
        argv, level = _log_options(argv)
        configure_logging(level, json=False)  # nothing is logged unless asked: the reply says it all
    except ValueError as error:
        print(f"switchboard memory: {error}", file=sys.stderr)
        return 2
    if not argv or (len(argv) == 1 and argv[0] in _HELP):
        if not argv:  # a missing subcommand is misuse: usage on stderr, exit 2 (like argparse)
            print(usage(), file=sys.stderr)
            return 2
        print(usage())
        return 0
    return asyncio.run(_main(argv, write_gate))


def usage() -> str:
    """Every verb, each with its usage line, from the terminal's registry."""
    registry = terminal_registry(store=NullMemoryStore(), memory_enabled=False, organization=None, admins=())
    verbs = [command.words[1] for command in registry.commands if command.words[0] == "memory"]
    head = f"usage: switchboard memory [--verbose | --log-level {LEVEL_NAMES}] {'|'.join(verbs)} …"
    return "\n".join([head, plain_text(registry.usage("memory"))])


def _log_options(argv: Sequence[str]) -> tuple[list[str], str]:
    """The words without `--verbose`/`-v` and `--log-level L`, and the level they (or
    SWITCHBOARD_LOG_LEVEL) ask for; `off` when nothing asks."""
    rest: list[str] = []
    level = os.environ.get(LOG_LEVEL_ENV) or "off"
    words = iter(argv)
    for word in words:
        name, has_value, value = word.partition("=")
        if word in _VERBOSE:
            level = "info"
        elif name == "--log-level":
            level = value if has_value else next(words, "")
            if not level:
                raise ValueError("--log-level needs a value")
        else:
            rest.append(word)
    return rest, level


async def _main(argv: list[str], write_gate: WriteGateFor | None) -> int:
    # Imported here so `--help` works even where the settings cannot load.
    from config.settings import ConfigError, load_settings
    from memory.stores.build import MemoryConfigError, build_memory_store, open_memory_store
    from memory.types import MemoryStoreError

    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"switchboard memory: {error}", file=sys.stderr)
        return 2
    enabled = settings.memory.enabled
    try:
        store = build_memory_store(settings) if enabled else NullMemoryStore()
    except (MemoryConfigError, ValueError, OSError) as error:
        print(f"switchboard memory: config error: {error}", file=sys.stderr)
        return EXIT_UNUSABLE  # a refusal at start-up, as in every other mode
    try:
        await open_memory_store(store)
    except MemoryStoreError as error:  # the same line and code as `chat` and `serve`
        print(f"switchboard memory: memory store unavailable: {error}", file=sys.stderr)
        await store.aclose()
        return EXIT_UNUSABLE
    try:
        if argv[0] in _STORE_VERBS:
            if not enabled:
                print(
                    f"switchboard memory {argv[0]}: memory is off (memory.enabled = false)", file=sys.stderr
                )
                return EXIT_UNUSABLE  # configuration, as every start-up refusal
            if argv[0] == "reindex":
                return await run_reindex(store, out=sys.stdout, err=sys.stderr)
            if argv[0] == "compact":
                return await run_compact(store, out=sys.stdout, err=sys.stderr)
            return await run_consolidate(store, argv[1:], reader=CLI_READER, out=sys.stdout, err=sys.stderr)
        return await run_memory_cli(
            argv,
            store=store,
            memory_enabled=enabled,
            organization=settings.organization,
            admins=settings.admins,
            out=sys.stdout,
            write_gate=write_gate,
            transcripts=ChatTranscripts(settings.data_dir),
        )
    finally:
        await store.aclose()
