"""The options of a command's words, parsed one way for every command that takes them anywhere among
its words (`memory list`, `memory pending`): `--name value` or `--name=value`, each at most once, an
em or en dash read as `--` (chat clients turn `--` into one)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from commands.access import scope_key_of
from commands.registry import UsageError
from commands.render import code_span

_OPTION = re.compile(r"^-{1,2}[A-Za-z]")
_TYPOGRAPHIC_DASHES = re.compile(r"^[—–]")


def split_options(args: Sequence[str], names: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The options by name and the other words, in order; an unknown, repeated or valueless option
    is a usage error naming it."""
    values: dict[str, str] = {}
    words: list[str] = []
    index = 0
    while index < len(args):
        token = _TYPOGRAPHIC_DASHES.sub("--", args[index])
        index += 1
        if not _OPTION.match(token):
            words.append(token)
            continue
        name, has_value, value = token.lstrip("-").partition("=")
        name = name.lower()
        if not token.startswith("--") or name not in names:
            known = ", ".join(f"--{known}" for known in names)
            raise UsageError(f"Unknown option {code_span(token)} (options: {known}).")
        if name in values:
            raise UsageError(f"`--{name}` is given twice.")
        if not has_value:
            if index >= len(args) or _OPTION.match(_TYPOGRAPHIC_DASHES.sub("--", args[index])):
                raise UsageError(f"`--{name}` needs a value.")
            value = args[index]
            index += 1
        values[name] = value
    return values, words


def parse_limit(value: str, most: int) -> int:
    if value.isascii() and value.isdigit() and 1 <= int(value) <= most:
        return int(value)
    raise UsageError(f"`--limit` must be a whole number from 1 to {most}; got {code_span(value)}.")


def parse_repo(value: str) -> str:
    key = scope_key_of("repo", value)
    if key is None:
        raise UsageError(f"`--repo` needs owner/name; got {code_span(value)}.")
    return key
