"""The read audit's one matching rule, for the stores that filter in Python (in-process). Pure."""

from __future__ import annotations

from memory.types import AuditQuery, ReadAudit


def audit_matches(entry: ReadAudit, query: AuditQuery) -> bool:
    """The entry is one the query asks for (exactly one filter is set)."""
    if query.record_id is not None:
        return any(record_id == query.record_id for record_id, _ in entry.records)
    if query.run_id is not None:
        return entry.run_id == query.run_id
    if query.user_id is not None:
        return entry.asker == query.user_id
    return entry.thread_key == query.thread_key
