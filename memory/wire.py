"""The memory service's JSON shapes: camelCase records and candidates, one (de)serializer each.

The service and its HTTP client both go through these functions, so the two ends cannot drift apart.
Optional fields absent in storage are omitted on the wire, never sent as `null`. Times are epoch
seconds (floats), as in `MemoryRecord`.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard, cast, get_args

from memory.rules.claims import validate_claim
from memory.rules.curation import validate_actor
from memory.types import (
    CURATION_ACTIONS,
    ERASE_REASONS,
    MAX_KEYWORD_CHARS,
    MAX_LIMIT,
    MAX_OBSERVED_AT,
    MAX_RECORD_KEYWORDS,
    MAX_REF_CHARS,
    MAX_TEXT_CHARS,
    ORIGINS,
    RECORD_KINDS,
    AuditQuery,
    CurationAction,
    CurationEntry,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    Origin,
    OriginLabel,
    Ranked,
    ReadAudit,
    RecordKind,
    RecordStatus,
    RecordVersion,
    SourceLink,
    WriteResult,
)

# Field caps of a write batch; the per-field caps live in memory.types, shared with every store.
# The scope key and record id caps live with their own rules.
MAX_BATCH = 50
# The most scopes one /retrieve_many reads: a request has at most org, repo, channel and user (the
# client asks for more in several requests).
MAX_SCOPES = 4
MAX_QUERY_CHARS = 4000

RECORD_STATUSES: frozenset[str] = frozenset(get_args(RecordStatus))

JsonObject = dict[str, Any]

# JSON may spell a lone UTF-16 surrogate (`"\\ud800"`); such a string cannot be stored or sent back.
_SURROGATE = re.compile("[\ud800-\udfff]")


class WireError(ValueError):
    """A JSON value does not have the shape the contract promises; the message names the field."""


# --- records: the service writes them, the client reads them -------------------------------------


def record_to_wire(record: MemoryRecord) -> JsonObject:
    """A stored record as the service sends it; unset optionals are left out, never `null`."""
    out: JsonObject = {
        "id": record.id,
        "scopeKey": record.scope_key,
        "kind": record.kind,
        "text": record.text,
        "keywords": list(record.keywords),
        "sourceThreadKey": record.source_thread_key,
        "createdAt": record.created_at,
        "useCount": record.use_count,
        "status": record.status,
    }
    if record.origin != "unknown":  # absent reads back as unknown
        out["origin"] = record.origin
    if record.origin_conversation is not None:
        out["originConversation"] = record.origin_conversation
    if record.source_run_id is not None:
        out["sourceRunId"] = record.source_run_id
    if record.last_used_at is not None:
        out["lastUsedAt"] = record.last_used_at
    if record.confidence is not None:
        out["confidence"] = record.confidence
    if record.supersedes is not None:
        out["supersedes"] = record.supersedes
    if record.observed_at is not None:
        out["observedAt"] = record.observed_at
    return out


def record_from_wire(value: object) -> MemoryRecord:
    """A record from a service reply; raises WireError so the caller can drop just this one."""
    obj = _object(value, "record")
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in RECORD_KINDS:  # a list or object is unhashable
        raise WireError("record.kind must be 'fact' or 'summary'")
    status = obj.get("status", "active")
    if not isinstance(status, str) or status not in RECORD_STATUSES:
        raise WireError("record.status is not a known status")
    use_count = obj.get("useCount", 0)
    if not _is_int(use_count) or use_count < 0:
        raise WireError("record.useCount must be a non-negative integer")
    return MemoryRecord(
        id=_nonempty_str(obj.get("id"), "record.id"),
        scope_key=_nonempty_str(obj.get("scopeKey"), "record.scopeKey"),
        kind=cast(RecordKind, kind),
        text=_str(obj.get("text"), "record.text"),
        source_thread_key=_str(obj.get("sourceThreadKey"), "record.sourceThreadKey"),
        created_at=_number(obj.get("createdAt"), "record.createdAt"),
        keywords=_keywords(obj.get("keywords"), "record.keywords", limit=None),
        source_run_id=_optional_str(obj.get("sourceRunId"), "record.sourceRunId"),
        last_used_at=_optional_number(obj.get("lastUsedAt"), "record.lastUsedAt"),
        use_count=use_count,
        confidence=_optional_number(obj.get("confidence"), "record.confidence"),
        supersedes=_optional_str(obj.get("supersedes"), "record.supersedes"),
        status=cast(RecordStatus, status),
        origin=_origin(obj.get("origin"), "record.origin"),
        origin_conversation=_optional_str(obj.get("originConversation"), "record.originConversation"),
        observed_at=_optional_number(obj.get("observedAt"), "record.observedAt"),
    )


def ranked_to_wire(ranked: Ranked) -> JsonObject:
    """A record of a multi-scope retrieve: the record's fields plus its relevance (the ranking's score
    without recency), so the caller merges the scopes as the store ranked them. Never a vector."""
    return {**record_to_wire(ranked.record), "relevance": ranked.relevance}


def ranked_from_wire(value: object) -> Ranked:
    record = record_from_wire(value)
    relevance = _number(_object(value, "record").get("relevance"), "record.relevance")
    return Ranked(record=record, relevance=relevance)


# --- candidates: the client writes them, the service reads (and validates) them -----------------


def candidate_to_wire(candidate: MemoryCandidate) -> JsonObject:
    out: JsonObject = {
        "kind": candidate.kind,
        "text": candidate.text,
        "sourceThreadKey": candidate.source_thread_key,
    }
    if candidate.origin != "unknown":  # absent reads back as unknown
        out["origin"] = candidate.origin
    if candidate.origin_conversation is not None:
        out["originConversation"] = candidate.origin_conversation
    if candidate.keywords:
        out["keywords"] = list(candidate.keywords)
    if candidate.source_run_id is not None:
        out["sourceRunId"] = candidate.source_run_id
    if candidate.confidence is not None:
        out["confidence"] = candidate.confidence
    if candidate.supersedes is not None:
        out["supersedes"] = candidate.supersedes
    if candidate.observed_at is not None:
        out["observedAt"] = candidate.observed_at
    return out


def candidate_from_wire(value: object, index: int) -> MemoryCandidate:
    """One `records[i]` of a /write body, validated with the seam's field caps (WireError names the field)."""
    at = f"records[{index}]"
    obj = _object(value, at)
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in RECORD_KINDS:  # a list or object is unhashable
        raise WireError(f"{at}.kind must be 'fact' or 'summary'")
    text = text_from_wire(obj.get("text"), f"{at}.text")
    thread = obj.get("sourceThreadKey")
    if not isinstance(thread, str) or not thread or len(thread) > MAX_REF_CHARS:
        raise WireError(
            f"{at}.sourceThreadKey must be a non-empty string of at most {MAX_REF_CHARS} characters"
        )
    _str(thread, f"{at}.sourceThreadKey")
    confidence = obj.get("confidence")
    if confidence is not None and (not _is_number(confidence) or not 0.0 <= confidence <= 1.0):
        raise WireError(f"{at}.confidence must be a number in [0, 1]")
    observed = obj.get("observedAt")
    if observed is not None:
        observed = epoch_from_wire(observed, f"{at}.observedAt")
    return MemoryCandidate(
        kind=cast(RecordKind, kind),
        text=text,
        source_thread_key=thread,
        keywords=_keywords(obj.get("keywords"), f"{at}.keywords", limit=MAX_RECORD_KEYWORDS),
        source_run_id=_ref(obj.get("sourceRunId"), f"{at}.sourceRunId"),
        confidence=float(confidence) if confidence is not None else None,
        supersedes=_ref(obj.get("supersedes"), f"{at}.supersedes"),
        origin=_origin(obj.get("origin"), f"{at}.origin"),
        origin_conversation=_ref(obj.get("originConversation"), f"{at}.originConversation"),
        observed_at=observed,
    )


def typed_in_to_wire(label: OriginLabel) -> JsonObject:
    """Where an edit's words were typed: its origin and the conversation it names, if any."""
    out: JsonObject = {"origin": label[0]}
    if label[1] is not None:
        out["conversation"] = label[1]
    return out


def typed_in_from_wire(value: object, field: str = "typedIn") -> OriginLabel:
    """An object whose `origin` is required. Absent, it is refused too: taking a client that omits
    it for a machine surface would let words typed in a DM land under a public origin."""
    if value is None:
        raise WireError(f"{field} is required: where the edit's words were typed")
    obj = _object(value, field)
    if obj.get("origin") is None:
        raise WireError(f"{field}.origin must be one of {', '.join(sorted(ORIGINS))}")
    return _origin(obj.get("origin"), f"{field}.origin"), _ref(
        obj.get("conversation"), f"{field}.conversation"
    )


def text_from_wire(value: object, field: str) -> str:
    """A record's text as a writer sends it (a candidate's, an edit's): non-empty, capped, Unicode."""
    if not isinstance(value, str) or not value.strip():
        raise WireError(f"{field} must be a non-empty string")
    _str(value, field)
    if len(value) > MAX_TEXT_CHARS:
        raise WireError(f"{field} must be at most {MAX_TEXT_CHARS} characters")
    return value


def write_result_to_wire(result: WriteResult) -> JsonObject:
    """What a write (or a pending write) did, as counts."""
    return {
        "ok": True,
        "inserted": result.inserted,
        "deduped": result.deduped,
        "superseded": result.superseded,
        "evicted": result.evicted,
    }


# --- provenance: run sources, erase reasons, the read audit (ids only, never text) ----------------

MAX_REFS = 200  # messages of one run, records of one read, scopes of one read


def erase_reason_from_wire(value: object) -> EraseReason:
    if not isinstance(value, str) or value not in ERASE_REASONS:
        raise WireError(f"reason must be one of {sorted(ERASE_REASONS)}")
    return cast(EraseReason, value)


def link_to_wire(link: SourceLink) -> JsonObject:
    return {"runId": link.run_id, "scopeKeys": list(link.scope_keys), "messages": list(link.messages)}


def link_from_wire(value: object) -> SourceLink:
    obj = _object(value, "body")
    return SourceLink(
        run_id=_ref_required(obj.get("runId"), "runId"),
        scope_keys=_refs(obj.get("scopeKeys"), "scopeKeys"),
        messages=_refs(obj.get("messages"), "messages"),
    )


def messages_from_wire(value: object) -> tuple[str, ...]:
    return _refs(value, "messages")


def claim_to_wire(key: str, ttl_seconds: float) -> JsonObject:
    return {"key": key, "ttlSeconds": ttl_seconds}


def claim_from_wire(value: object) -> tuple[str, float]:
    """An event claim's key and time-to-live (memory/rules/claims.py)."""
    obj = _object(value, "body")
    key = obj.get("key")
    if isinstance(key, str) and not is_unicode_text(key):
        raise WireError("key must be valid Unicode text")
    try:
        return validate_claim(key, obj.get("ttlSeconds"), ttl_field="ttlSeconds")
    except ValueError as error:
        raise WireError(str(error)) from None


def audit_to_wire(entry: ReadAudit) -> JsonObject:
    out: JsonObject = {
        "runId": entry.run_id,
        "threadKey": entry.thread_key,
        "scopeKeys": list(entry.scope_keys),
        "records": [{"id": record_id, "rank": rank} for record_id, rank in entry.records],
        "at": entry.at,
    }
    if entry.asker is not None:
        out["asker"] = entry.asker
    return out


def audit_from_wire(value: object) -> ReadAudit:
    obj = _object(value, "audit")
    raw = obj.get("records")
    if not isinstance(raw, list) or len(raw) > MAX_REFS:
        raise WireError(f"audit.records must be an array of at most {MAX_REFS} items")
    records: list[tuple[str, int]] = []
    for index, item in enumerate(raw):
        pair = _object(item, f"audit.records[{index}]")
        rank = pair.get("rank")
        if not _is_int(rank) or rank < 0:
            raise WireError(f"audit.records[{index}].rank must be a non-negative integer")
        records.append((_ref_required(pair.get("id"), f"audit.records[{index}].id"), rank))
    return ReadAudit(
        run_id=_ref_required(obj.get("runId"), "audit.runId"),
        thread_key=_ref_required(obj.get("threadKey"), "audit.threadKey"),
        asker=_ref(obj.get("asker"), "audit.asker"),
        scope_keys=_refs(obj.get("scopeKeys"), "audit.scopeKeys"),
        records=tuple(records),
        at=_number(obj.get("at"), "audit.at"),
    )


def audit_query_to_wire(query: AuditQuery) -> JsonObject:
    out: JsonObject = {"limit": query.limit}
    for name, value in (
        ("recordId", query.record_id),
        ("runId", query.run_id),
        ("userId", query.user_id),
        ("threadKey", query.thread_key),
    ):
        if value is not None:
            out[name] = value
    return out


def audit_query_from_wire(value: object) -> AuditQuery:
    obj = _object(value, "body")
    limit = obj.get("limit", 20)
    if not _is_int(limit) or not 1 <= limit <= MAX_LIMIT:
        raise WireError(f"limit must be an integer from 1 to {MAX_LIMIT}")
    fields = {
        name: _ref(obj.get(wire), wire)
        for name, wire in (
            ("record_id", "recordId"),
            ("run_id", "runId"),
            ("user_id", "userId"),
            ("thread_key", "threadKey"),
        )
    }
    if sum(1 for v in fields.values() if v is not None) != 1:
        raise WireError("exactly one of recordId, runId, userId, threadKey is required")
    return AuditQuery(limit=limit, **fields)


# --- curation: the review queue, a record's versions, the curation log (ids, never text) -----------


def actor_from_wire(value: object, field: str = "actor") -> str:
    """Who did a curation action: a scope key (`user:slack:U1`), `run:<id>`, `system`, `machine`."""
    try:
        actor = validate_actor(value)
    except ValueError as exc:
        raise WireError(f"{field}{str(exc).removeprefix('actor')}") from None
    return _str(actor, field)


def entry_to_wire(entry: CurationEntry) -> JsonObject:
    out: JsonObject = {
        "recordId": entry.record_id,
        "scopeKey": entry.scope_key,
        "action": entry.action,
        "actor": entry.actor,
        "at": entry.at,
    }
    if entry.related_id is not None:
        out["relatedId"] = entry.related_id
    return out


def entry_from_wire(value: object, field: str = "entry") -> CurationEntry:
    obj = _object(value, field)
    action = obj.get("action")
    if not isinstance(action, str) or action not in CURATION_ACTIONS:  # a list or object is unhashable
        raise WireError(f"{field}.action must be one of {', '.join(sorted(CURATION_ACTIONS))}")
    return CurationEntry(
        record_id=_ref_required(obj.get("recordId"), f"{field}.recordId"),
        scope_key=_ref_required(obj.get("scopeKey"), f"{field}.scopeKey"),
        action=cast(CurationAction, action),
        actor=actor_from_wire(obj.get("actor"), f"{field}.actor"),
        at=epoch_from_wire(obj.get("at"), f"{field}.at"),
        related_id=_ref(obj.get("relatedId"), f"{field}.relatedId"),
    )


def version_to_wire(version: RecordVersion) -> JsonObject:
    """One version of a record's chain; an erased version's text is absent, never `null`."""
    out: JsonObject = {
        "id": version.id,
        "scopeKey": version.scope_key,
        "status": version.status,
        "createdAt": version.created_at,
        "entries": [entry_to_wire(entry) for entry in version.entries],
    }
    if version.text is not None:
        out["text"] = version.text
    if version.source_run_id is not None:
        out["sourceRunId"] = version.source_run_id
    if version.erased_reason is not None:
        out["erasedReason"] = version.erased_reason
    if version.supersedes is not None:
        out["supersedes"] = version.supersedes
    return out


def version_from_wire(value: object, field: str = "version") -> RecordVersion:
    obj = _object(value, field)
    status = obj.get("status")
    if not isinstance(status, str) or status not in RECORD_STATUSES:
        raise WireError(f"{field}.status is not a known status")
    reason = obj.get("erasedReason")
    if reason is not None:
        reason = erase_reason_from_wire(reason)
    raw = obj.get("entries")
    if not isinstance(raw, list):
        raise WireError(f"{field}.entries must be an array")
    return RecordVersion(
        id=_nonempty_str(obj.get("id"), f"{field}.id"),
        scope_key=_nonempty_str(obj.get("scopeKey"), f"{field}.scopeKey"),
        status=cast(RecordStatus, status),
        created_at=_number(obj.get("createdAt"), f"{field}.createdAt"),
        text=_optional_str(obj.get("text"), f"{field}.text"),
        source_run_id=_optional_str(obj.get("sourceRunId"), f"{field}.sourceRunId"),
        erased_reason=reason,
        entries=tuple(entry_from_wire(item, f"{field}.entries[{i}]") for i, item in enumerate(raw)),
        supersedes=_ref(obj.get("supersedes"), f"{field}.supersedes"),
    )


def _ref_required(value: object, field: str) -> str:
    ref = _ref(value, field)
    if not ref:
        raise WireError(f"{field} must be a non-empty string of at most {MAX_REF_CHARS} characters")
    return ref


def _refs(value: object, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_REFS:
        raise WireError(f"{field} must be an array of at most {MAX_REFS} strings")
    return tuple(_ref_required(item, f"{field}[{index}]") for index, item in enumerate(value))


# --- shape checks ---------------------------------------------------------------------------------


def _object(value: object, field: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise WireError(f"{field} must be a JSON object")
    return cast(dict[str, object], value)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def is_unicode_text(value: str) -> bool:
    """False for a string holding a lone surrogate: not valid Unicode text, not encodable as UTF-8."""
    return _SURROGATE.search(value) is None


def _str(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise WireError(f"{field} must be a string")
    if not is_unicode_text(value):
        raise WireError(f"{field} must be valid Unicode text")
    return value


def _nonempty_str(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise WireError(f"{field} must be a non-empty string")
    return value


def _optional_str(value: object, field: str) -> str | None:
    return None if value is None else _str(value, field)


def _number(value: object, field: str) -> float:
    if not _is_number(value):
        raise WireError(f"{field} must be a finite number")
    return float(value)


def _optional_number(value: object, field: str) -> float | None:
    return None if value is None else _number(value, field)


def epoch_from_wire(value: object, field: str) -> float:
    """A time in epoch seconds, from 0 to the latest a calendar can show (3000-01-01)."""
    if not _is_number(value) or not 0 <= value <= MAX_OBSERVED_AT:
        raise WireError(f"{field} must be epoch seconds from 0 to {MAX_OBSERVED_AT:.0f}")
    return float(value)


def _ref(value: object, field: str) -> str | None:
    """An optional provenance reference: absent (or null) → None, else a string ≤ 200 characters."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_REF_CHARS:
        raise WireError(f"{field} must be a string of at most {MAX_REF_CHARS} characters")
    return _str(value, field)


def _origin(value: object, field: str) -> Origin:
    """Where a record was learned: absent (a writer that predates origins) → `unknown`, read as dm."""
    if value is None:
        return "unknown"
    if not isinstance(value, str) or value not in ORIGINS:  # a list or object is unhashable
        raise WireError(f"{field} must be one of {', '.join(sorted(ORIGINS))}")
    return cast(Origin, value)


def _keywords(value: object, field: str, *, limit: int | None) -> tuple[str, ...]:
    """Absent → (); on input (limit set) at most 20 non-empty strings of ≤ 64 characters."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(k, str) and is_unicode_text(k) for k in value):
        raise WireError(f"{field} must be an array of strings")
    if limit is not None and (len(value) > limit or not all(0 < len(k) <= MAX_KEYWORD_CHARS for k in value)):
        raise WireError(f"{field} must hold at most {limit} strings of 1–{MAX_KEYWORD_CHARS} characters")
    return tuple(cast(list[str], value))
