"""Who may change which records, and the record ids people type: one rule for every curating command.

A person's own scope is theirs alone (admins included: nobody changes it for them); the shared scopes
(the org, a repo, a channel) are the admins'. `memory forget`, `memory edit`, `memory approve` and
`memory reject` all ask `curation_refusal`.
"""

from __future__ import annotations

import time
from typing import Literal

import structlog

from commands.registry import Caller, UsageError
from commands.render import code_span
from memory.rules.engine import parse_record_id, record_id
from memory.rules.scope import ScopeError, derive_scope_key, scope_kind, validate_scope_key
from memory.stores.contract import MemoryStore
from memory.types import CurationAction, CurationEntry

log = structlog.get_logger("memory")

ID_FORMAT = "mem:<scope>:<n>"
_QUOTES = "`'\"“”‘’"


def scope_key_of(kind: Literal["user", "channel", "repo", "org"], value: str | None) -> str | None:
    """A derived scope key, or None when the input is missing or unusable."""
    if not value:
        return None
    try:
        return derive_scope_key(kind, value)
    except (ScopeError, ValueError):
        return None


def actor_of(caller: Caller) -> str:
    """Who a curation entry names: the person's user scope key, else `machine` (no identity)."""
    return scope_key_of("user", caller.user_id) or "machine"


def parse_id_word(raw: str) -> tuple[str, str] | None:
    """A typed record id (quotes or backticks copied along are dropped) as (scope key, canonical id)."""
    parsed = parse_record_id(raw.strip(_QUOTES))
    if parsed is None:
        return None
    scope, seq = parsed
    try:
        validate_scope_key(scope)
    except ValueError:
        return None
    return scope, record_id(scope, seq)


def require_id(args: list[str], command: str) -> tuple[str, str]:
    """The first word as a record id, or a usage error naming the command."""
    if not args:
        raise UsageError(f"`{command}` needs a record id (ids look like `{ID_FORMAT}`).")
    parsed = parse_id_word(args[0])
    if parsed is None:
        raise UsageError(f"{code_span(args[0])} is not a memory id: ids look like `{ID_FORMAT}`.")
    return parsed


def outside_the_organization(caller: Caller) -> bool:
    """Whether the reply reaches another organization (read as `external`: a channel shared with one, a
    guest, a member of another organization). There an admin curates the channel's own records only,
    never the organization's shared ones nor a person's erasure: the asker may be the other
    organization's (an `admins` entry shared by mistake), and they are the organization's to keep."""
    return caller.reader is not None and caller.reader.audience == "external"


def refused_as(caller: Caller, *, admin: bool = False) -> str:
    """Who a refusal refused, named as `admins` names people (`user:cli:local`, `user:slack:U…`): the
    refused person can tell who the surface took them for, and what to add to `admins`."""
    who = code_span(actor_of(caller))
    if admin and outside_the_organization(caller):
        return (
            f"You are {who}, and this conversation reaches people outside the organization, where "
            "only its own channel's records are curated (the organization's: from your DM with me)."
        )
    return f"You are {who}, not in `admins`." if admin else f"You are {who}."


def curation_refusal(
    scope: str, caller: Caller, *, admin: bool, org_key: str | None, verb: str
) -> str | None:
    """Why this caller may not `verb` records of `scope`, or None when they may."""
    kind = scope_kind(scope)
    if kind == "user":
        if scope == scope_key_of("user", caller.user_id):
            return None
        return (
            f"That record is in another person's scope; nobody can {verb} it for them, admins included. "
            + refused_as(caller)
        )
    shared = kind in ("repo", "channel") or (kind == "org" and scope == org_key)
    if not shared:
        return (
            "That id names no scope this installation can reach (yours, a repo, a channel or the org). "
            + refused_as(caller)
        )
    if not admin or (
        outside_the_organization(caller) and scope != scope_key_of("channel", caller.channel_id)
    ):
        return f"Only admins can {verb} records in the shared {kind} scope {code_span(scope)}. " + refused_as(
            caller, admin=True
        )
    return None


async def note_curation(
    store: MemoryStore, scope: str, record: str, action: CurationAction, caller: Caller
) -> None:
    """Append what a command did to a record to the store's curation log (stores that keep one); the
    change itself stands whatever happens here, so a failure is one warning."""
    curating = store.curation()
    if curating is None:
        return
    entry = CurationEntry(record, scope, action, actor_of(caller), time.time())
    try:
        await curating.record_curation(entry)
    except Exception as error:
        log.warning("memory.curation_log_failed", id=record, action=action, error=type(error).__name__)


async def thread_repo(caller: Caller, failure_event: str) -> str | BaseException | None:
    """The thread's bound repo as a scope key; a failed lookup is one warning and comes back as the error."""
    if caller.thread_repo is None:
        return None
    try:
        name = await caller.thread_repo()
    except Exception as error:
        log.warning(failure_event, error=type(error).__name__)
        return error
    return scope_key_of("repo", name)
