"""`switchboard memory list|forget …`: the memory commands in a terminal, as `user:cli:local`.

The same registry as Slack and chat answers: the terminal is just another surface. It acts on the
configured store and is an admin only when `admins` lists `user:cli:local`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

import structlog

from commands.memory import build_registry
from commands.registry import Caller
from commands.reindex import run_reindex
from memory.rules.visibility import Reader
from memory.stores.in_process import NullMemoryStore
from memory.types import MemoryStore

CLI_USER_ID = "cli:local"
CLI_CALLER = Caller(
    user_id=CLI_USER_ID,
    channel_id=None,
    channel_visibility="machine",
    thread_key="cli:memory",
    surface="cli",
    reader=Reader("self", CLI_USER_ID, None),  # the terminal is the local user's own
)
_HELP = frozenset({"-h", "--help", "help"})
# Info events a terminal user should still see: the audit trail of what they changed.
_AUDIT_EVENTS = frozenset({"memory.forget"})


async def run_memory_cli(
    argv: Sequence[str],
    *,
    store: MemoryStore,
    memory_enabled: bool,
    organization: str | None,
    admins: Iterable[str],
    out: TextIO,
    err: TextIO | None = None,
) -> int:
    """Answer one `memory …` command on `store`; 0 when it did what was asked, 1 when not, 2 on misuse."""
    registry = build_registry(
        store=store, memory_enabled=memory_enabled, organization=organization, admins=admins
    )
    reply = await registry.handle(" ".join(["memory", *argv]), CLI_CALLER)
    if reply is None:
        print(f"switchboard memory: not a memory command: {' '.join(argv)}", file=err or sys.stderr)
        print(registry.usage("memory"), file=err or sys.stderr)
        return 2
    print(reply.text, file=out)
    return 0 if reply.ok else 1


def main(argv: list[str]) -> int:
    """`switchboard memory …`: load the settings, open the configured store, answer, close it."""
    if not argv or (len(argv) == 1 and argv[0] in _HELP):
        registry = build_registry(store=NullMemoryStore(), memory_enabled=False, organization=None, admins=())
        usage = (
            "usage: switchboard memory list|forget|reindex …\n"
            + registry.usage("memory")
            + "\n  memory reindex — give older records their vectors (progress on stderr; safe to rerun)"
        )
        if not argv:  # a missing subcommand is misuse: usage on stderr, exit 2 (like argparse)
            print(usage, file=sys.stderr)
            return 2
        print(usage)
        return 0
    _log_to_stderr()
    return asyncio.run(_main(argv))


def _log_to_stderr() -> None:
    """Stdout carries only the answer (scriptable); warnings and the forget audit go to stderr."""
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[
            _audit_and_warnings_only,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


async def _main(argv: list[str]) -> int:
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
        print(f"⚠️ switchboard memory: cannot open the memory store: {error}", file=sys.stderr)
        return 1
    try:
        await open_memory_store(store)
    except MemoryStoreError as error:
        print(f"⚠️ switchboard memory: cannot open the memory store: {error}", file=sys.stderr)
        await store.aclose()
        return 1
    try:
        if argv[0] == "reindex":
            if not enabled:
                print("switchboard memory reindex: memory is off (memory.enabled = false)", file=sys.stderr)
                return 1
            return await run_reindex(store, out=sys.stdout, err=sys.stderr)
        return await run_memory_cli(
            argv,
            store=store,
            memory_enabled=enabled,
            organization=settings.organization,
            admins=settings.admins,
            out=sys.stdout,
        )
    finally:
        await store.aclose()


def _audit_and_warnings_only(
    logger: object, method_name: str, event_dict: structlog.types.EventDict
) -> structlog.types.EventDict:
    if method_name in ("debug", "info") and event_dict.get("event") not in _AUDIT_EVENTS:
        raise structlog.DropEvent
    return event_dict
