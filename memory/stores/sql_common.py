"""What the SQLite and the PostgreSQL store do the same way, written once.

A stored row becomes a `MemoryRecord` by one rule (an unknown origin reads as `unknown`, never wider);
an erase scrubs every column but the ones `ERASE_KEEPS` names by one rule; a read's results are handed
back as their usage bump leaves them; and the small bookkeeping of source rows and audit filters is
the same in both. No SQL runs here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Literal, get_args

import structlog

from memory.ranking.fusion import Ranked
from memory.rules.engine import ERASE_KEEPS
from memory.rules.visibility import SLASH_THREAD_SUFFIX, typed_alone
from memory.types import (
    AuditQuery,
    CurationAction,
    CurationEntry,
    MemoryRecord,
    Origin,
    RecordKind,
    RecordStatus,
    SourceLink,
    WriteResult,
)

log = structlog.get_logger("memory")

_STATUSES: dict[str, RecordStatus] = {
    "active": "active",
    "superseded": "superseded",
    "forgotten": "forgotten",
    "evicted": "evicted",
    "pending": "pending",
}
_ACTIONS: dict[str, CurationAction] = {action: action for action in get_args(CurationAction)}
_KINDS: dict[str, RecordKind] = {"fact": "fact", "summary": "summary"}
# An unrecognised stored origin reads as `unknown` (shown only to the owner): never wider.
_ORIGINS: dict[str, Origin] = {origin: origin for origin in get_args(Origin)}

# Which of its keys an audit query asks by (the first one set, in this order).
AuditKey = Literal["record", "run", "user", "thread"]


def record_of(
    record_id: Any,
    scope_key: Any,
    kind: Any,
    text: Any,
    keywords: tuple[str, ...],
    source_thread_key: Any,
    source_run_id: Any,
    created_at: Any,
    last_used_at: Any,
    use_count: Any,
    confidence: Any,
    supersedes: Any,
    status: Any,
    origin: Any,
    origin_conversation: Any,
    observed_at: Any,
) -> MemoryRecord:
    """A stored row's values as the record they hold (both schemas' columns, each store's order)."""
    return MemoryRecord(
        id=str(record_id),
        scope_key=str(scope_key),
        kind=_KINDS[str(kind)],
        text=str(text),
        keywords=keywords,
        source_thread_key=str(source_thread_key),
        source_run_id=None if source_run_id is None else str(source_run_id),
        created_at=float(created_at),
        last_used_at=None if last_used_at is None else float(last_used_at),
        use_count=int(use_count),
        confidence=None if confidence is None else float(confidence),
        supersedes=None if supersedes is None else str(supersedes),
        status=_STATUSES[str(status)],
        origin=_ORIGINS.get(str(origin), "unknown"),
        origin_conversation=None if origin_conversation is None else str(origin_conversation),
        # A row an older replica wrote has none: it was observed no later than it was written.
        observed_at=float(created_at) if observed_at is None else float(observed_at),
    )


def stored_values(record: MemoryRecord) -> tuple[object, ...]:
    """The record's provenance, dates, usage and status, in the order both schemas' INSERTs name
    them (after its identity, text and keywords)."""
    return (
        record.source_thread_key,
        record.source_run_id,
        record.created_at,
        record.last_used_at,
        record.use_count,
        record.confidence,
        record.supersedes,
        record.status,
    )


def scrub_assignments(columns: Iterable[tuple[str, bool, str | None]]) -> str:
    """The erase's SET list from the live table's (name, nullable, default) columns: every column but
    the kept ones scrubbed to NULL where it may be, else its default, else ''. Read from the table, so
    a column added later (a vector, stems) is scrubbed without anyone remembering to."""
    parts = []
    for name, nullable, default in columns:
        if name in ERASE_KEEPS:
            continue
        value = "NULL" if nullable else (default if default is not None else "''")
        parts.append(f"{name} = {value}")
    return ", ".join(parts)


# The notes saved with the `/memory` slash command: a `LIKE` pattern on the source thread key.
SLASH_THREADS = f"%{SLASH_THREAD_SUFFIX}"

# The marker (in each store's meta table) that the slash notes saved before `typed_alone` are relabelled.
SLASH_MARKER = ("slash_notes", "typed_alone")


def slash_relabels(found: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """The one-time relabelling of notes saved with the `/memory` slash command in a channel before
    such a note for the typist's own scope was labelled `dm` (`typed_alone`): of the (scope key,
    label) pairs the slash notes hold, each to change, as (new label, scope key, old label)."""
    changes: list[tuple[str, str, str]] = []
    for scope_key, label in found:
        old = _ORIGINS.get(label, "unknown")
        new = typed_alone(old, scope_key)
        if new != old:
            changes.append((new, scope_key, label))
    return changes


def log_relabelled(store: str, records: int, **fields: object) -> None:
    if records:
        log.info("memory.store.relabelled", store=store, records=records, reason="slash_notes", **fields)


def bumped(ranked: Iterable[Ranked], now: float) -> list[Ranked]:
    """A read's results as its usage bump leaves them: used now, once more — unless a later use is
    stored already (another replica's clock ahead of this one's), which the bump's write keeps too."""
    return [
        Ranked(
            replace(
                r.record,
                last_used_at=now if r.record.last_used_at is None else max(now, r.record.last_used_at),
                use_count=r.record.use_count + 1,
            ),
            r.relevance,
        )
        for r in ranked
    ]


def source_rows(link: SourceLink, now: float) -> list[tuple[str, str, str, float]]:
    """(message, run_id, scope_key, linked_at) for every message and scope a run was linked to."""
    return [(message, link.run_id, key, now) for message in link.messages for key in link.scope_keys]


def log_evictions(scope_key: str, candidates: int, result: WriteResult) -> None:
    """A write that evicted records over the scope's cap says so (ids and counts only)."""
    if result.evicted:
        log.info("memory.store.evicted", scope_key=scope_key, candidates=candidates, evicted=result.evicted)


def audit_key(query: AuditQuery) -> tuple[AuditKey, str | None]:
    """Which key an audit query asks by, and its value."""
    if query.record_id is not None:
        return "record", query.record_id
    if query.run_id is not None:
        return "run", query.run_id
    if query.user_id is not None:
        return "user", query.user_id
    return "thread", query.thread_key


def curation_entry(row: Sequence[Any]) -> CurationEntry:
    """A stored curation log row (record id, scope key, action, actor, time, related id) as its entry."""
    record_id, scope_key, action, actor, at, related_id = row
    return CurationEntry(
        record_id=str(record_id),
        scope_key=str(scope_key),
        action=_ACTIONS[str(action)],
        actor=str(actor),
        at=float(at),
        related_id=None if related_id is None else str(related_id),
    )
