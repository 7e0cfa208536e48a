"""`memory pending|approve|reject|edit|history`: people curate what enters shared memory.

Under `memory.review = "shared"` what reflection learns for the org, a repo or a channel waits as a
pending record: admins see it with `memory pending`, make it active with `memory approve` or erase it
with `memory reject`. `memory edit` gives a record a new version (the owner of a user scope, admins
for the shared ones) and `memory history` shows every version of a record to whoever may see it.
Approve, reject and edit change durable state: each is an inline run with a receipt and one
`memory.<verb>` event (ids and counts, never text); the store appends the curation entries.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog

from commands.access import actor_of, curation_refusal, refused_as, require_id, scope_key_of, thread_repo
from commands.curate_render import (
    HIDDEN,
    NOT_CURATING,
    PendingSection,
    render_history,
    render_pending,
    version_visible,
)
from commands.options import parse_limit, parse_repo, split_options
from commands.provenance import reader_for
from commands.registry import Caller, CommandReceipt, CommandRegistry, CommandReply, UsageError
from commands.remember import NARROW_WHERE, check_text, dashed, said_in
from commands.render import code_span, is_machine_caller, quoted_text, store_failure
from commands.replaced import as_shown, replaced_record, replaced_records
from memory.rules.redact import REDACTED
from memory.rules.scope import scope_kind
from memory.rules.visibility import (
    CONVERSATION_ORIGINS,
    OPEN_ORIGINS,
    may_show,
    origin_from_visibility,
    shown_to_anyone,
)
from memory.stores.contract import CuratedStore, MemoryStore
from memory.types import MAX_LIMIT, MemoryRecord, RecordVersion

log = structlog.get_logger("memory")

PENDING_USAGE = (
    "memory pending [--scope org|repo|channel|all] [--repo owner/name] [--channel <channel id>] "
    f"[--limit 1-{MAX_LIMIT}] (admins)"
)
APPROVE_USAGE = "memory approve <id> (admins)"
REJECT_USAGE = "memory reject <id> (admins; erases it)"
EDIT_USAGE = "memory edit <id> [--] <text> (your own records; shared scopes: admins)"
HISTORY_USAGE = "memory history <id>"
PENDING_LIMIT = 20

PendingScope = Literal["org", "repo", "channel", "all"]
PENDING_SCOPES: tuple[PendingScope, ...] = ("org", "repo", "channel", "all")

_OPTION = re.compile(r"^-{1,2}[A-Za-z]")
_PENDING_OPTIONS = ("scope", "repo", "channel", "limit")
_OFF = "🔕 Memory is off (`memory.enabled` is false): "
IsAdmin = Callable[[Caller], bool]


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A parsed `memory pending`: which shared scope(s), an explicit repo, how many per scope."""

    scope: PendingScope = "all"
    repo: str | None = None
    channel: str | None = None
    limit: int = PENDING_LIMIT


@dataclass(frozen=True, slots=True)
class EditRequest:
    """A parsed `memory edit`: the record (its scope and id) and the new words."""

    scope: str
    id: str
    text: str


def parse_pending_args(args: Sequence[str]) -> PendingRequest:
    """`[org|repo|channel|all] [--scope S] [--repo owner/name] [--channel C] [--limit N]`, `=` or a
    space; `--channel` names a channel as `--repo` names a repo (a terminal is in none)."""
    values, words = split_options(args, _PENDING_OPTIONS)
    if words and "scope" not in values and len(words) == 1:
        values["scope"] = words.pop()
    if words:
        raise UsageError(f"`memory pending` takes no words; got {code_span(' '.join(words))}.")
    return PendingRequest(
        scope=_pending_scope(values.get("scope", "all")),
        repo=parse_repo(values["repo"]) if "repo" in values else None,
        channel=_channel(values["channel"]) if "channel" in values else None,
        limit=parse_limit(values["limit"], MAX_LIMIT) if "limit" in values else PENDING_LIMIT,
    )


def parse_edit_args(args: Sequence[str]) -> EditRequest:
    """`<id> [--] <text…>`: the id first; `--` lets the text start with a dash."""
    scope, target = require_id(list(args), "memory edit")
    rest = list(args[1:])
    if rest and dashed(rest[0]) == "--":
        rest = rest[1:]
    elif rest and _OPTION.match(dashed(rest[0])):
        raise UsageError(
            f"Unknown option {code_span(rest[0])} (`memory edit` has none; "
            "put `--` before a text that starts with a dash)."
        )
    if not rest:
        raise UsageError("`memory edit` needs the new text after the id.")
    return EditRequest(scope, target, " ".join(rest))


def _channel(value: str) -> str:
    value = value.strip("`'\"“”‘’")
    key = scope_key_of("channel", value) if ":" in value else None  # namespaced, as every channel id is
    if key is None:
        raise UsageError(f"`--channel` needs a channel id like `slack:C0123`; got {code_span(value)}.")
    return key


def parse_one_id(args: Sequence[str], command: str) -> tuple[str, str]:
    """Exactly one word, a record id: its scope and its canonical form."""
    if len(args) > 1:
        raise UsageError(f"`{command}` takes exactly one record id.")
    return require_id(list(args), command)


def _pending_scope(value: str) -> PendingScope:
    for word in PENDING_SCOPES:
        if value.lower() == word:
            return word
    raise UsageError(f"`--scope` must be one of {', '.join(PENDING_SCOPES)}; got {code_span(value)}.")


@dataclass(frozen=True, slots=True)
class _Act:
    """One command's answer, its `memory.<verb>` event and (for a change) its receipt."""

    event: str
    caller: str | None
    surface: str
    admin: bool
    changes: bool

    def reply(
        self, text: str, outcome: str, record: str | None = None, *, ok: bool = False, **details: object
    ) -> CommandReply:
        log.info(
            self.event,
            caller=self.caller,
            id=record,
            outcome=outcome,
            surface=self.surface,
            admin=self.admin,
            **details,
        )
        receipt = CommandReceipt(self.event, self.caller, record, outcome, ok) if self.changes else None
        return CommandReply(text, ok=ok, receipt=receipt)


class CurateCommands:
    """The review queue, edits and history over one store, with the installation's org and admins."""

    def __init__(
        self, *, store: MemoryStore, memory_enabled: bool, organization: str | None, is_admin: IsAdmin
    ) -> None:
        self._store = store
        self._enabled = memory_enabled
        self._org_key = scope_key_of("org", organization)
        self._is_admin = is_admin

    def _act(self, verb: str, caller: Caller, *, changes: bool = True) -> _Act:
        key = scope_key_of("user", caller.user_id)
        return _Act(f"memory.{verb}", key, caller.surface, self._is_admin(caller), changes)

    def _curating(self) -> CuratedStore | None:
        return self._store.curation()

    # ---------------------------------------------------------------------------- memory pending

    async def handle_pending(self, args: Sequence[str], caller: Caller) -> CommandReply:
        act = self._act("pending", caller, changes=False)
        if not self._enabled:
            return act.reply(_OFF + "nothing waits for review.", "disabled", ok=True)
        request = parse_pending_args(args)
        if not act.admin:
            refusal = f"🚫 Only admins review what waits for shared memory. {refused_as(caller, admin=True)}"
            return act.reply(refusal, "refused")
        store = self._curating()
        if store is None:
            return act.reply(f"⚠️ {NOT_CURATING}", "unsupported")
        keys = await self._pending_scopes(request, caller)
        if isinstance(keys, str):
            return act.reply(keys, "invalid_input")
        results = await asyncio.gather(
            *(store.pending(key, request.limit) for key in keys), return_exceptions=True
        )
        reader = reader_for(caller)
        sections: list[PendingSection] = []
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                log.warning("memory.pending_failed", scope_key=key, error=type(result).__name__)
                return act.reply(f"⚠️ Couldn't list what waits for review: {store_failure(result)}.", "failed")
            shown = tuple(r for r in result if may_show(r, reader))
            try:
                replaces = as_shown(await replaced_records(store, key, shown), reader)
            except Exception as error:
                log.warning("memory.pending_failed", scope_key=key, error=type(error).__name__)
                return act.reply(
                    f"⚠️ Couldn't read what the waiting records replace: {store_failure(error)}.", "failed"
                )
            full = len(result) >= request.limit
            sections.append(PendingSection(key, shown, len(result) - len(shown), full, replaces))
        text = render_pending(sections, request.limit, machine=is_machine_caller(caller))
        counts = [len(s.records) for s in sections]
        return act.reply(
            text, "listed", ok=True, scopes=list(keys), counts=counts, withheld=[s.withheld for s in sections]
        )

    async def _pending_scopes(self, request: PendingRequest, caller: Caller) -> list[str] | str:
        """The shared scopes asked for, in display order (repo, channel, org); else why there are none."""
        wanted = request.scope
        channel = request.channel or scope_key_of("channel", caller.channel_id)
        repo = request.repo
        if repo is None and wanted in ("repo", "all"):
            found = await thread_repo(caller, "memory.pending_repo_unresolved")
            if isinstance(found, BaseException) and wanted == "repo":
                return (
                    f"⚠️ Couldn't look up this thread's repo ({type(found).__name__}); "
                    "name one with `--repo owner/name`."
                )
            repo = found if isinstance(found, str) else None
        if wanted == "repo" and repo is None:
            return "This thread has no bound repo; name one with `memory pending repo --repo owner/name`."
        if wanted == "channel" and channel is None:
            return "This conversation is in no channel; name one: `memory pending channel --channel <id>`."
        if wanted == "org" and self._org_key is None:
            return "No `organization` is configured, so there is no org scope."
        candidates = (("repo", repo), ("channel", channel), ("org", self._org_key))
        keys = [key for word, key in candidates if key is not None and wanted in (word, "all")]
        return keys or "Nothing to review: this conversation has no shared memory scope."

    # ------------------------------------------------------------------------ approve and reject

    async def handle_approve(self, args: Sequence[str], caller: Caller) -> CommandReply:
        decision = await self._decision(args, caller, "approve")
        if isinstance(decision, CommandReply):
            return decision
        act, store, scope, target = decision
        try:  # read first: the receipt names what the approval retires
            replaced = await replaced_record(store, scope, target)
            approved = await store.approve(scope, target, actor_of(caller))
        except Exception as error:
            return _failed(act, "approve", scope, target, error)
        if approved is None:
            return _not_waiting(act, "approve", target)
        if approved.id != target:  # a restatement: the record it restates takes its use
            return act.reply(
                f"✅ Approved {code_span(target)}: it restates {code_span(approved.id)}, which it confirmed "
                "(no second record).",
                "approved",
                target,
                ok=True,
                folded_into=approved.id,
            )
        lines = [f"✅ Approved {code_span(target)}: active in {code_span(scope)} now."]
        if replaced is not None:
            lines.append(await _retired(store, scope, replaced, caller))
        return act.reply(
            "\n".join(lines),
            "approved",
            target,
            ok=True,
            replaces=None if replaced is None else replaced.id,
        )

    async def handle_reject(self, args: Sequence[str], caller: Caller) -> CommandReply:
        decision = await self._decision(args, caller, "reject")
        if isinstance(decision, CommandReply):
            return decision
        act, store, scope, target = decision
        try:
            rejected = await store.reject(scope, target, actor_of(caller))
        except Exception as error:
            return _failed(act, "reject", scope, target, error)
        if not rejected:
            return _not_waiting(act, "reject", target)
        return act.reply(
            f"🗑️ Rejected {code_span(target)}: erased, none of its text is kept.", "rejected", target, ok=True
        )

    async def _decision(
        self, args: Sequence[str], caller: Caller, verb: str
    ) -> tuple[_Act, CuratedStore, str, str] | CommandReply:
        """The record an approve or reject names and the store to ask, or the answer that ends it:
        memory off, not an admin (refused, logged), no queue, a scope that never waits."""
        act = self._act(verb, caller)
        if not self._enabled:
            return act.reply(_OFF + f"there is nothing to {verb}.", "disabled")
        scope, target = parse_one_id(args, f"memory {verb}")
        if not act.admin:
            return act.reply(
                f"🚫 Only admins can {verb} what waits for shared memory. {refused_as(caller, admin=True)}",
                "refused",
                target,
            )
        store = self._curating()
        if store is None:
            return act.reply(f"⚠️ {NOT_CURATING}", "unsupported", target)
        refusal = curation_refusal(scope, caller, admin=True, org_key=self._org_key, verb=verb)
        if refusal is not None or scope_kind(scope) == "user":
            return act.reply(
                f"🚫 {refusal or 'A personal record never waits for review.'}", "refused", target
            )
        return act, store, scope, target

    # ------------------------------------------------------------------------------ memory edit

    async def handle_edit(self, args: Sequence[str], caller: Caller) -> CommandReply:
        act = self._act("edit", caller)
        if not self._enabled:
            return act.reply(_OFF + "there is nothing to edit.", "disabled")
        request = parse_edit_args(args)
        store = self._curating()
        if store is None:
            return act.reply(f"⚠️ {NOT_CURATING}", "unsupported", request.id)
        refusal = curation_refusal(request.scope, caller, admin=act.admin, org_key=self._org_key, verb="edit")
        if refusal is not None:
            return act.reply(f"🚫 {refusal} Your own records: `memory list me`.", "refused", request.id)
        if not said_for_scope(request.scope, caller):
            where = caller.channel_visibility if caller.channel_visibility in NARROW_WHERE else "unknown"
            return act.reply(
                f"🚫 Nothing changed: what is said in {NARROW_WHERE[where]} may not go into the shared "
                f"scope {code_span(request.scope)}. Edit it from a public channel, the App Home or a "
                "terminal.",
                "refused",
                request.id,
            )
        checked = check_text(request.text)
        if isinstance(checked, str):
            return act.reply(f"Nothing changed: {checked}.", "invalid_input", request.id)
        typed_in = (said_in(caller, request.scope), caller.channel_id)
        try:
            new = await store.edit(
                request.scope, request.id, checked.text, actor_of(caller), typed_in=typed_in
            )
        except Exception as error:
            return _failed(act, "edit", request.scope, request.id, error)
        if new is None:
            return act.reply(
                f"Nothing to edit: {code_span(request.id)} is not an active or pending record "
                "(see `memory list`).",
                "not_found",
                request.id,
            )
        lines = [
            f"✏️ Edited {code_span(request.id)}: its new version is {code_span(new.id)} "
            f"in {code_span(new.scope_key)}."
        ]
        if new.status == "pending":
            lines.append(f"It still waits for review (`memory approve {new.id}`).")
        if not shown_to_anyone(new) and typed_in[0] not in OPEN_ORIGINS:
            lines.append(_kept_where(new))
        if checked.redacted:
            lines.append(f"A secret in it was stored as `{REDACTED}`.")
        return act.reply(
            "\n".join(lines), "edited", new.id, ok=True, old_id=request.id, redacted=checked.redacted
        )

    # --------------------------------------------------------------------------- memory history

    async def handle_history(self, args: Sequence[str], caller: Caller) -> CommandReply:
        act = self._act("history", caller, changes=False)
        if not self._enabled:
            return act.reply(_OFF + "there is no history to show.", "disabled", ok=True)
        scope, target = parse_one_id(args, "memory history")
        store = self._curating()
        if store is None:
            return act.reply(f"⚠️ {NOT_CURATING}", "unsupported", target)
        if scope_kind(scope) == "user" and scope != scope_key_of("user", caller.user_id):
            # A person's own scope is theirs alone, whatever the origin of what is in it.
            return act.reply(
                "🚫 That record is in another person's scope: its history is theirs alone, admins included. "
                + refused_as(caller),
                "refused",
                target,
            )
        try:
            versions = await store.history(scope, target)
            records = await _version_records(store, scope, versions, pending=act.admin)
        except Exception as error:
            log.warning("memory.history_failed", scope_key=scope, id=target, error=type(error).__name__)
            return act.reply(
                f"⚠️ Couldn't read the history of {code_span(target)}: {store_failure(error)}.",
                "failed",
                target,
            )
        reader = reader_for(caller)
        visible = {v.id for v in versions if version_visible(records.get(v.id), reader, admin=act.admin)}
        curator = curation_refusal(scope, caller, admin=act.admin, org_key=self._org_key, verb="edit") is None
        if not versions or not (curator or visible):
            return act.reply(
                f"Nothing to show: no record {code_span(target)} this conversation may see "
                "(see `memory list`).",
                "not_found" if not versions else "refused",
                target,
            )
        text = render_history(target, versions, visible, machine=is_machine_caller(caller))
        return act.reply(text, "shown", target, ok=True, versions=len(versions), shown=len(visible))


def said_for_scope(scope: str, caller: Caller) -> bool:
    """Whether the editor's words may land in `scope`, as a remembered fact's would: anything into the
    editor's own scope; into a shared one only from a public channel or a machine surface, or a private
    (or shared with another organization) channel's words into that channel's own scope."""
    if scope_kind(scope) == "user":
        return True
    origin = origin_from_visibility(caller.channel_visibility)
    if origin in OPEN_ORIGINS:
        return True
    return origin in ("private", "external") and scope == scope_key_of("channel", caller.channel_id)


def _kept_where(record: MemoryRecord) -> str:
    """Where an edit's narrowed origin lets the new version show: the words typed in a DM or a private
    conversation never reach a wider audience than that one."""
    mine = scope_kind(record.scope_key) == "user"
    if record.origin in CONVERSATION_ORIGINS:
        where = NARROW_WHERE[record.origin]
        return f"🔒 Kept as from {where}: it shows only there" + (" and to you, privately." if mine else ".")
    if mine:
        return "🔒 Kept as from a DM: it shows only to you, privately."
    return "🔒 Kept as from a DM: a shared record from a DM shows to no one."


async def _retired(store: CuratedStore, scope: str, replaced: MemoryRecord, caller: Caller) -> str:
    """The receipt's line on the record an approval superseded: its id, its text where the caller may
    see it, and its status now (read again: the approval decided it, not this command)."""
    shown = as_shown({replaced.id: replaced}, reader_for(caller))[replaced.id]
    text = (
        f" ({HIDDEN})"
        if shown.record is None
        else f" ({quoted_text(replaced.text, machine=is_machine_caller(caller))})"
    )
    try:
        now = [r.status for r in await store.fetch(scope, [replaced.id])]
    except Exception as error:
        log.warning(
            "memory.approve_read_back_failed", scope_key=scope, id=replaced.id, error=type(error).__name__
        )
        failure = store_failure(error)
        return f"It was to supersede {code_span(replaced.id)}{text}: ⚠️ couldn't read it back ({failure})."
    if now == ["superseded"]:
        return f"It supersedes {code_span(replaced.id)}{text}, which is now superseded (`memory history`)."
    return f"{code_span(replaced.id)}{text} is still {now[0] if now else 'gone'}: it was not superseded."


def _failed(act: _Act, verb: str, scope: str, target: str, error: Exception) -> CommandReply:
    log.warning(f"memory.{verb}_failed", scope_key=scope, id=target, error=type(error).__name__)
    return act.reply(f"⚠️ Couldn't {verb} {code_span(target)}: {store_failure(error)}.", "failed", target)


def _not_waiting(act: _Act, verb: str, target: str) -> CommandReply:
    return act.reply(
        f"Nothing to {verb}: {code_span(target)} is not waiting for review (see `memory pending`).",
        "not_found",
        target,
    )


async def _version_records(
    store: CuratedStore, scope: str, versions: Sequence[RecordVersion], *, pending: bool
) -> dict[str, MemoryRecord]:
    """The rows of the versions that still hold text (pending ones only for admins), by id: their
    origin decides who may read them."""
    live = [v.id for v in versions if v.text is not None and v.status != "pending"]
    found = {r.id: r for r in await store.fetch(scope, live)} if live else {}
    if pending and any(v.status == "pending" and v.text is not None for v in versions):
        found.update({r.id: r for r in await store.pending(scope, MAX_LIMIT)})
    return found


def register_curate_commands(registry: CommandRegistry, commands: CurateCommands) -> None:
    registry.add("memory pending", PENDING_USAGE, commands.handle_pending, "what waits for review")
    registry.add("memory approve", APPROVE_USAGE, commands.handle_approve, "make a pending record active")
    registry.add("memory reject", REJECT_USAGE, commands.handle_reject, "discard a pending record")
    registry.add(
        "memory edit", EDIT_USAGE, commands.handle_edit, "replace a record's text (keeps its history)"
    )
    registry.add("memory history", HISTORY_USAGE, commands.handle_history, "every version of a record")
