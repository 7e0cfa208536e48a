"""`memory remember [--scope me|org|repo|channel] <text>`: a person adds a record directly.

A remembered fact takes the same road as a reflected one: redacted, labelled with where it was said
(a DM's words are `dm`, a public channel's `public`, a private channel's `private` to that channel,
a terminal's `machine`), and put to the write gate the app lends us (app/policy.py) as the caller's
actor — so it lands no wider than where it was said, exactly as reflection's writes do. Shared scopes
(org, repo, channel) take an admin, by the same rule `memory forget` applies to them. It changes
durable state, so it is an inline run with a receipt and one `memory.remember` event (ids and
counts, never the text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog

from commands.access import note_curation, refused_as, scope_key_of
from commands.registry import Caller, CommandReceipt, CommandRegistry, CommandReply, UsageError
from commands.render import code_span, store_failure
from memory.rules.redact import REDACTED, redact_secrets
from memory.rules.restate import meaning_key
from memory.rules.scope import RequestScopes, derive_scope_key, list_scope_keys, scope_kind
from memory.rules.scorer import query_tokens
from memory.rules.visibility import origin_from_visibility, typed_alone
from memory.rules.write_gate import MemoryScopeResource, WriteGate
from memory.stores.contract import MemoryStore
from memory.types import MAX_LIMIT, MAX_TEXT_CHARS, MemoryCandidate, Origin

log = structlog.get_logger("memory")

RememberScope = Literal["me", "org", "repo", "channel"]
REMEMBER_SCOPES: tuple[RememberScope, ...] = ("me", "org", "repo", "channel")
REMEMBER_USAGE = "memory remember [--scope me|org|repo|channel] <text> (shared scopes: admins)"

# The policy's gate for one caller's scopes (the app's `app.policy.write_gate`): commands never
# import the bot, so the surface that builds the registry lends it.
WriteGateFor = Callable[[RequestScopes], WriteGate]
IsAdmin = Callable[[Caller], bool]

_OPTION = re.compile(r"^-{1,2}[A-Za-z]")
_TYPOGRAPHIC_DASHES = re.compile(r"^[—–]")  # clients turn `--` into an em or en dash
_END_OF_OPTIONS = "--"
# Conversations whose words stay with their audience, as a receipt names them.
NARROW_WHERE: dict[str, str] = {
    "dm": "a DM",
    "mpim": "a group DM",
    "private": "a private channel",
    "external": "a channel shared with another organization",
    "unknown": "a conversation I could not place",
}


@dataclass(frozen=True, slots=True)
class RememberRequest:
    """A parsed `memory remember`: the scope asked for and the words to remember."""

    scope: RememberScope
    text: str


def parse_remember_args(args: Sequence[str]) -> RememberRequest:
    """`[--scope S] [--] <text…>`: the option before the text; `--` lets a text start with a dash."""
    scope: RememberScope | None = None
    index, ended = 0, False
    while index < len(args):
        token = dashed(args[index])
        if token == _END_OF_OPTIONS:
            index, ended = index + 1, True
            break
        if not _OPTION.match(token):
            break
        index += 1
        name, has_value, value = token.lstrip("-").partition("=")
        if not token.startswith("--") or name.lower() != "scope":
            raise UsageError(
                f"Unknown option {code_span(token)} (the only option is `--scope`; "
                "put `--` before a text that starts with a dash)."
            )
        if scope is not None:
            raise UsageError("`--scope` is given twice.")
        if not has_value:
            if index >= len(args):
                raise UsageError("`--scope` needs a value.")
            value, index = args[index], index + 1
        scope = _parse_scope(value)
    text = list(args[index:])
    if not ended and any(dashed(word).partition("=")[0].lower() == "--scope" for word in text):
        raise UsageError("`--scope` goes before the text (or put `--` before a text that mentions it).")
    if not text:
        raise UsageError("`memory remember` needs the text to remember.")
    return RememberRequest(scope or "me", " ".join(text))


@dataclass(frozen=True, slots=True)
class CheckedText:
    """Text a person gave to keep, secrets redacted (`redacted`: how many were)."""

    text: str
    redacted: int


def check_text(raw: str) -> CheckedText | str:
    """What `memory remember` and `memory edit` store: secrets redacted, words to match a query by,
    no more than a record holds; else why not (a phrase for after "Nothing remembered: ")."""
    text = redact_secrets(raw.strip())
    if not query_tokens(text):
        return "the text has no words to remember"
    if len(text) > MAX_TEXT_CHARS:
        return f"the text is {len(text)} characters; at most {MAX_TEXT_CHARS} fit"
    return CheckedText(text, max(0, text.count(REDACTED) - raw.count(REDACTED)))


def dashed(word: str) -> str:
    return _TYPOGRAPHIC_DASHES.sub("--", word)


def _parse_scope(value: str) -> RememberScope:
    for word in REMEMBER_SCOPES:
        if value.lower() == word:
            return word
    raise UsageError(f"`--scope` must be one of {', '.join(REMEMBER_SCOPES)}; got {code_span(value)}.")


@dataclass(frozen=True, slots=True)
class _Landing:
    """Where a remembered fact may go: the key asked for, the key the gate gave, its reason token."""

    asked: str
    key: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class _Asker:
    """Who asked, for the receipt and the one `memory.remember` event every answer logs."""

    key: str | None
    surface: str
    admin: bool

    def reply(
        self,
        text: str,
        outcome: str,
        record: str | None = None,
        details: Mapping[str, object] | None = None,
    ) -> CommandReply:
        ok = outcome in ("remembered", "already_remembered")
        log.info(
            "memory.remember",
            caller=self.key,
            id=record,
            outcome=outcome,
            surface=self.surface,
            admin=self.admin,
            **(details or {}),
        )
        receipt = CommandReceipt("memory.remember", self.key, record, outcome, ok)
        return CommandReply(text, ok=ok, receipt=receipt)


class RememberCommand:
    """`memory remember` over one store, with the installation's org, its admin rule and its gate."""

    def __init__(
        self,
        store: MemoryStore,
        memory_enabled: bool,
        organization: str | None,
        *,
        is_admin: IsAdmin,
        write_gate: WriteGateFor | None,
    ) -> None:
        """`write_gate` None: this surface has no policy, so nothing is written (a clear refusal)."""
        self._store = store
        self._enabled = memory_enabled
        self._organization = organization
        self._is_admin = is_admin
        self._write_gate = write_gate

    async def handle(self, args: Sequence[str], caller: Caller) -> CommandReply:
        asker = _Asker(scope_key_of("user", caller.user_id), caller.surface, self._is_admin(caller))
        if not self._enabled:
            return asker.reply(
                "🔕 Memory is off (`memory.enabled` is false): nothing can be remembered.", "disabled"
            )
        request = parse_remember_args(args)
        scopes = await self._scopes(request.scope, caller)
        if isinstance(scopes, str):
            return asker.reply(f"🚫 {scopes}", "refused", details={"asked": request.scope})
        asked = _asked_key(request.scope, scopes)
        if scope_kind(asked) != "user" and not asker.admin:
            return asker.reply(
                f"🚫 Only admins can remember into the shared {scope_kind(asked)} scope {code_span(asked)}. "
                f"{refused_as(caller, admin=True)} Your own: `memory remember <text>`.",
                "refused",
                details={"asked": request.scope, "scope": asked},
            )
        checked = check_text(request.text)
        if isinstance(checked, str):
            return asker.reply(f"Nothing remembered: {checked}.", "invalid_input")
        text = checked.text
        if self._write_gate is None:
            return asker.reply(
                "⚠️ `memory remember` is not available here: this surface has no write policy.", "failed"
            )
        candidate = MemoryCandidate(
            kind="fact",
            text=text,
            source_thread_key=caller.thread_key,
            origin=said_in(caller, asked),
            origin_conversation=caller.channel_id,
        )
        landing = _land(self._write_gate(scopes), scopes, asked, candidate)
        details = {"asked": request.scope, "origin": candidate.origin, "reason": landing.reason}
        return await self._write(asker, caller, landing, candidate, {**details, "redacted": checked.redacted})

    async def _write(
        self,
        asker: _Asker,
        caller: Caller,
        landing: _Landing,
        candidate: MemoryCandidate,
        details: Mapping[str, object],
    ) -> CommandReply:
        """Where the gate let it land, one write; the receipt names the record and its scope."""
        if landing.key is None:
            return asker.reply(
                "🚫 Nothing remembered: what is said in "
                f"{NARROW_WHERE.get(candidate.origin, 'here')} may not go into "
                f"{code_span(landing.asked)} (`{landing.reason}`).",
                "refused",
                details={**details, "scope": landing.asked},
            )
        details = {**details, "scope": landing.key}
        try:
            result = await self._store.write(landing.key, [candidate])
            record = await self._new_id(landing.key, candidate.text)
        except Exception as error:
            log.warning("memory.remember_failed", scope_key=landing.key, error=type(error).__name__)
            return asker.reply(
                f"⚠️ Couldn't remember that: {store_failure(error)}.", "failed", details=details
            )
        outcome = "already_remembered" if result.deduped and not result.inserted else "remembered"
        if outcome == "remembered" and record is not None:  # a fold is the store's own `folded` entry
            await note_curation(self._store, landing.key, record, "remembered", caller)
        text = _receipt(outcome, record, landing, candidate, details.get("redacted") != 0)
        counts = {"inserted": result.inserted, "deduped": result.deduped, "evicted": result.evicted}
        return asker.reply(text, outcome, record, {**details, **counts})

    async def _scopes(self, wanted: RememberScope, caller: Caller) -> RequestScopes | str:
        """The caller's scopes, with the one asked for present (else why it is not)."""
        if not self._organization:
            return "No `organization` is configured, so nothing can be remembered."
        user = scope_key_of("user", caller.user_id)
        channel = scope_key_of("channel", caller.channel_id)
        repo: str | None = None
        if wanted == "me" and user is None:
            return "There is no user identity on this surface, so nothing can be remembered as yours."
        if wanted == "channel" and channel is None:
            return "This conversation is not in a channel, so it has no channel scope."
        if wanted == "repo":
            try:
                repo = (
                    scope_key_of("repo", await caller.thread_repo())
                    if caller.thread_repo is not None
                    else None
                )
            except Exception as error:
                log.warning("memory.remember_repo_unresolved", error=type(error).__name__)
                return f"Couldn't look up this thread's repo ({type(error).__name__})."
            if repo is None:
                return "This thread has no bound repo, so it has no repo scope."
        return RequestScopes(
            org=derive_scope_key("org", self._organization), repo=repo, channel=channel, user=user
        )

    async def _new_id(self, scope_key: str, text: str) -> str | None:
        """The active record that now holds `text` (an insert, or the record it deduplicated into)."""
        norm = meaning_key(text)
        listed = await self._store.list(scope_key, MAX_LIMIT, query=text)
        return next((record.id for record in listed if meaning_key(record.text) == norm), None)


def said_in(caller: Caller, scope_key: str) -> Origin:
    """Where words typed into a command were said: the conversation's label, except a note for the
    typist's own scope typed where only they read the reply (the `/memory` slash command in a
    channel). The channel never saw those words, so they are the typist's alone (`dm`), as the App
    Home's notes are; a shared scope's note is written for that scope's audience, as typed."""
    origin = origin_from_visibility(caller.channel_visibility)
    alone = caller.reader is not None and caller.reader.audience == "self"
    return typed_alone(origin, scope_key) if alone else origin


def _land(gate: WriteGate, scopes: RequestScopes, asked: str, candidate: MemoryCandidate) -> _Landing:
    """The gate asked as reflection's routing asks it: with the fact's own origin label. It may
    narrow, never widen; a scope outside the caller's own is never written, whatever it says."""
    resource = MemoryScopeResource(
        asked, scope_kind(asked), candidate.origin, origin_conversation=candidate.origin_conversation
    )
    decision = gate(resource)
    if not decision.allowed:
        return _Landing(asked, None, decision.reason)
    final = decision.narrowed_to or asked
    if final not in list_scope_keys(scopes):
        return _Landing(asked, None, "narrowed_outside_run")
    return _Landing(asked, final, decision.reason)


def _receipt(
    outcome: str, record: str | None, landing: _Landing, candidate: MemoryCandidate, redacted: bool
) -> str:
    name = code_span(record) if record is not None else "a record"
    head = "🧠 Already remembered as" if outcome == "already_remembered" else "🧠 Remembered as"
    lines = [f"{head} {name} in {code_span(landing.key or '')}."]
    if landing.key != landing.asked:
        where = NARROW_WHERE.get(candidate.origin, "here")
        lines.append(
            f"Narrowed from {code_span(landing.asked)}: what is said in {where} stays with its audience "
            "(say it in a public channel or a terminal to share it)."
        )
    if redacted:
        lines.append(f"A secret in it was stored as `{REDACTED}`.")
    return "\n".join(lines)


def _asked_key(wanted: RememberScope, scopes: RequestScopes) -> str:
    key = {"me": scopes.user, "org": scopes.org, "repo": scopes.repo, "channel": scopes.channel}[wanted]
    assert key is not None  # `_scopes` returned a reason instead when it was missing
    return key


def register_remember_command(registry: CommandRegistry, command: RememberCommand) -> None:
    registry.add("memory remember", REMEMBER_USAGE, command.handle, "add a record yourself")
