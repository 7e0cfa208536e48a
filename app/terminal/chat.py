"""`switchboard chat`: talk to the bot in a terminal, as `user:cli:local` on a `machine` surface.

    switchboard chat                          interactive; a new thread (its name is printed)
    switchboard chat --thread NAME            interactive, continuing thread NAME
    switchboard chat --thread NAME "message"  answer one message and exit

A thread's history is kept in <data_dir>/chat/<NAME>.json, so a thread continues across invocations.
Commands (`memory list`, `memory forget …`) go through the same registry as in Slack. SIGTERM/SIGINT
stop reading input and let a run in flight finish (and its reply print) before the process exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from app.dispatch import DispatchOutcome
from app.incoming import ChannelVisibility, HistoryTurn, IncomingMessage
from app.runtime import Runtime, credentials_problem, start_runtime
from commands.transcripts import chat_directory, temporary_path, thread_path
from config.settings import ConfigError, Settings, load_settings
from memory.rules.redact import redact_secrets
from ops.log_setup import LEVEL_NAMES, configure_logging
from ops.tracing import configure_tracing, span

USER_ID = "cli:local"
SURFACE = "cli"
VISIBILITY: ChannelVisibility = "machine"
EXIT_WORDS = frozenset({"/exit", "/quit", "exit", "quit"})
_THREAD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class ChatThreads:
    """One JSON file per thread: {"thread": name, "turns": [{"role", "text"}, …]}."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, thread: str) -> Path:
        return thread_path(self.directory, thread)

    def load(self, thread: str) -> tuple[HistoryTurn, ...]:
        path = self.path(thread)
        if not path.is_file():
            return ()
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = data.get("turns", []) if isinstance(data, dict) else []
        return tuple(
            HistoryTurn(role=turn["role"], text=turn["text"])
            for turn in turns
            if isinstance(turn, dict)
            and turn.get("role") in ("user", "assistant")
            and isinstance(turn.get("text"), str)
        )

    def append(self, thread: str, request: str, answer: str) -> None:
        """Both turns go to disk redacted, as memory keeps them: a key pasted into a chat is never
        written out (and so never sent back to the model as history either)."""
        turns = [{"role": t.role, "text": t.text} for t in self.load(thread)]
        turns += [
            {"role": "user", "text": redact_secrets(request)},
            {"role": "assistant", "text": redact_secrets(answer)},
        ]
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(thread)
        temporary = temporary_path(path)
        temporary.write_text(json.dumps({"thread": thread, "turns": turns}, indent=1), encoding="utf-8")
        os.replace(temporary, path)


class TerminalSurface:
    """Answers go to stdout; the status line only to an interactive terminal's stderr."""

    def __init__(self, out: TextIO, status: TextIO | None) -> None:
        self._out = out
        self._status = status

    async def set_status(self, text: str) -> None:
        if self._status is not None:
            self._status.write(f"({text})\n")
            self._status.flush()

    async def send_reply(self, text: str) -> None:
        self._out.write(text.rstrip("\n") + "\n")
        self._out.flush()


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="switchboard chat", description="Talk to the bot in this terminal.")
    parser.add_argument("--thread", help="thread name (letters, digits, . _ -); continues an existing thread")
    parser.add_argument("--config", help="config file (default: switchboard.toml or $SWITCHBOARD_CONFIG)")
    parser.add_argument(
        "--log-level", default=None, help=f"{LEVEL_NAMES} (default off: the answers are the output)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at info (as --log-level info)")
    parser.add_argument("message", nargs="*", help="answer this one message and exit")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.thread is not None and not _THREAD_NAME.match(args.thread):
        print(
            f"switchboard chat: --thread {args.thread!r}: use letters, digits, '.', '_', '-'", file=sys.stderr
        )
        return 2
    level = args.log_level or ("info" if args.verbose else os.environ.get("SWITCHBOARD_LOG_LEVEL") or "off")
    try:
        configure_logging(level, json=False)
    except ValueError as error:
        print(f"switchboard chat: {error}", file=sys.stderr)
        return 2
    configure_tracing(os.environ, "switchboard-chat")
    try:
        settings = load_settings(config_path=args.config)
    except ConfigError as error:
        print(f"switchboard chat: {error}", file=sys.stderr)
        return 2
    problem = credentials_problem(settings)
    if problem is not None:
        print(f"switchboard chat: {problem}", file=sys.stderr)
        return 2
    return asyncio.run(_run(settings, args))


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    try:
        runtime = await start_runtime(settings, github=True)
    except ConfigError as error:
        print(f"switchboard chat: {error}", file=sys.stderr)
        return 2
    threads = ChatThreads(chat_directory(settings.data_dir))
    thread = args.thread or time.strftime("chat-%Y%m%d-%H%M%S")
    runtime.lifecycle.install_signal_handlers()
    try:
        if args.message:
            return await _one_shot(runtime, threads, thread, " ".join(args.message))
        return await _interactive(runtime, threads, thread)
    finally:
        runtime.lifecycle.remove_signal_handlers()
        await runtime.aclose()


async def _turn(
    runtime: Runtime, threads: ChatThreads, thread: str, text: str, surface: TerminalSurface
) -> DispatchOutcome:
    history = await asyncio.to_thread(threads.load, thread)
    message = IncomingMessage(
        text=text,
        thread_key=f"{SURFACE}:{thread}",
        surface=SURFACE,
        user_id=USER_ID,
        channel_id=None,
        channel_visibility=VISIBILITY,
        history=history,
    )
    with span("chat.turn", {"switchboard.surface": message.surface}):
        outcome = await runtime.dispatcher.dispatch(message, surface)
    if outcome.status == "answered" and outcome.reply is not None:
        await asyncio.to_thread(threads.append, thread, text, outcome.reply)
    return outcome


async def _one_shot(runtime: Runtime, threads: ChatThreads, thread: str, text: str) -> int:
    surface = TerminalSurface(sys.stdout, None)
    turn = runtime.dispatcher.track(_turn(runtime, threads, thread, text, surface))
    stop = asyncio.ensure_future(runtime.lifecycle.wait_for_stop())
    try:
        await asyncio.wait({turn, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    drained = await runtime.lifecycle.drain()  # the run (if a signal came first) and post-run tasks
    if not turn.done() or turn.cancelled() or turn.exception() is not None:
        return 1
    outcome: DispatchOutcome = turn.result()
    return 0 if drained and outcome.status in ("answered", "command") else 1


async def _interactive(runtime: Runtime, threads: ChatThreads, thread: str) -> int:
    tty = sys.stdin.isatty()
    surface = TerminalSurface(sys.stdout, sys.stderr if tty else None)
    if tty:
        print(
            f"switchboard chat — thread {thread!r} (resume with --thread {thread}); /exit to leave",
            file=sys.stderr,
        )
    lines = _StdinLines(asyncio.get_running_loop(), prompt="you> " if tty else None)
    stop = asyncio.ensure_future(runtime.lifecycle.wait_for_stop())
    try:
        while True:
            next_line = asyncio.ensure_future(lines.get())
            await asyncio.wait({next_line, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not next_line.done():
                next_line.cancel()
                break
            line = next_line.result()
            if line is None or line.strip() in EXIT_WORDS:
                break
            if not line.strip():
                continue
            turn = runtime.dispatcher.track(_turn(runtime, threads, thread, line.strip(), surface))
            await asyncio.wait({turn, stop}, return_when=asyncio.FIRST_COMPLETED)
            if stop.done():
                break
            if tty:
                print(file=sys.stdout)
    finally:
        stop.cancel()
    drained = await runtime.lifecycle.drain()
    return 0 if drained else 1


class _StdinLines:
    """Lines from stdin, read on a daemon thread so a blocked read never holds up exit."""

    def __init__(self, loop: asyncio.AbstractEventLoop, prompt: str | None) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._prompt = prompt
        self._wanted = threading.Semaphore(0)
        threading.Thread(target=self._read, name="chat-stdin", daemon=True).start()

    async def get(self) -> str | None:
        self._wanted.release()
        return await self._queue.get()

    def _read(self) -> None:
        while True:
            self._wanted.acquire()  # read only when asked, so input typed during a drain is never taken
            try:
                line: Any = input(self._prompt) if self._prompt is not None else sys.stdin.readline()
            except EOFError:
                line = None
            if line == "":
                line = None
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line)
            if line is None:
                return
