"""Small builders for records and candidates, shared by the memory tests."""

from __future__ import annotations

from memory.types import MemoryCandidate, MemoryRecord, Origin, RecordStatus

DAY = 24 * 3600.0
NOW = 1_800_000_000.0


def record(
    text: str,
    *,
    id: str = "mem:org:acme:1",
    scope_key: str = "org:acme",
    keywords: tuple[str, ...] = (),
    created_at: float = NOW,
    last_used_at: float | None = None,
    status: RecordStatus = "active",
    source: str = "slack:C1:1.0",
    origin: Origin = "unknown",
    origin_conversation: str | None = None,
    observed_at: float | None = None,
) -> MemoryRecord:
    return MemoryRecord(
        id=id,
        scope_key=scope_key,
        kind="fact",
        text=text,
        keywords=keywords,
        source_thread_key=source,
        created_at=created_at,
        last_used_at=last_used_at,
        status=status,
        origin=origin,
        origin_conversation=origin_conversation,
        observed_at=observed_at,
    )


def fact(
    text: str,
    *,
    supersedes: str | None = None,
    keywords: tuple[str, ...] = (),
    origin: Origin = "unknown",
    origin_conversation: str | None = None,
) -> MemoryCandidate:
    return MemoryCandidate(
        kind="fact",
        text=text,
        source_thread_key="slack:C1:1.0",
        source_run_id="run-1",
        keywords=keywords,
        confidence=0.9,
        supersedes=supersedes,
        origin=origin,
        origin_conversation=origin_conversation,
    )
