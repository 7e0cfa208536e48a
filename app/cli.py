"""`switchboard <command>`: each command lives in its own module, imported only when it runs.

`--config FILE` is accepted by every command, before the command (`switchboard --config FILE chat`)
or among its options. `chat`, `serve` and `memory-service` parse it themselves; for `memory …`
(whose words after `memory` are the command) it is taken out here, checked, and handed on as
SWITCHBOARD_CONFIG, the variable that names the config file for this process.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from config.settings import CONFIG_ENV, ConfigError, check_config_file

# command → (module with `main(argv) -> int`, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": (
        "app.slack.transports.serve",
        "run the Slack bot (Socket Mode with SLACK_APP_TOKEN, else HTTP on $PORT)",
    ),
    "chat": ("app.terminal.chat", 'talk to the bot in this terminal (--thread NAME "message" for one turn)'),
    "memory": (
        "app.memory_cli",
        "memory list|forget|remember|why|audit|reindex|compact … on the configured store",
    ),
    "memory-service": ("memory.service.main", "serve the memory store over HTTP for several bot processes"),
}
CONFIG_FLAG = "--config"
_PARSES_CONFIG_ITSELF = frozenset({"serve", "chat", "memory-service"})


class UsageError(ValueError):
    """The command line itself is wrong; the message is one line."""


def usage() -> str:
    lines = ["usage: switchboard [--config FILE] <command> [options]", "", "commands:"]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name.ljust(width)}  {help_text}" for name, (_, help_text) in COMMANDS.items()]
    lines += ["", "Run `switchboard <command> --help` for a command's options."]
    return "\n".join(lines)


def take_config(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """`--config FILE` or `--config=FILE` taken out of `args` (none after a `--`): (FILE, the rest)."""
    rest: list[str] = []
    found: str | None = None
    position = 0
    while position < len(args):
        arg = args[position]
        if arg == "--":
            rest += args[position:]
            break
        if arg == CONFIG_FLAG or arg.startswith(CONFIG_FLAG + "="):
            if found is not None:
                raise UsageError(f"{CONFIG_FLAG} is given twice")
            if arg == CONFIG_FLAG:
                position += 1
                if position == len(args) or not args[position]:
                    raise UsageError(f"{CONFIG_FLAG} needs a file: {CONFIG_FLAG} FILE")
                found = args[position]
            else:
                found = arg.partition("=")[2]
                if not found:
                    raise UsageError(f"{CONFIG_FLAG} needs a file: {CONFIG_FLAG}=FILE")
        else:
            rest.append(arg)
        position += 1
    return found, rest


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    leading: list[str] = []
    while args and (args[0] == CONFIG_FLAG or args[0].startswith(CONFIG_FLAG + "=")):
        take = 1 if "=" in args[0] else 2
        leading, args = leading + args[:take], args[take:]
    if not args and leading:  # `--config FILE` and no command: misuse, like argparse
        print(usage(), file=sys.stderr)
        return 2
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"switchboard: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    try:
        rest = _with_config(command, leading, rest)
    except (UsageError, ConfigError) as error:
        print(f"switchboard {command}: {error}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    result: int = module.main(rest)
    return result


def _with_config(command: str, leading: list[str], rest: list[str]) -> list[str]:
    """The command's arguments with a leading `--config` passed on the way that command takes it."""
    given, _ = take_config(leading)
    if command in _PARSES_CONFIG_ITSELF:
        return [CONFIG_FLAG, given, *rest] if given is not None else rest
    own, rest = take_config(rest)
    if given is not None and own is not None:
        raise UsageError(f"{CONFIG_FLAG} is given twice")
    path = given or own
    if path is not None:
        check_config_file(path, CONFIG_FLAG)  # named by --config in any error, as the others say
        os.environ[CONFIG_ENV] = path
    return rest


if __name__ == "__main__":
    sys.exit(main())
