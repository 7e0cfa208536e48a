"""Scope keys, derived from request identity and never configured (docs/architecture.md, invariant 3)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ScopeKind = Literal["org", "repo", "channel", "user"]

MAX_SCOPE_KEY_LENGTH = 200
_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# A Slack DM's conversation id as the adapter namespaces it: `slack:D…`, or `slack:T…:D…` when one app
# serves several workspaces. Slack gives every DM (and only a DM) an id starting with D.
_SLACK_DM = re.compile(r"^slack:(?:T[A-Z0-9]+:)?D[A-Z0-9]+$")


class ScopeError(ValueError):
    """A scope was asked for without the identity it needs: never an anonymous bucket."""


def validate_scope_key(key: object) -> str:
    """The one rule for a scope key anywhere it enters a store or the wire."""
    if not isinstance(key, str) or not key:
        raise ValueError("scope key must be a non-empty string")
    if len(key) > MAX_SCOPE_KEY_LENGTH:
        raise ValueError(f"scope key must be at most {MAX_SCOPE_KEY_LENGTH} characters")
    if _FORBIDDEN.search(key):
        raise ValueError("scope key must not contain whitespace or control characters")
    try:  # a lone surrogate (an undecodable byte of a terminal argument): no file name or row holds it
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("scope key must be valid Unicode text") from None
    return key


def is_dm_conversation(conversation_id: str | None) -> bool:
    """True for a DM's conversation id (`slack:D…`, `slack:T…:D…`).

    Told by the id's own form rather than a stamped visibility or the records' origins: the id is
    there on every path (a read, a write, a listing, a stored scope key from before origins were
    kept), while a visibility may be missing and an old record's origin reads as `private`.
    """
    return conversation_id is not None and _SLACK_DM.match(conversation_id) is not None


def dm_channel_scope(scope_key: str) -> str | None:
    """The DM id of a `channel:` scope key written for a DM (the old way), else None."""
    kind, sep, rest = scope_key.partition(":")
    return rest if kind == "channel" and sep and is_dm_conversation(rest) else None


def derive_scope_key(kind: ScopeKind, value: str | None) -> str:
    """`org:<organization>`, `user:<user id>`, `repo:<owner/name>`, `channel:<channel id>`.

    User and channel ids arrive platform-namespaced from the adapter (`slack:U0123`). A DM has no
    channel scope: it is one person's conversation, so what it teaches is theirs (their user scope),
    which they can forget and an erasure of them reaches; a shared scope there would have no owner.
    """
    if value is None or not value.strip():
        raise ScopeError(f"a {kind} scope needs a {_INPUT_NAMES[kind]}; refusing an anonymous scope")
    value = value.strip()
    if kind == "repo" and not _REPO.match(value):
        raise ScopeError(f"a repo scope needs owner/name, got {value!r}")
    if kind == "channel" and is_dm_conversation(value):
        raise ScopeError(f"a DM has no channel scope ({value!r}): what it teaches is the person's")
    return validate_scope_key(f"{kind}:{value}")


_INPUT_NAMES: dict[ScopeKind, str] = {
    "org": "configured organization",
    "repo": "bound repository",
    "channel": "channel id",
    "user": "user id",
}


@dataclass(frozen=True, slots=True)
class RequestScopes:
    """The scopes one request may reach: always the org, the rest only with their input."""

    org: str
    repo: str | None = None
    channel: str | None = None
    user: str | None = None


def request_scope_keys(
    organization: str | None,
    *,
    user_id: str | None = None,
    channel_id: str | None = None,
    repo: str | None = None,
) -> RequestScopes:
    """The scopes of a request; a DM's has no channel scope (`derive_scope_key`)."""
    shared_channel = channel_id if channel_id and not is_dm_conversation(channel_id.strip()) else None
    return RequestScopes(
        org=derive_scope_key("org", organization),
        repo=derive_scope_key("repo", repo) if repo else None,
        channel=derive_scope_key("channel", shared_channel) if shared_channel else None,
        user=derive_scope_key("user", user_id) if user_id else None,
    )


def list_scope_keys(scopes: RequestScopes) -> list[str]:
    """Widest shared scope first, the person's own last: org, repo, channel, user."""
    ordered = (scopes.org, scopes.repo, scopes.channel, scopes.user)
    return [key for key in ordered if key is not None]


def is_shared(scope_key: str) -> bool:
    """Every scope but a person's own: what several people read, and what review holds for an admin."""
    return scope_kind(scope_key) != "user"


def scope_kind(scope_key: str) -> str:
    """The kind prefix of a key (`org`, `repo`, `channel`, `user`), or '' when it has none."""
    kind, sep, _ = scope_key.partition(":")
    return kind if sep else ""
