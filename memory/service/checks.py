"""The memory service's request checks, shared by every route: each refuses with a 400 naming the field.

A route validates its whole body with these before it touches the store, so a malformed request never
reaches it (nor bumps a usage count).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from memory.rules.engine import is_valid_cap
from memory.rules.person import USER_PREFIX, validate_pseudonym
from memory.rules.scope import validate_scope_key
from memory.types import MAX_LIMIT, MAX_SCOPE_CAP, MemoryCandidate
from memory.wire import (
    MAX_BATCH,
    MAX_QUERY_CHARS,
    MAX_SCOPES,
    WireError,
    candidate_from_wire,
    is_unicode_text,
)

MAX_ID_CHARS = 200
_ID_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")

LogFields = dict[str, object]
Handler = Callable[[dict[str, object], LogFields], Awaitable[dict[str, object]]]


class Refusal(Exception):
    """A request the service answers with a 4xx and a reason naming what was wrong."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def parsed(parse: Callable[[Any], Any], value: object) -> Any:
    """A wire parser's WireError as a 400 naming the field."""
    try:
        return parse(value)
    except WireError as exc:
        raise Refusal(400, str(exc)) from None


def scope_key(body: dict[str, object], fields: LogFields, name: str = "scopeKey") -> str:
    """The body's `name` as a valid scope key, logged as `scope_key`."""
    try:
        key = validate_scope_key(body.get(name))
    except ValueError as exc:
        raise Refusal(400, f"{name} is invalid: {exc}") from None
    fields["scope_key"] = key
    return key


def person_key(body: dict[str, object], fields: LogFields) -> str:
    """`personKey`: a user scope key (`user:…`), the person whose log entries are renamed (not
    logged: memory.rules.person.logged_scope)."""
    key = scope_key(body, {}, "personKey")  # never logged: the person is being erased
    if not key.startswith(USER_PREFIX) or key == USER_PREFIX:
        raise Refusal(400, "personKey is invalid: it must be a user scope key (`user:…`)")
    return key


def pseudonym(value: object) -> str:
    try:
        return validate_pseudonym(value)
    except ValueError as exc:
        raise Refusal(400, f"pseudonym is invalid: {exc}") from None


def scope_keys(body: dict[str, object], fields: LogFields) -> list[str]:
    raw = body.get("scopeKeys")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_SCOPES:
        raise Refusal(400, f"scopeKeys must be an array of 1 to {MAX_SCOPES} scope keys")
    keys: list[str] = []
    for index, value in enumerate(raw):
        try:
            key = validate_scope_key(value)
        except ValueError as exc:
            raise Refusal(400, f"scopeKeys[{index}] is invalid: {exc}") from None
        if key in keys:
            raise Refusal(400, f"scopeKeys[{index}] repeats a scope key")
        keys.append(key)
    fields["scope_keys"] = keys
    return keys


def query(value: object, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise Refusal(400, "query must be a string")
    if len(value) > MAX_QUERY_CHARS:
        raise Refusal(400, f"query must be at most {MAX_QUERY_CHARS} characters")
    if not is_unicode_text(value):
        raise Refusal(400, "query must be valid Unicode text")
    return value


def limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise Refusal(400, f"limit must be an integer from 1 to {MAX_LIMIT}")
    return value


def cap(value: object) -> int | None:
    if value is None:
        return None
    if not is_valid_cap(value):
        raise Refusal(400, f"cap must be an integer from 1 to {MAX_SCOPE_CAP}")
    return value


def record_id(value: object, field: str = "id") -> str:
    if not isinstance(value, str) or not value:
        raise Refusal(400, f"{field} must be a non-empty string")
    if len(value) > MAX_ID_CHARS:
        raise Refusal(400, f"{field} must be at most {MAX_ID_CHARS} characters")
    if _ID_FORBIDDEN.search(value):
        raise Refusal(400, f"{field} must not contain whitespace or control characters")
    if not is_unicode_text(value):
        raise Refusal(400, f"{field} must be valid Unicode text")
    return value


def candidates(body: dict[str, object]) -> list[MemoryCandidate]:
    """A write batch's `records`, each validated with the seam's field caps."""
    raw = body.get("records")
    if not isinstance(raw, list):
        raise Refusal(400, "records must be an array")
    if len(raw) > MAX_BATCH:
        raise Refusal(400, f"records must hold at most {MAX_BATCH} candidates")
    try:
        return [candidate_from_wire(item, index) for index, item in enumerate(raw)]
    except WireError as exc:
        raise Refusal(400, str(exc)) from None
