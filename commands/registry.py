"""The command registry: one grammar per command, answered the same way on every surface.

Surfaces (a Slack message or thread, the `/memory` slash command, `switchboard memory …`,
`switchboard chat`) hand the text and who sent it to `CommandRegistry.handle`; a command is answered
here without a model turn, anything else comes back as None and goes on to the agent.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import structlog

from commands.plain import TERMINAL_SURFACES, plain_text
from memory.rules.visibility import Reader

log = structlog.get_logger("commands")

ThreadRepo = Callable[[], Awaitable[str | None]]

# A Slack mention the surface may have left in front of the command (`<@U0123> memory list`).
_LEADING_MENTION = re.compile(r"^\s*<@[A-Z0-9]+(?:\|[^>]*)?>[\s,:]*")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# What after a group word (`memory …`) is a command attempt, answered with the group's usage and
# never handed to the model (a model once answered "Done, I deleted it." with nothing deleted):
# - an option (`memory --scope org`) or a close misspelling of a verb (`memory forgett mem:org:acme:3`,
#   `memory listt org`), whatever follows;
# - a destructive verb, whatever follows it ("memory purge everything please");
_DESTRUCTIVE_VERBS = _words(
    """delete del rm remove clear erase wipe purge drop reset flush truncate nuke destroy unset
    revoke forgetall deleteall clearall"""
)
# - another command verb with at most _SHORT_TAIL words after it ("memory show all", "memory add x");
_ACTION_VERBS = _words(
    """add create save store remember write put edit update modify change show view display get ls
    search find query grep export import dump undo restore rollback prune rename pin unpin sync reindex
    vacuum compact"""
)
_SHORT_TAIL = 3
# - a lone word: a bare word (`memory zap`) — but not one that reads as prose going on about memory:
#   an inflected word (`memory leaks`, `memory matters`, `memory growing`) or a function word.
_OPTION_LIKE = re.compile(r"^(?:-{1,2}|[—–])[A-Za-z]")  # clients turn `--` into an em or en dash
_BARE_WORD = re.compile(r"^[a-z]+$")
_INFLECTED = ("s", "ing", "ed")
_FUNCTION_WORDS = _words(
    """is was are were be been am has have had can could will would should may might must do does
    did of in on at for from to and or but the a an this that it its"""
)
# A misspelling is a word a few edits from a verb that is not itself a word: two edits (a letter
# doubled, dropped, swapped or wrong) on a verb of five letters or more, one on a shorter verb — two
# edits reach most short English words from a four-letter verb ("is", "it", "must", "test" from
# `list`). These English words lie within that reach of a verb and open prose ("memory lost after the
# restart", "memory forgot my keys", "memory unit tests"): they are never read as misspellings.
_MISSPELLING_EDITS = 2
_SHORT_VERB = 4
_NEAR_VERB_WORDS = _words(
    """last lost lust lest lint lisp lilt lift mist fist gist lit
    who thy shy wry way whey
    held hell helm hemp kelp yelp whelp heap
    forgot forge forged forger forges forgery forgo fore fort forte fret forked formed format former
    forest target corset ferret
    auditor audio adult admit await edit adit aunt unit quit suit
    ending bending blending fending lending mending rending sending spending tending trending vending
    wending depending feeding heeding needing seeding speeding weeding reading heading leading beading
    wedding bedding landing banding handing sanding binding finding minding winding bonding funding
    pinning penning peeling peeking peeping
    improve improved reprove approval
    eject elect erect deject select respect project object reflect deflect detect defect recent
    victory historic exit emit edict"""
)
_VERB_INFLECTIONS = ("s", "es", "ed", "d", "ing")
# Longer messages with any other second word are prose for the agent ("memory is great").
_HELP_WORDS = frozenset({"help", "--help", "-h"})
_OPTION_HELP = frozenset({"--help", "-h"})


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking, from where. `thread_repo` is called lazily, only when a repo is needed; `reader`
    is the surface's `app.audience.reader_for` of the message (the reply's audience)."""

    user_id: str | None
    channel_id: str | None
    channel_visibility: str | None
    thread_key: str
    surface: str
    thread_repo: ThreadRepo | None = None
    # Who will read the reply (memory/visibility.py); None reads as a public reply: it shows the least.
    reader: Reader | None = None


@dataclass(frozen=True, slots=True)
class CommandReceipt:
    """The audit record of an inline run (e.g. a forget): who, what, how it ended. Never text."""

    command: str
    caller: str | None
    id: str | None
    outcome: str
    ok: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class CommandReply:
    """What the surface posts. `receipt` is set only for inline runs that change state."""

    text: str
    ok: bool = True
    receipt: CommandReceipt | None = None
    # The words did not fit a grammar (a terminal exits 2 on it, like any command-line misuse).
    usage_error: bool = False
    # False for a reply already written for a terminal (the `memory list` table).
    markdown: bool = True


class CommandReplyLike(Protocol):
    """What a surface reads of a reply (`CommandReply` is one): the text it posts, and the receipt of an
    inline run that changed state (a forget), else None."""

    @property
    def text(self) -> str: ...

    @property
    def receipt(self) -> Any: ...


class CommandHandler(Protocol):
    """What a surface needs of the registry (`CommandRegistry` is one): the reply to a command, or None
    when the text is not one and goes on to the agent."""

    async def handle(self, text: str, caller: Any) -> CommandReplyLike | None: ...


class CommandSet(CommandHandler, Protocol):
    """A handler that also lists its commands: the `/memory` slash command answers words that are no
    command with the group's usage."""

    def usage(self, group: str | None = None) -> str: ...


class UsageError(ValueError):
    """The words do not fit the command's grammar; the registry answers with its usage line."""


Handler = Callable[[Sequence[str], Caller], Awaitable[CommandReply]]


@dataclass(frozen=True, slots=True)
class Command:
    """One command: its words (`memory list`), its one grammar line, and the handler."""

    name: str
    usage: str
    handler: Handler
    summary: str = ""

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.name.lower().split())


class CommandRegistry:
    """Commands by their leading words; the same text reaches the same handler on every surface."""

    def __init__(self) -> None:
        self._commands: dict[tuple[str, ...], Command] = {}

    def register(self, command: Command) -> Command:
        words = command.words
        if len(words) < 2:
            raise ValueError(f"a command is a group word and a verb (`memory list`), got {command.name!r}")
        if words in self._commands:
            raise ValueError(f"command {command.name!r} is already registered")
        if not command.usage.lower().startswith(" ".join(words)):
            raise ValueError(f"usage of {command.name!r} must start with the command's words")
        self._commands[words] = command
        return command

    def add(self, name: str, usage: str, handler: Handler, summary: str = "") -> Command:
        return self.register(Command(name=name, usage=usage, handler=handler, summary=summary))

    @property
    def commands(self) -> tuple[Command, ...]:
        return tuple(self._commands.values())

    def usage(self, group: str | None = None) -> str:
        """Every usage line (of one group, e.g. `memory`), one per line."""
        chosen = [c for c in self._commands.values() if group is None or c.words[0] == group.lower()]
        return "\n".join(f"`{c.usage}`" + (f" — {c.summary}" if c.summary else "") for c in chosen)

    def match(self, text: str) -> tuple[Command, list[str]] | None:
        """The command the text names and its remaining words, or None (help/prose/unknown)."""
        tokens = _tokens(text)
        if not tokens:
            return None
        head = tokens[0].lower()
        found: tuple[Command, list[str]] | None = None
        for words, command in self._commands.items():
            if words[0] != head or len(words) > len(tokens):
                continue
            if [t.lower() for t in tokens[1 : len(words)]] == list(words[1:]) and (
                found is None or len(words) > len(found[0].words)
            ):
                found = (command, tokens[len(words) :])
        return found

    async def handle(self, text: str, caller: Caller) -> CommandReply | None:
        """Answer a command, or None when the text is not one (the agent answers it); a terminal gets
        the reply as plain text."""
        reply = await self._answer(text, caller)
        if reply is None or not reply.markdown or caller.surface not in TERMINAL_SURFACES:
            return reply
        return replace(reply, text=plain_text(reply.text), markdown=False)

    async def _answer(self, text: str, caller: Caller) -> CommandReply | None:
        tokens = _tokens(text)
        if not tokens:
            return None
        head = tokens[0].lower()
        if not any(words[0] == head for words in self._commands):
            return None
        rest = tokens[1:]
        if not rest or (len(rest) == 1 and rest[0].lower() in _HELP_WORDS):
            return CommandReply(self.usage(head))
        matched = self.match(text)
        if matched is None:
            return self._mistyped(head, rest)
        command, args = matched
        if len(args) == 1 and args[0].lower() in _OPTION_HELP:
            return CommandReply(f"Usage: `{command.usage}`")
        try:
            reply = await command.handler(args, caller)
        except UsageError as error:
            reply = CommandReply(f"{error}\nUsage: `{command.usage}`", ok=False, usage_error=True)
        except Exception as error:  # a command never crashes its surface
            log.warning("command.failed", command=command.name, error=type(error).__name__)
            reply = CommandReply(f"⚠️ `{command.name}` failed ({type(error).__name__}).", ok=False)
        log.info("command.handled", command=command.name, surface=caller.surface, ok=reply.ok)
        return reply

    def _mistyped(self, head: str, rest: list[str]) -> CommandReply | None:
        """`memory forgett …`, `memory --scope org`, `memory delete …`, `memory show all`, `memory zap`
        are usage errors; `memory leaks` and `memory is a funny thing` are prose (see the rules above)."""
        word = rest[0]
        verb = word.lower()
        near = nearest_verb(verb, {words[1] for words in self._commands if words[0] == head} | {"help"})
        destructive = verb in _DESTRUCTIVE_VERBS
        if not (
            destructive
            or _OPTION_LIKE.match(word)
            or (near is not None and not _reads_as_prose(verb, near))
            or (verb in _ACTION_VERBS and len(rest) - 1 <= _SHORT_TAIL)
            or (len(rest) == 1 and _is_bare_verb(verb))
        ):
            return None
        hint = f" Did you mean `{head} {near}`?" if near is not None else ""
        unchanged = " Nothing was changed." if destructive or near == "forget" else ""
        reason = f"Unknown command {_code(head + ' ' + word)}.{unchanged}{hint}"
        log.info("command.unknown", group=head, destructive=destructive)
        return CommandReply(f"{reason}\n{self.usage(head)}", ok=False, usage_error=True)


def nearest_verb(word: str, verbs: Iterable[str]) -> str | None:
    """The verb `word` is a misspelling of: the fewest edits within reach (see above), else None."""
    best: tuple[int, str] | None = None
    for verb in sorted(verbs):
        reach = 1 if len(verb) <= _SHORT_VERB else _MISSPELLING_EDITS
        if abs(len(word) - len(verb)) > reach:  # out of reach by length: no quadratic work on a long word
            continue
        edits = edit_distance(word, verb)
        if 0 < edits <= reach and (best is None or edits < best[0]):
            best = (edits, verb)
    return best[1] if best is not None else None


def edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of two neighbours (`lsit` is one from `list`)."""
    previous: list[int] | None = None
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if previous is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous[j - 2] + 1)
        previous, row = row, current
    return row[len(b)]


def _reads_as_prose(word: str, verb: str) -> bool:
    """A word near a verb that is English of its own: a function word, a listed word, an inflection."""
    return (
        word in _FUNCTION_WORDS
        or word in _NEAR_VERB_WORDS
        or any(word == verb + ending for ending in _VERB_INFLECTIONS)
    )


def _is_bare_verb(word: str) -> bool:
    """A lone lowercase word that is not inflected and not a function word: it reads as a verb."""
    return bool(_BARE_WORD.match(word)) and not word.endswith(_INFLECTED) and word not in _FUNCTION_WORDS


def _tokens(text: str) -> list[str]:
    """Whitespace-split words, a leading mention dropped, `/memory` read as `memory`."""
    tokens = _LEADING_MENTION.sub("", text).split()
    if tokens and tokens[0].startswith("/") and len(tokens[0]) > 1:
        tokens[0] = tokens[0][1:]
    return tokens


def _code(value: str) -> str:
    """User input quoted back as one inline code span that nothing can close early."""
    return "`" + " ".join(value.split()).replace("`", "'") + "`"
