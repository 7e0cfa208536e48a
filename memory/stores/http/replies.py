"""The HTTP memory client's reading of the service's replies: what a well-formed answer holds.

A reply that is not what the contract promises is a `CallFailed` (or a `MemoryStoreError` where a
person asked), never a guess; a malformed record is dropped on its own and counted.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from memory.types import MemoryRecord, MemoryStoreError, Ranked, WriteResult
from memory.wire import WireError, ranked_from_wire, record_from_wire

T = TypeVar("T")


class CallFailed(Exception):
    """One round trip did not produce a 2xx JSON object; `status` is None for transport failures."""

    def __init__(self, status: int | None, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def ranked_scopes(
    reply: dict[str, Any], scope_keys: Sequence[str]
) -> tuple[dict[str, builtins.list[Ranked]], int]:
    """The reply's well-formed records of the asked scopes (each under its own key), and how many
    others were dropped: a record filed under another scope than its own never gets through."""
    raw = reply.get("scopes")
    if not isinstance(raw, dict):
        raise CallFailed(200, "reply has no scopes object")
    found: dict[str, builtins.list[Ranked]] = {}
    dropped = 0
    for key, items in raw.items():
        if key not in scope_keys or not isinstance(items, builtins.list):
            dropped += len(items) if isinstance(items, builtins.list) else 1
            continue
        for item in items:
            try:
                ranked = ranked_from_wire(item)
            except WireError:
                dropped += 1
                continue
            if ranked.record.scope_key != key:
                dropped += 1
                continue
            found.setdefault(key, []).append(ranked)
    return found, dropped


def count_of(reply: dict[str, Any], name: str, route: str) -> int:
    value = reply.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MemoryStoreError(f"memory service {route}: reply has no count '{name}'", status=200)
    return value


def records_of(reply: dict[str, Any], scope_key: str) -> tuple[builtins.list[MemoryRecord], int]:
    """The reply's well-formed records of this scope, and how many others were dropped."""
    raw = reply.get("records")
    if not isinstance(raw, builtins.list):
        raise CallFailed(200, "reply has no records array")
    records = well_formed(raw, record_from_wire, lambda record: record.scope_key == scope_key)
    return records, len(raw) - len(records)


def entries_of(reply: dict[str, Any], route: str) -> builtins.list[Any]:
    """A reply's `entries` array (a log's or the audit's), still on the wire."""
    raw = reply.get("entries")
    if not isinstance(raw, builtins.list):
        raise MemoryStoreError(f"memory service {route}: reply has no entries array", status=200)
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
        raise MemoryStoreError(f"memory service {route}: reply counts are not integers", status=200)
    return WriteResult(**counts)
