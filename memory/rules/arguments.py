"""How a store takes a call's arguments, for every store alike: the store front over each of its
backends (the memory service's HTTP client among them) applies these."""

from __future__ import annotations

from collections.abc import Sequence

from memory.rules.scope import validate_scope_key
from memory.types import MAX_LIMIT, SourceLink


def distinct_scopes(scope_keys: Sequence[str]) -> list[str]:
    """A multi-scope read's scopes, each once and in order; a malformed key is refused."""
    keys = list(dict.fromkeys(scope_keys))
    for key in keys:
        validate_scope_key(key)
    return keys


def fetch_ids(record_ids: Sequence[str]) -> list[str]:
    """The ids a fetch looks up: each once, in order, at most MAX_LIMIT."""
    return list(dict.fromkeys(record_ids))[:MAX_LIMIT]


def linkable(link: SourceLink) -> bool:
    """Whether a source link has anything to store (a message and a scope); a malformed key is refused."""
    if not link.messages or not link.scope_keys:
        return False
    for key in link.scope_keys:
        validate_scope_key(key)
    return True
