"""Scope keys, derived from request identity and never configured (invariant 4)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ScopeKind = Literal["org", "repo", "channel", "user"]

MAX_SCOPE_KEY_LENGTH = 200
_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


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
    return key


def derive_scope_key(kind: ScopeKind, value: str | None) -> str:
    """`org:<organization>`, `user:<user id>`, `repo:<owner/name>`, `channel:<channel id>`.

    User and channel ids arrive platform-namespaced from the adapter (`slack:U0123`).
    """
    if value is None or not value.strip():
        raise ScopeError(f"a {kind} scope needs a {_INPUT_NAMES[kind]}; refusing an anonymous scope")
    value = value.strip()
    if kind == "repo" and not _REPO.match(value):
        raise ScopeError(f"a repo scope needs owner/name, got {value!r}")
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
    return RequestScopes(
        org=derive_scope_key("org", organization),
        repo=derive_scope_key("repo", repo) if repo else None,
        channel=derive_scope_key("channel", channel_id) if channel_id else None,
        user=derive_scope_key("user", user_id) if user_id else None,
    )


def list_scope_keys(scopes: RequestScopes) -> list[str]:
    """Widest shared scope first, the person's own last: org, repo, channel, user."""
    ordered = (scopes.org, scopes.repo, scopes.channel, scopes.user)
    return [key for key in ordered if key is not None]


def scope_kind(scope_key: str) -> str:
    """The kind prefix of a key (`org`, `repo`, `channel`, `user`), or '' when it has none."""
    kind, sep, _ = scope_key.partition(":")
    return kind if sep else ""
