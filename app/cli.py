"""`switchboard <command>`: each command lives in its own module, imported only when it runs."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# command → (module with `main(argv) -> int`, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("app.slack.serve", "run the Slack bot (Socket Mode with SLACK_APP_TOKEN, else HTTP on $PORT)"),
    "chat": ("app.terminal.chat", 'talk to the bot in this terminal (--thread NAME "message" for one turn)'),
    "memory": ("commands.cli", "memory list|forget … on the configured store, as user:cli:local"),
    "memory-service": ("memory.service.main", "serve the memory store over HTTP for several bot processes"),
}


def usage() -> str:
    lines = ["usage: switchboard <command> [options]", "", "commands:"]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name.ljust(width)}  {help_text}" for name, (_, help_text) in COMMANDS.items()]
    lines += ["", "Run `switchboard <command> --help` for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"switchboard: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    result: int = module.main(rest)
    return result


if __name__ == "__main__":
    sys.exit(main())
