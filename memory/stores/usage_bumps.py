"""Usage bumps held back from the read path and written in batches, and the timers that write them:
the SQLite store's and the PostgreSQL store's.

A bump written on every read would make each retrieve a write transaction: on SQLite behind the
database's write lock (so readers in several processes serialize on it), on PostgreSQL a round trip
and a commit as long as the read itself. So a retrieve records its bumps here and the store writes a
scope's pending bumps in one transaction: within `FLUSH_SECONDS`, before any other operation of the
store, and when the store closes.

Readers see no difference in this process: every record a retrieve reads has its pending bumps laid
over it (`overlay`), so ranking and the returned counts are exactly those of an immediate bump. What is
weaker: another process (another replica) sees a bump up to `FLUSH_SECONDS` late, and a crash loses at
most that long of usage counts (never a record).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace

from memory.types import MemoryRecord

FLUSH_SECONDS = 0.5
FLUSH_RECORDS = 512  # a scope with this many pending bumps is written at once


@dataclass
class PendingBumps:
    """One scope's bumps not yet written: per record id, the uses and the latest time of use."""

    since: float  # monotonic time of the oldest pending bump
    uses: dict[str, tuple[int, float]] = field(default_factory=dict)
    # The last overlay per id, kept while neither the record read nor its pending bump changed: the
    # hot records of a scope are read again and again between flushes.
    _overlaid: dict[str, tuple[MemoryRecord, tuple[int, float], MemoryRecord]] = field(default_factory=dict)

    def add(self, record_ids: list[str], used_at: float) -> None:
        """Like `SET last_used_at = ?, use_count = use_count + 1`: the last use's time wins."""
        for record_id in record_ids:
            count, _ = self.uses.get(record_id, (0, used_at))
            self.uses[record_id] = (count + 1, used_at)

    def overlay(self, record: MemoryRecord) -> MemoryRecord:
        """The record as an immediate bump would have left it."""
        pending = self.uses.get(record.id)
        if pending is None:
            return record
        last = self._overlaid.get(record.id)
        if last is not None and last[0] is record and last[1] == pending:
            return last[2]
        count, used_at = pending
        if record.last_used_at is not None:  # another process's use may be the later one
            used_at = max(used_at, record.last_used_at)
        bumped = replace(record, use_count=record.use_count + count, last_used_at=used_at)
        self._overlaid[record.id] = (record, pending, bumped)
        return bumped

    def due(self, now: float) -> bool:
        return len(self.uses) >= FLUSH_RECORDS or now - self.since >= FLUSH_SECONDS

    def rows(self) -> list[tuple[float, int, str]]:
        """`(last_used_at, uses, id)` rows for `UPDATE … SET last_used_at = …, use_count = use_count + ?`."""
        return [(used_at, count, record_id) for record_id, (count, used_at) in self.uses.items()]


class FlushTimers:
    """The event loop's side of the batching: a scope with pending bumps gets one timer, and when it
    fires, one task that has the store write them (`flush`)."""

    def __init__(self, flush: Callable[[str], Coroutine[object, object, None]]) -> None:
        self._flush = flush
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def soon(self, scope_key: str, pending: bool) -> None:
        """Make sure the scope's pending bumps (if `pending`) are written within FLUSH_SECONDS."""
        if not pending or scope_key in self._timers or self._closed:
            return
        loop = asyncio.get_running_loop()
        self._timers[scope_key] = loop.call_later(FLUSH_SECONDS, self._start, scope_key)

    def _start(self, scope_key: str) -> None:
        self._timers.pop(scope_key, None)
        if self._closed:
            return
        task = asyncio.get_running_loop().create_task(self._flush(scope_key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        """No timer fires after this (the store's shutdown writes what is pending)."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
