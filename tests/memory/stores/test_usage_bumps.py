"""Pending usage bumps: laid over a record exactly as an immediate bump would leave it."""

from __future__ import annotations

from memory.stores.usage_bumps import FLUSH_RECORDS, FLUSH_SECONDS, PendingBumps
from memory.types import MemoryRecord


def record(record_id: str, use_count: int = 0, last_used_at: float | None = None) -> MemoryRecord:
    return MemoryRecord(
        id=record_id,
        scope_key="org:acme",
        kind="fact",
        text="deploys run on fridays",
        source_thread_key="slack:C1:1.0",
        created_at=100.0,
        use_count=use_count,
        last_used_at=last_used_at,
    )


def test_an_overlay_adds_every_pending_use_and_the_last_use_time() -> None:
    pending = PendingBumps(since=0.0)
    pending.add(["mem:org:acme:1", "mem:org:acme:2"], used_at=200.0)
    pending.add(["mem:org:acme:1"], used_at=150.0)  # a clock that went back: the last use still wins

    bumped = pending.overlay(record("mem:org:acme:1", use_count=3, last_used_at=120.0))

    assert (bumped.use_count, bumped.last_used_at) == (5, 150.0)
    assert pending.overlay(record("mem:org:acme:9")) == record("mem:org:acme:9")
    assert sorted(pending.rows()) == [(150.0, 2, "mem:org:acme:1"), (200.0, 1, "mem:org:acme:2")]


def test_bumps_are_due_after_the_interval_or_at_the_batch_size() -> None:
    pending = PendingBumps(since=10.0)
    pending.add(["mem:org:acme:1"], used_at=1.0)
    assert not pending.due(10.0 + FLUSH_SECONDS / 2)
    assert pending.due(10.0 + FLUSH_SECONDS)
    many = PendingBumps(since=10.0)
    many.add([f"mem:org:acme:{n}" for n in range(FLUSH_RECORDS)], used_at=1.0)
    assert many.due(10.0)
