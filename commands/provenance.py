"""`memory why` and `memory audit`: what an answer drew on, and who read what. No model turn.

`memory why` explains the thread's last answer from the durable read audit: the records that run read
(id, scope, date, text, a link to the source thread), filtered by the read rule for whoever will see the
reply. The Slack *Why?* button shows the same list, ephemerally, through `explain_run` + `render_why`.
`memory audit --record ID | --run ID | --user U…` lists audited reads (ids only, never text); anyone
may look at their own, everything else is for admins.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import structlog

from commands.curate_render import render_curation_log
from commands.registry import Caller, CommandRegistry, CommandReply, UsageError
from commands.render import UNTRUSTED_NOTE, code_span, is_machine_caller, quoted_text, store_failure
from memory.rules.engine import parse_record_id
from memory.rules.person import PersonError, person_user_id, resolve_person
from memory.rules.visibility import Reader, may_show
from memory.stores.contract import MemoryStore
from memory.types import MAX_LIMIT, AuditQuery, CurationEntry, MemoryRecord, ReadAudit

log = structlog.get_logger("memory")

WHY_USAGE = "memory why [<run id>]"
AUDIT_USAGE = "memory audit --record <id> | --run <run id> | --user <person> | --user me [--limit 1-50]"
AUDIT_LIMIT = 20

_TYPOGRAPHIC_DASHES = re.compile(r"^[—–]")
_OPTION = re.compile(r"^(?:-{1,2}|[—–])[A-Za-z]")
_AUDIT_OPTIONS = ("record", "run", "user", "limit")


class Permalinks(Protocol):
    """A link to a source thread (Slack's `chat.getPermalink`, cached), or None where there is none."""

    async def permalink(self, thread_key: str) -> str | None: ...


def reader_for(caller: Caller, *, private: bool = False) -> Reader:
    """Who will see this reply: only the caller when it is private (the *Why?* button's ephemeral
    answer), else the surface's reader of the message (`app.audience`); a surface that gave none is
    read as a public reply (it shows the least)."""
    if private:
        return Reader(audience="self", user_id=caller.user_id, conversation_id=caller.channel_id)
    return caller.reader or Reader(
        audience="public", user_id=caller.user_id, conversation_id=caller.channel_id
    )


@dataclass(frozen=True, slots=True)
class WhyAnswer:
    """One run's audited read, the records the reader may see (in block order), and what is left out."""

    entry: ReadAudit | None
    shown: tuple[MemoryRecord, ...] = ()
    hidden: int = 0  # the read rule keeps them from this audience
    gone: int = 0  # erased (forgotten, source deleted, expired) since the run read them


async def explain_run(
    store: MemoryStore, reader: Reader, *, run_id: str | None = None, thread_key: str | None = None
) -> WhyAnswer:
    """The records one run read — by its id, or the latest run of a thread — as the reader may see them."""
    query = AuditQuery(run_id=run_id, limit=1) if run_id else AuditQuery(thread_key=thread_key, limit=1)
    entries = await store.read_audit(query)
    if not entries:
        return WhyAnswer(entry=None)
    entry = entries[0]
    by_scope: dict[str, list[str]] = {}
    for record_id, _rank in entry.records:
        parsed = parse_record_id(record_id)
        if parsed is not None:
            by_scope.setdefault(parsed[0], []).append(record_id)
    fetched = await asyncio.gather(*(store.fetch(scope, ids) for scope, ids in by_scope.items()))
    found = {record.id: record for records in fetched for record in records}
    rank = dict(entry.records)
    alive = sorted(found.values(), key=lambda record: rank.get(record.id, 0))
    shown = tuple(record for record in alive if may_show(record, reader))
    return WhyAnswer(
        entry=entry, shown=shown, hidden=len(alive) - len(shown), gone=len(entry.records) - len(alive)
    )


async def render_why(answer: WhyAnswer, *, machine: bool, permalinks: Permalinks | None) -> str:
    """Markdown, like an answer: one line per record — id, scope, date, text, source thread."""
    entry = answer.entry
    if entry is None:
        return "No answer here has drawn on memory (I keep a record of what each answer read)."
    when = _when(entry.at)
    if not entry.records:
        return f"That answer (run {code_span(entry.run_id)}, {when}) drew on no memories."
    count = len(entry.records)
    lines = [
        f"**Why: that answer drew on {count} {_memories(count)}** (run {code_span(entry.run_id)}, {when})"
    ]
    if machine and answer.shown:
        lines.insert(0, UNTRUSTED_NOTE)
    links = await asyncio.gather(*(source_link(permalinks, r.source_thread_key) for r in answer.shown))
    for record, link in zip(answer.shown, links, strict=True):
        source = f"[source thread]({link})" if link else f"source {code_span(record.source_thread_key)}"
        date = datetime.fromtimestamp(record.created_at, tz=UTC).strftime("%Y-%m-%d")
        text = quoted_text(record.text, machine=machine)
        lines.append(f"- {code_span(record.id)} · {code_span(record.scope_key)} · {date} · {text} · {source}")
    if answer.hidden:
        lines.append(
            f"({answer.hidden} more {_is_are(answer.hidden)} not shown here: learned somewhere this "
            "conversation cannot see. Ask me in a DM, or use the *Why?* button.)"
        )
    if answer.gone:
        lines.append(f"({answer.gone} {_has_have(answer.gone)} been forgotten since.)")
    return "\n".join(lines)


def parse_audit_args(args: Sequence[str], *, me: str | None = None) -> AuditQuery:
    """Exactly one of `--record`, `--run`, `--user` (`me`: the caller), plus an optional `--limit`."""
    values: dict[str, str] = {}
    index = 0
    while index < len(args):
        token = _TYPOGRAPHIC_DASHES.sub("--", args[index])
        index += 1
        name, has_value, value = token.lstrip("-").partition("=")
        name = name.lower()
        if not token.startswith("--") or name not in _AUDIT_OPTIONS:
            raise UsageError(
                f"Unknown argument {code_span(token)} (options: --record, --run, --user, --limit)."
            )
        if name in values:
            raise UsageError(f"`--{name}` is given twice.")
        if not has_value:
            if index >= len(args):
                raise UsageError(f"`--{name}` needs a value.")
            value = args[index]
            index += 1
        values[name] = value.strip("`'\"“”‘’")
    chosen = [name for name in ("record", "run", "user") if name in values]
    if len(chosen) != 1:
        raise UsageError("Name exactly one of `--record <id>`, `--run <run id>`, `--user <user id>`.")
    limit = AUDIT_LIMIT
    if "limit" in values:
        raw = values["limit"]
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
            raise UsageError(f"`--limit` must be a whole number from 1 to {MAX_LIMIT}; got {code_span(raw)}.")
        limit = int(raw)
    if "record" in values:
        if parse_record_id(values["record"]) is None:
            raise UsageError(
                f"{code_span(values['record'])} is not a memory id (ids look like `mem:<scope>:<n>`)."
            )
        return AuditQuery(record_id=values["record"], limit=limit)
    if "run" in values:
        return AuditQuery(run_id=values["run"], limit=limit)
    if values["user"].lower() == "me":
        if me is None:
            raise UsageError("There is no user identity on this surface, so `--user me` names nobody.")
        return AuditQuery(user_id=me, limit=limit)
    try:
        person = resolve_person(values["user"], caller_id=me)
    except PersonError as error:
        raise UsageError(str(error)) from None
    return AuditQuery(user_id=person_user_id(person), limit=limit)


class ProvenanceCommands:
    """`memory why` and `memory audit` over one store."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        memory_enabled: bool,
        is_admin: Callable[[Caller], bool],
        permalinks: Permalinks | None = None,
    ) -> None:
        self._store = store
        self._enabled = memory_enabled
        self._is_admin = is_admin
        self.permalinks = permalinks

    async def handle_why(self, args: Sequence[str], caller: Caller) -> CommandReply:
        if not self._enabled:
            return CommandReply("🔕 Memory is off (`memory.enabled` is false): no answer drew on it.")
        if args and _OPTION.match(args[0]):
            raise UsageError(f"Unknown option {code_span(args[0])}: `memory why` takes only a run id.")
        if len(args) > 1:
            raise UsageError("`memory why` takes at most one run id.")
        run_id = args[0].strip("`'\"“”‘’") if args else None
        try:
            answer = await explain_run(
                self._store, reader_for(caller), run_id=run_id, thread_key=caller.thread_key
            )
        except Exception as error:
            log.warning("memory.why_failed", error=type(error).__name__)
            return CommandReply(f"⚠️ Couldn't look that up: {store_failure(error)}.", ok=False)
        log.info(
            "memory.why",
            caller=caller.user_id,
            run_id=answer.entry.run_id if answer.entry else None,
            shown=len(answer.shown),
            hidden=answer.hidden,
            gone=answer.gone,
        )
        text = await render_why(answer, machine=is_machine_caller(caller), permalinks=self.permalinks)
        return CommandReply(text)

    async def handle_audit(self, args: Sequence[str], caller: Caller) -> CommandReply:
        if not self._enabled:
            return CommandReply(
                "🔕 Memory is off (`memory.enabled` is false): nothing is read, nothing audited."
            )
        query = parse_audit_args(args, me=caller.user_id)
        admin = self._is_admin(caller)
        refusal = _not_here(caller) or (None if admin else _own_only(query, caller))
        if refusal is not None:
            log.info("memory.audit", caller=caller.user_id, outcome="refused")
            return CommandReply(f"🚫 {refusal}", ok=False)
        try:
            entries = await self._store.read_audit(query)
        except Exception as error:
            log.warning("memory.audit_failed", error=type(error).__name__)
            return CommandReply(f"⚠️ Couldn't read the audit: {store_failure(error)}.", ok=False)
        if not admin:  # someone else's run read under your name never: only your own reads
            entries = [entry for entry in entries if entry.asker == caller.user_id]
        curation = await self._curation(query)
        if isinstance(curation, Exception):
            return CommandReply(f"⚠️ Couldn't read the curation log: {store_failure(curation)}.", ok=False)
        log.info(
            "memory.audit",
            caller=caller.user_id,
            outcome="listed",
            entries=len(entries),
            curation=None if curation is None else len(curation),
            admin=admin,
        )
        text = _render_audit(query, entries)
        return CommandReply(text if curation is None else f"{text}\n\n{render_curation_log(curation)}")

    async def _curation(self, query: AuditQuery) -> list[CurationEntry] | Exception | None:
        """A record's curation log (who remembered, approved, edited, rejected or forgot it), for a
        `--record` audit on a store that keeps one; None otherwise."""
        parsed = parse_record_id(query.record_id or "")
        store = self._store.curation()
        if parsed is None or store is None:
            return None
        try:
            return await store.curation_log(parsed[0], query.record_id or "", query.limit)
        except Exception as error:
            log.warning("memory.audit_failed", error=type(error).__name__)
            return error


def register_provenance_commands(registry: CommandRegistry, commands: ProvenanceCommands) -> None:
    registry.add("memory why", WHY_USAGE, commands.handle_why, "what the last answer here drew on")
    registry.add("memory audit", AUDIT_USAGE, commands.handle_audit, "which answers read which records")


def _not_here(caller: Caller) -> str | None:
    """Why the audit is not answered here, or None: it names people's threads (a DM's among them),
    scopes and record ids, so only a reply the asker alone reads may carry it."""
    if caller.reader is not None and caller.reader.audience == "self":
        return None
    return (
        "The read audit names people's threads and records, so it is answered only where you alone "
        "read the reply: your DM with me, `/memory audit …`, or the terminal."
    )


def _own_only(query: AuditQuery, caller: Caller) -> str | None:
    """Why a non-admin may not ask this, or None: only their own person and their own records."""
    if caller.user_id is None:
        return "The read audit needs a user identity; this surface has none."
    if query.user_id is not None and query.user_id != caller.user_id:
        return "Only admins can see what was read for another person. Yours: `memory audit --user me`."
    if query.record_id is not None:
        parsed = parse_record_id(query.record_id)
        if parsed is None or parsed[0] != f"user:{caller.user_id}":
            return "Only admins can audit records outside your own scope (`memory list me`)."
    return None


def _render_audit(query: AuditQuery, entries: Sequence[ReadAudit]) -> str:
    what = (
        f"record {code_span(query.record_id)}"
        if query.record_id
        else f"run {code_span(query.run_id)}"
        if query.run_id
        else f"reads for {code_span(query.user_id or '')}"
    )
    lines = [f"**Read audit** — {what}, newest first"]
    if not entries:
        lines.append("no audited reads (the audit keeps reads for its retention period)")
    for entry in entries:
        used = ", ".join(f"{code_span(record_id)} #{rank}" for record_id, rank in entry.records) or "nothing"
        scopes = ", ".join(map(code_span, entry.scope_keys))
        lines.append(
            f"- {_when(entry.at)} · run {code_span(entry.run_id)}"
            f" · asker {code_span(entry.asker or '(none)')} · thread {code_span(entry.thread_key)}"
            f" · scopes {scopes} · used {used}"
        )
    if len(entries) >= query.limit:
        lines.append(f"(showing the newest {query.limit}; raise `--limit` up to {MAX_LIMIT}.)")
    return "\n".join(lines)


async def source_link(permalinks: Permalinks | None, thread_key: str) -> str | None:
    """A source thread's link (the *Why?* answer's and the answer's thinking steps'), or None."""
    if permalinks is None:
        return None
    try:
        return await permalinks.permalink(thread_key)
    except Exception as error:  # a link is a courtesy: the list stands without it
        log.info("memory.permalink_failed", error=type(error).__name__)
        return None


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _memories(count: int) -> str:
    return "memory" if count == 1 else "memories"


def _is_are(count: int) -> str:
    return "is" if count == 1 else "are"


def _has_have(count: int) -> str:
    return "has" if count == 1 else "have"
