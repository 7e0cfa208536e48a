"""This replica's usage bumps not yet in the database (memory/stores/usage_bumps.py), per scope: those
still pending and those of a flush in flight, both laid over every row a catch-up reads until the
flush that carries them has committed.

A flush runs its UPDATE while reads go on — they see the rows as they were plus these layers — and takes
the scopes' read locks for its COMMIT and the read-back only: a catch-up in between would lay the
in-flight layer over rows that hold it already, and count another transaction's later change as read.
A reader holding those locks never waits for a row lock, so the flush's wait ends. One flush runs at a
time: it holds one pooled connection while it waits, and the readers may need the others.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
import time

from memory.stores.usage_bumps import PendingBumps
from memory.types import MemoryRecord


class HeldBumps:
    """Pending and in-flight bumps per scope. `flushing`: held by the one flush running, and waited
    for by an operation that needs the bumps written."""

    def __init__(self) -> None:
        self._table = threading.Lock()
        self._pending: dict[str, PendingBumps] = {}
        self._in_flight: dict[str, PendingBumps] = {}
        self.flushing = asyncio.Lock()

    def add(self, scope_key: str, record_ids: builtins.list[str], used_at: float) -> None:
        with self._table:
            pending = self._pending.setdefault(scope_key, PendingBumps(since=time.monotonic()))
            pending.add(record_ids, used_at)

    def overlay(self, scope_key: str, record: MemoryRecord) -> MemoryRecord:
        """The record as the database will hold it once this replica's bumps are written."""
        with self._table:
            layers = [self._in_flight.get(scope_key), self._pending.get(scope_key)]
        for layer in layers:  # in-flight first: a pending bump is the later use
            if layer is not None:
                record = layer.overlay(record)
        return record

    def has_pending(self, scope_key: str) -> bool:
        with self._table:
            return scope_key in self._pending

    def unwritten_scopes(self) -> builtins.list[str]:
        """Every scope with a bump not yet committed, pending or in flight."""
        with self._table:
            return builtins.list(dict.fromkeys([*self._pending, *self._in_flight]))

    def start(self, scope_key: str) -> PendingBumps | None:
        """The scope's pending bumps, now in flight. The caller holds `flushing`."""
        with self._table:
            pending = self._pending.pop(scope_key, None)
            if pending is not None:
                self._in_flight[scope_key] = pending
            return pending

    def finish(self, scope_key: str) -> None:
        """The scope's flight committed (or lost). The caller holds the scope's read lock."""
        with self._table:
            self._in_flight.pop(scope_key, None)
