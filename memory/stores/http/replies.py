"""The HTTP memory client's reading of the service's replies: what a well-formed answer holds.

A reply that is not what the contract promises is a `MemoryStoreError` naming the route (status 200:
the service answered, but not what it promises), never a guess and never an empty answer that only
looks empty. A malformed item (a record, an entry, a scope key) is dropped on its own, with one
warning counting them.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import structlog

from memory.types import MemoryRecord, MemoryStoreError, Ranked, WriteResult
from memory.wire import WireError, ranked_from_wire, record_from_wire

log = structlog.get_logger("memory.http_store")

T = TypeVar("T")


def malformed(route: str, what: str) -> MemoryStoreError:
    return MemoryStoreError(f"memory service {route}: {what}", status=200)


def dropped(route: str, count: int, **fields: object) -> None:
    """One warning for the items of a reply that were dropped (ids and counts only)."""
    if count:
        log.warning("memory.reply_dropped_items", route=route, dropped=count, **fields)


def ranked_scopes(
    reply: dict[str, Any], scope_keys: Sequence[str], route: str
) -> dict[str, builtins.list[Ranked]]:
    """The reply's well-formed records of the asked scopes (each under its own key): a record filed
    under another scope than its own never gets through."""
    raw = reply.get("scopes")
    if not isinstance(raw, dict):
        raise malformed(route, "reply has no scopes object")
    found: dict[str, builtins.list[Ranked]] = {}
    lost = 0
    for key, items in raw.items():
        if key not in scope_keys or not isinstance(items, builtins.list):
            lost += len(items) if isinstance(items, builtins.list) else 1
            continue
        kept = [r for r in well_formed(items, ranked_from_wire) if r.record.scope_key == key]
        lost += len(items) - len(kept)
        if kept:
            found[key] = kept
    dropped(route, lost, scope_keys=builtins.list(scope_keys))
    return found


def records_of(reply: dict[str, Any], scope_key: str, route: str) -> builtins.list[MemoryRecord]:
    """The reply's well-formed records of this scope."""
    raw = reply.get("records")
    if not isinstance(raw, builtins.list):
        raise malformed(route, "reply has no records array")
    records = well_formed(raw, record_from_wire, lambda record: record.scope_key == scope_key)
    dropped(route, len(raw) - len(records), scope_key=scope_key)
    return records


def count_of(reply: dict[str, Any], name: str, route: str) -> int:
    value = reply.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise malformed(route, f"reply has no count '{name}'")
    return value


def flag_of(reply: dict[str, Any], name: str, route: str) -> bool:
    value = reply.get(name)
    if not isinstance(value, bool):
        raise malformed(route, f"reply has no boolean '{name}'")
    return value


def array_of(reply: dict[str, Any], name: str, route: str) -> builtins.list[Any]:
    """A reply's array (a log's entries, a history's versions, scope keys), still on the wire."""
    raw = reply.get(name)
    if not isinstance(raw, builtins.list):
        raise malformed(route, f"reply has no {name} array")
    return raw


def well_formed(
    raw: builtins.list[Any], parse: Callable[[Any], T], keep: Callable[[T], bool] = lambda _: True
) -> builtins.list[T]:
    """The items `parse` reads and `keep` keeps, in order; a malformed item is dropped on its own."""
    found: builtins.list[T] = []
    for item in raw:
        try:
            value = parse(item)
        except WireError:
            continue
        if keep(value):
            found.append(value)
    return found


def write_result(reply: dict[str, Any], route: str) -> WriteResult:
    """A write's counts; absent counts are 0 (a service of an earlier release sends no `evicted`)."""
    counts = {name: reply.get(name, 0) for name in ("inserted", "deduped", "superseded", "evicted")}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()):
        raise malformed(route, "reply counts are not integers")
    return WriteResult(**counts)
