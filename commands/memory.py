"""`memory list` and `memory forget`: people see what the bot remembers and make it forget.

Answered from the store without a model turn. Listing is a plain reply and never bumps usage; a
forget mutates durable state, so it is an inline run with a receipt and one `memory.forget` audit
event (caller, id, outcome — never record text).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import structlog

from commands.access import (
    curation_refusal,
    note_curation,
    outside_the_organization,
    parse_id_word,
    refused_as,
    scope_key_of,
    thread_repo,
)
from commands.curate import CurateCommands, register_curate_commands
from commands.erase_person import erase_person, parse_person_arg, render_nobody, render_person_erased
from commands.list_filter import widened_filter
from commands.options import parse_limit, parse_repo, split_options
from commands.plain import TERMINAL_SURFACES, terminal_text
from commands.provenance import (
    Permalinks,
    ProvenanceCommands,
    register_provenance_commands,
)
from commands.registry import Caller, CommandReceipt, CommandRegistry, CommandReply, UsageError
from commands.remember import RememberCommand, WriteGateFor, register_remember_command
from commands.render import MACHINE_SURFACES as MACHINE_SURFACES
from commands.render import UNTRUSTED_CLOSE as UNTRUSTED_CLOSE
from commands.render import UNTRUSTED_NOTE as UNTRUSTED_NOTE
from commands.render import UNTRUSTED_OPEN as UNTRUSTED_OPEN
from commands.render import code_span as _code
from commands.render import is_machine_caller as _is_machine
from commands.render import quoted_text
from commands.render import store_failure as _failure
from commands.transcripts import Transcripts
from memory.rules.person import PersonError, resolve_person
from memory.rules.scope import (
    ScopeKind,
    is_dm_conversation,
)
from memory.rules.scorer import clean_memory_field, query_tokens
from memory.rules.visibility import Reader, may_show
from memory.stores.contract import MemoryStore
from memory.types import MAX_LIMIT, MemoryRecord

log = structlog.get_logger("memory")

MEMORY_LIST_LIMIT = 20
MEMORY_LIST_MAX_LIMIT = MAX_LIMIT

ListScope = Literal["me", "org", "repo", "channel", "all"]
SCOPE_WORDS: tuple[ListScope, ...] = ("me", "org", "repo", "channel", "all")

LIST_USAGE = (
    "memory list [<words>…] [--scope me|org|repo|channel|all] "
    f"[--limit 1-{MEMORY_LIST_MAX_LIMIT}] [--repo owner/name]"
)
FORGET_USAGE = (
    "memory forget <id> | memory forget --user <person> (admins: erase one person everywhere, "
    "by any id they are shown as)"
)
ID_FORMAT = "mem:<scope>:<n>"

# In a terminal the listing is a plain-text table for a person.
TABLE_TEXT_WIDTH = 60

_OPTION = re.compile(r"^-{1,2}[A-Za-z]")
_TYPOGRAPHIC_DASHES = re.compile(r"^[—–]")  # clients turn `--` into an em or en dash
_LIMIT_VALUE = re.compile(r"^[0-9]+$")
_OPTIONS = ("scope", "limit", "repo")

_SECTION_LABELS: dict[ScopeKind, str] = {
    "user": "Your records",
    "repo": "This repo",
    "channel": "This channel",
    "org": "Org",
}


@dataclass(frozen=True, slots=True)
class ListRequest:
    """A parsed `memory list`: which scope(s), how many per scope, the filter, an explicit repo."""

    scope: ListScope = "all"
    limit: int = MEMORY_LIST_LIMIT
    filter: str | None = None
    repo: str | None = None


def parse_list_args(args: Sequence[str]) -> ListRequest:
    """`[<words>…] [--scope S] [--limit N] [--repo owner/name]`, options anywhere, `=` or a space.

    The first word is taken as the scope only when it names one and `--scope` is absent; every
    other word is filter text.
    """
    values, words = split_options(args, _OPTIONS)
    scope = _parse_scope(values["scope"]) if "scope" in values else None
    if scope is None and words and words[0].lower() in SCOPE_WORDS:
        scope = _parse_scope(words.pop(0))
    return ListRequest(
        scope=scope or "all",
        limit=parse_limit(values["limit"], MEMORY_LIST_MAX_LIMIT) if "limit" in values else MEMORY_LIST_LIMIT,
        filter=" ".join(words) if words else None,
        repo=parse_repo(values["repo"]) if "repo" in values else None,
    )


def parse_forget_args(args: Sequence[str]) -> str:
    """Exactly one word, the id (backticks or quotes copied along with it are dropped)."""
    if not args:
        raise UsageError(
            f"`memory forget` needs a record id (ids look like `{ID_FORMAT}`; see `memory list`)."
        )
    if len(args) > 1:
        raise UsageError("`memory forget` takes exactly one record id.")
    return args[0].strip("`'\"“”‘’")


def _parse_scope(value: str) -> ListScope:
    for word in SCOPE_WORDS:
        if value.lower() == word:
            return word
    raise UsageError(f"`--scope` must be one of {', '.join(SCOPE_WORDS)}; got {_code(value)}.")


@dataclass(frozen=True, slots=True)
class _Section:
    kind: ScopeKind
    key: str


@dataclass(frozen=True, slots=True)
class _Listing:
    """Per section: what the reader may see, and how many fetched it may not. `in_dm`: how many of
    those withheld the asker would see in their DM with the bot (none said in a channel shared with
    another organization: the asker may be the other organization's, and the count is the organization's)."""

    pages: tuple[tuple[MemoryRecord, ...], ...]
    fetched: tuple[int, ...]
    withheld: tuple[int, ...]
    in_dm: int


def _reader(caller: Caller) -> Reader:
    """The caller's reader; a surface that gave none is read as a public reply (it shows the least)."""
    return caller.reader or Reader("public", caller.user_id, caller.channel_id)


def _visible(pages: Sequence[Sequence[MemoryRecord]], reader: Reader) -> _Listing:
    """The read rule on every listed record (memory/visibility.py)."""
    in_dm_reader = Reader("self", reader.user_id, None)
    shown = tuple(tuple(r for r in page if may_show(r, reader)) for page in pages)
    in_dm = sum(1 for page in pages for r in page if not may_show(r, reader) and may_show(r, in_dm_reader))
    if reader.audience == "external":
        in_dm = 0
    return _Listing(
        pages=shown,
        fetched=tuple(len(page) for page in pages),
        withheld=tuple(len(page) - len(kept) for page, kept in zip(pages, shown, strict=True)),
        in_dm=in_dm,
    )


class MemoryCommands:
    """The two memory commands over one store, with the installation's org and admins."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        memory_enabled: bool,
        organization: str | None,
        admins: Iterable[str],
        transcripts: Transcripts | None = None,
    ) -> None:
        self._store = store
        self._transcripts = transcripts
        self._enabled = memory_enabled
        self._org_key = scope_key_of("org", organization)
        # User scope keys (`user:slack:U0123`), exactly as settings validates them.
        self._admins = frozenset(a.strip() for a in admins if a.strip())

    def is_admin(self, caller: Caller) -> bool:
        """Fail closed: no identity or no admins configured → nobody."""
        own = scope_key_of("user", caller.user_id)
        return own is not None and own in self._admins

    # ----------------------------------------------------------------------------- memory list

    async def handle_list(self, args: Sequence[str], caller: Caller) -> CommandReply:
        if not self._enabled:
            return CommandReply(
                "🔕 Memory is off (`memory.enabled` is false): nothing is remembered to list."
            )
        request = parse_list_args(args)
        if request.filter is not None and not query_tokens(request.filter):
            return CommandReply(
                f"Nothing listed: the filter {_code(request.filter)} has no words to match "
                "(records match on words of letters and digits, in any of their forms)."
            )
        sections = await self._sections(request, caller)
        if isinstance(sections, CommandReply):
            return sections
        query = widened_filter(request.filter) if request.filter is not None else None
        results = await asyncio.gather(
            *(self._store.list(s.key, request.limit, query=query) for s in sections),
            return_exceptions=True,
        )
        for section, result in zip(sections, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                log.warning("memory.list_failed", scope_key=section.key, error=type(result).__name__)
                return CommandReply(f"⚠️ Couldn't list memory: {_failure(result)}.", ok=False)
        fetched = [r for r in results if not isinstance(r, BaseException)]
        listing = _visible(fetched, _reader(caller))
        log.info(
            "memory.list",
            caller=scope_key_of("user", caller.user_id),
            scopes=[s.key for s in sections],
            counts=[len(p) for p in listing.pages],
            withheld=listing.withheld,
            filtered=request.filter is not None,
        )
        if caller.surface in TERMINAL_SURFACES:  # a person at a terminal: a plain-text table
            return CommandReply(_render_table(sections, listing, request), markdown=False)
        return CommandReply(_render_list(sections, listing, request, machine=_is_machine(caller)))

    async def _sections(self, request: ListRequest, caller: Caller) -> list[_Section] | CommandReply:
        """The scopes this request has, in display order: yours, this repo, this channel, the org."""
        wanted = request.scope
        own = scope_key_of("user", caller.user_id)
        channel = scope_key_of("channel", caller.channel_id)
        if wanted == "me" and own is None:
            return CommandReply(
                "There is no user identity on this surface, so no records are yours.", ok=False
            )
        if wanted == "channel" and channel is None and is_dm_conversation(caller.channel_id):
            return CommandReply(
                "A DM has no channel scope: what you teach me here is yours (`memory list me`).", ok=False
            )
        if wanted == "channel" and channel is None:
            return CommandReply(
                "This conversation is not in a channel, so it has no channel records.", ok=False
            )
        if wanted == "org" and self._org_key is None:
            return CommandReply("No `organization` is configured, so there is no org scope.", ok=False)
        repo: str | None = None
        if wanted in ("repo", "all"):
            repo = request.repo
            if repo is None:
                resolved = await thread_repo(caller, "memory.list_repo_unresolved")
                if isinstance(resolved, BaseException) and wanted == "repo":
                    return CommandReply(
                        f"⚠️ Couldn't look up this thread's repo ({type(resolved).__name__}); "
                        "name one with `--repo owner/name`.",
                        ok=False,
                    )
                repo = resolved if isinstance(resolved, str) else None
            if repo is None and wanted == "repo":
                return CommandReply(
                    "This thread has no bound repo; name one with `memory list repo --repo owner/name`.",
                    ok=False,
                )
        candidates: list[tuple[ListScope, ScopeKind, str | None]] = [
            ("me", "user", own),
            ("repo", "repo", repo),
            ("channel", "channel", channel),
            ("org", "org", self._org_key),
        ]
        sections = [
            _Section(kind, key)
            for word, kind, key in candidates
            if key is not None and wanted in (word, "all")
        ]
        if not sections:
            return CommandReply("Nothing to list: this request has no memory scope.", ok=False)
        return sections

    # --------------------------------------------------------------------------- memory forget

    async def handle_forget(self, args: Sequence[str], caller: Caller) -> CommandReply:
        caller_key = scope_key_of("user", caller.user_id)

        def done(
            text: str, outcome: str, target: str | None, ok: bool = False, usage: bool = False
        ) -> CommandReply:
            log.info(
                "memory.forget",
                caller=caller_key,
                id=target,
                outcome=outcome,
                surface=caller.surface,
                admin=self.is_admin(caller),
            )
            receipt = CommandReceipt("memory.forget", caller_key, target, outcome, ok)
            return CommandReply(text, ok=ok, receipt=receipt, usage_error=usage)

        if not self._enabled:
            return done(
                "🔕 Memory is off (`memory.enabled` is false): there is nothing to forget.", "disabled", None
            )
        if args and _TYPOGRAPHIC_DASHES.sub("--", args[0]).partition("=")[0].lower() == "--user":
            return await self._forget_user(args, caller, caller_key, done)
        try:
            raw = parse_forget_args(args)
        except UsageError as error:
            return done(f"{error}\nUsage: `{FORGET_USAGE}`", "invalid_input", None, usage=True)
        parsed = parse_id_word(raw)
        if parsed is None:
            return done(
                f"🚫 {_code(raw)} is not a memory id: ids look like `{ID_FORMAT}`, "
                "as `memory list` shows them.",
                "invalid_input",
                None,
            )
        scope, target = parsed
        refusal = self._refusal(scope, caller, caller_key)
        if refusal is not None:
            return done(f"🚫 {refusal} Your own records: `memory list me`.", "refused", target)
        try:
            forgotten = await self._store.forget(scope, target)
        except Exception as error:
            log.warning("memory.forget_failed", scope_key=scope, id=target, error=type(error).__name__)
            return done(f"⚠️ Couldn't forget {_code(target)}: {_failure(error)}.", "failed", target)
        if not forgotten:
            return done(
                f"Nothing to forget: {_code(target)} is not an active record (see `memory list`).",
                "not_found",
                target,
            )
        await note_curation(self._store, scope, target, "forgotten", caller)
        return done(f"🧹 Forgot {_code(target)}.", "forgotten", target, ok=True)

    async def _forget_user(
        self,
        args: Sequence[str],
        caller: Caller,
        caller_key: str | None,
        done: Callable[..., CommandReply],
    ) -> CommandReply:
        """A data-subject request: erase one person everywhere (commands/erase_person.py). Admins only,
        fail closed; a name under which nothing is kept is refused."""
        try:
            raw = parse_person_arg(args)
        except UsageError as error:
            return done(f"{error}\nUsage: `{FORGET_USAGE}`", "invalid_input", None, usage=True)
        try:
            person = resolve_person(raw, caller_id=caller.user_id)
        except PersonError as error:
            return done(f"🚫 {error}", "invalid_input", None)
        if not self.is_admin(caller) or outside_the_organization(caller):
            return done(
                f"🚫 Only admins can erase another person's records. {refused_as(caller, admin=True)} "
                "Your own: `memory list me`, then `memory forget <id>`.",
                "refused",
                person,
            )
        erased = await erase_person(self._store, self._transcripts, person)
        if erased.nothing:
            return done(render_nobody(person), "unknown_person", person)
        outcome = "failed" if erased.problem else f"erased:{erased.records}"
        return done(render_person_erased(person, erased), outcome, person, ok=erased.problem is None)

    def _refusal(self, scope: str, caller: Caller, caller_key: str | None) -> str | None:
        """Why this caller may not forget from `scope`, or None when they may."""
        return curation_refusal(
            scope, caller, admin=self.is_admin(caller), org_key=self._org_key, verb="forget"
        )


def register_memory_commands(registry: CommandRegistry, commands: MemoryCommands) -> None:
    registry.add("memory list", LIST_USAGE, commands.handle_list, "what the bot remembers, by scope")
    registry.add("memory forget", FORGET_USAGE, commands.handle_forget, "forget one record by its id")


def build_registry(
    *,
    store: MemoryStore,
    memory_enabled: bool,
    organization: str | None,
    admins: Iterable[str],
    permalinks: Permalinks | None = None,
    write_gate: WriteGateFor | None = None,
    transcripts: Transcripts | None = None,
) -> CommandRegistry:
    """The registry every surface shares: the memory commands, the curating ones (`memory pending`,
    `approve`, `reject`, `edit`, `history`), `memory why` and `memory audit` (`write_gate`: the app's
    policy, which `memory remember` asks; `transcripts`: the terminal's chat threads, which a person's
    erasure deletes)."""
    registry = CommandRegistry()
    commands = MemoryCommands(
        store=store,
        memory_enabled=memory_enabled,
        organization=organization,
        admins=admins,
        transcripts=transcripts,
    )
    register_memory_commands(registry, commands)
    remember = RememberCommand(
        store, memory_enabled, organization, is_admin=commands.is_admin, write_gate=write_gate
    )
    register_remember_command(registry, remember)
    curate = CurateCommands(
        store=store, memory_enabled=memory_enabled, organization=organization, is_admin=commands.is_admin
    )
    register_curate_commands(registry, curate)
    register_provenance_commands(
        registry,
        ProvenanceCommands(
            store=store, memory_enabled=memory_enabled, is_admin=commands.is_admin, permalinks=permalinks
        ),
    )
    return registry


# ------------------------------------------------------------------------------------ rendering


def _render_list(
    sections: Sequence[_Section],
    listing: _Listing,
    request: ListRequest,
    *,
    machine: bool,
) -> str:
    """Markdown, like an agent answer: each surface renders it the way it renders answers."""
    blocks: list[str] = []
    if machine and any(listing.pages):
        blocks.append(UNTRUSTED_NOTE)
    matching = f" — matching {_code(request.filter)}" if request.filter is not None else ""
    rows = zip(sections, listing.pages, listing.fetched, listing.withheld, strict=True)
    for section, records, fetched, withheld in rows:
        lines = [f"**{_SECTION_LABELS[section.kind]}** {_code(section.key)}{matching}"]
        if not records:
            lines.append(
                ("no records this conversation may see" if withheld else "no active records")
                + (" matching the filter" if request.filter is not None else "")
            )
        lines.extend(_render_record(record, machine=machine) for record in records)
        if fetched >= request.limit:
            lines.append(_narrow_hint(section, request))
        blocks.append("\n".join(lines))
    if listing.in_dm:
        blocks.append(_in_dm_note(listing.in_dm))
    return "\n\n".join(blocks)


def _render_table(sections: Sequence[_Section], listing: _Listing, request: ListRequest) -> str:
    """Plain text for a terminal: per scope a heading and aligned columns, no Markdown, no wrappers.

    Every cell is one line with control and format characters gone (no escape sequence from a record
    reaches the terminal), the text cut to fit a line.
    """
    blocks: list[str] = []
    matching = f" — matching {_terminal_cell(request.filter)!r}" if request.filter is not None else ""
    rows = zip(sections, listing.pages, listing.fetched, listing.withheld, strict=True)
    for section, records, fetched, withheld in rows:
        lines = [f"{_SECTION_LABELS[section.kind]}  {_terminal_cell(section.key)}{matching}"]
        if not records:
            lines.append(
                ("  (no records this conversation may see" if withheld else "  (no active records")
                + (" matching the filter)" if request.filter is not None else ")")
            )
        else:
            table = [("ID", "KIND", "DATE", "FROM", "TEXT", "SOURCE")]
            table += [
                (
                    _terminal_cell(r.id),
                    r.kind,
                    datetime.fromtimestamp(r.created_at, tz=UTC).strftime("%Y-%m-%d"),
                    r.origin,
                    _terminal_cell(r.text, TABLE_TEXT_WIDTH),
                    _terminal_cell(r.source_thread_key, 40),
                )
                for r in records
            ]
            widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
            lines += [
                "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                for row in table
            ]
        if fetched >= request.limit:
            lines.append("  " + _narrow_hint(section, request).replace("`", ""))
        blocks.append("\n".join(lines))
    if listing.in_dm:
        blocks.append(_in_dm_note(listing.in_dm).replace("`", ""))
    return "\n\n".join(blocks)


def _terminal_cell(value: str, width: int | None = None) -> str:
    text = terminal_text(clean_memory_field(value))
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _in_dm_note(count: int) -> str:
    records = "record" if count == 1 else "records"
    return (
        f"🔒 {count} more {records} learned in a DM or a private conversation "
        f"{'is' if count == 1 else 'are'} not listed here: send `memory list` to me in a DM to see "
        f"{'it' if count == 1 else 'them'}."
    )


def _render_record(record: MemoryRecord, *, machine: bool) -> str:
    """`- `id` kind · date · `text` · source `thread``: one line, whatever the record holds.

    The text is data, never markup: a code span for people (no links, mentions or formatting a
    poisoned record could smuggle in), an escaped `<untrusted>` wrapper for machine readers.
    """
    text = quoted_text(record.text, machine=machine)
    date = datetime.fromtimestamp(record.created_at, tz=UTC).strftime("%Y-%m-%d")
    source = _code(record.source_thread_key)
    return f"- {_code(record.id)} {record.kind} · {date} · {text} · source {source} · from {record.origin}"


def _narrow_hint(section: _Section, request: ListRequest) -> str:
    word = {"user": "me", "repo": "repo", "channel": "channel", "org": "org"}[section.kind]
    more = (
        f", or raise `--limit` (up to {MEMORY_LIST_MAX_LIMIT})"
        if request.limit < MEMORY_LIST_MAX_LIMIT
        else ""
    )
    return (
        f"(showing the newest {request.limit}; there may be more. Narrow it with words, "
        f"e.g. `memory list {word} deploy`{more}.)"
    )
