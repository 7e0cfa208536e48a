"""The one algorithm every store shares: ranking, write planning, minting and eviction.

Pure: stores feed it the rows it needs and persist what it decides (docs/architecture.md,
invariant 2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeGuard

from memory.rules.redact import redact_candidate
from memory.rules.restate import meaning_key
from memory.rules.scorer import query_terms, query_tokens, recency_score, record_tokens, weighted_score
from memory.types import (
    MAX_KEYWORD_CHARS,
    MAX_OBSERVED_AT,
    MAX_RECORD_KEYWORDS,
    MAX_REF_CHARS,
    MAX_SCOPE_CAP,
    MAX_TEXT_CHARS,
    ORIGINS,
    RECORD_KINDS,
    MemoryCandidate,
    MemoryRecord,
)

# The FTS prefilter takes at most this many of the query's tokens, the longest distinct ones: a long
# pasted message would otherwise OR hundreds of terms together and match nearly every row.
MAX_MATCH_TOKENS = 24
# Candidates a store hands to rank_records: at least this many, else 5 × limit. The floor hands a small
# scope's every match over, so it ranks exactly as rank_records alone would; the prefilter's order only
# chooses which candidates reach the ranking, never the final order.
MIN_CANDIDATES = 50
CANDIDATES_PER_RESULT = 5

_RECORD_ID = re.compile(r"^mem:(?P<scope>.+):(?P<seq>[0-9]+)$")


# What an erase keeps of a row, so provenance and audits still resolve: identity, scope, provenance
# ids, dates, status, origin and the reason. Every other column — text, norm, keywords, tokens,
# stems, a vector, whatever a later migration adds — is scrubbed by every durable store.
ERASE_KEEPS: frozenset[str] = frozenset(
    {
        "seq",
        "id",
        "scope_key",
        "kind",
        "source_thread_key",
        "source_run_id",
        "created_at",
        "observed_at",
        "last_used_at",
        "use_count",
        "confidence",
        "supersedes",
        "status",
        "origin",
        "origin_conversation",
        "erased_reason",
        "erased_at",
    }
)


def record_id(scope_key: str, seq: int) -> str:
    return f"mem:{scope_key}:{seq}"


def parse_record_id(value: str) -> tuple[str, int] | None:
    """`mem:<scope_key>:<n>` → (scope_key, n); anything else → None."""
    match = _RECORD_ID.match(value.strip())
    if match is None:
        return None
    return match.group("scope"), int(match.group("seq"))


def match_tokens(query: str) -> list[str]:
    """The query's distinct tokens for a store's prefilter: longest first (ties by first appearance), ≤ 24.

    Longer tokens are the selective ones; a record matched only by a dropped short token is not a
    candidate (an accepted trade: the prefilter stays bounded on any query).
    """
    return longest_terms(query_terms(query))


def longest_terms(terms: Iterable[str]) -> list[str]:
    """Distinct terms, longest first (ties by first appearance), at most MAX_MATCH_TOKENS (24)."""
    distinct = list(dict.fromkeys(terms))
    order = {token: index for index, token in enumerate(distinct)}
    distinct.sort(key=lambda token: (-len(token), order[token]))
    return distinct[:MAX_MATCH_TOKENS]


def candidate_cap(limit: int) -> int:
    """How many prefiltered candidates reach rank_records: a small scope hands over every match."""
    return max(MIN_CANDIDATES, CANDIDATES_PER_RESULT * limit)


def is_valid_cap(value: object) -> TypeGuard[int]:
    """A per-scope cap is an integer from 1 to MAX_SCOPE_CAP: the config, the wire and every store
    agree."""
    return not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= MAX_SCOPE_CAP


def validate_cap(value: object) -> int:
    if not is_valid_cap(value):
        raise ValueError(f"cap must be an integer from 1 to {MAX_SCOPE_CAP}, got {value!r}")
    return value


def validate_candidate(index: int, candidate: MemoryCandidate) -> None:
    """What every store refuses before anything is written — exactly what the service's wire
    refuses, so a direct write cannot store what the service would not: an unknown kind or origin, a
    non-string field, empty or over-long text, too many or too long keywords, an over-long reference,
    a confidence outside [0, 1], text a database cannot hold (NUL, lone surrogates). The message names
    the field."""
    at = f"candidates[{index}]"
    if candidate.kind not in RECORD_KINDS:
        raise ValueError(f"{at}.kind must be one of {sorted(RECORD_KINDS)}")
    if not isinstance(candidate.origin, str) or candidate.origin not in ORIGINS:
        raise ValueError(f"{at}.origin must be one of {sorted(ORIGINS)}")
    fields: dict[str, object] = {
        "text": candidate.text,
        "source_thread_key": candidate.source_thread_key,
        "source_run_id": candidate.source_run_id,
        "supersedes": candidate.supersedes,
        "origin_conversation": candidate.origin_conversation,
    }
    fields.update({f"keywords[{n}]": keyword for n, keyword in enumerate(candidate.keywords)})
    for name, value in fields.items():
        if value is None and name in _OPTIONAL_REFS:
            continue
        if not isinstance(value, str):
            raise ValueError(f"{at}.{name} must be a string")
        if "\x00" in value:
            raise ValueError(f"{at}.{name} must not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{at}.{name} must be valid Unicode text") from None
        limit, required = _FIELD_CAPS.get(name.partition("[")[0], (MAX_REF_CHARS, False))
        blank = not (value.strip() if name == "text" else value)
        if len(value) > limit or (required and blank):
            shape = "a non-empty string" if required else "a string"
            raise ValueError(f"{at}.{name} must be {shape} of at most {limit} characters")
    if len(candidate.keywords) > MAX_RECORD_KEYWORDS:
        raise ValueError(f"{at}.keywords must hold at most {MAX_RECORD_KEYWORDS} strings")
    confidence = candidate.confidence
    if confidence is not None and (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0.0 <= confidence <= 1.0
    ):
        raise ValueError(f"{at}.confidence must be a number in [0, 1]")
    observed = candidate.observed_at
    if observed is not None and (
        isinstance(observed, bool)
        or not isinstance(observed, int | float)
        or not 0.0 <= observed <= MAX_OBSERVED_AT
    ):
        raise ValueError(f"{at}.observed_at must be epoch seconds from 0 to {MAX_OBSERVED_AT:.0f}")


_OPTIONAL_REFS = frozenset({"source_run_id", "supersedes", "origin_conversation"})
# Per field: the most characters, and whether it must be non-empty (the wire's rules).
_FIELD_CAPS: dict[str, tuple[int, bool]] = {
    "text": (MAX_TEXT_CHARS, True),
    "source_thread_key": (MAX_REF_CHARS, True),
    "keywords": (MAX_KEYWORD_CHARS, True),
}


def prepare_batch(candidates: Iterable[MemoryCandidate]) -> list[MemoryCandidate]:
    """The one step every store takes before it writes: each candidate validated (the message names
    the field), then redacted, so even a direct `store.write` of a secret stores it redacted.

    Validated again once redacted: the marker can be longer than the secret it replaces (`pwd=1`),
    and what is stored must still fit the caps."""
    batch = list(candidates)
    for index, candidate in enumerate(batch):
        validate_candidate(index, candidate)
    redacted = [redact_candidate(candidate) for candidate in batch]
    for index, candidate in enumerate(redacted):
        validate_candidate(index, candidate)
    return redacted


def rank_records(records: Iterable[MemoryRecord], query: str, limit: int, now: float) -> list[MemoryRecord]:
    """Active records that share a whole token with the query, best score first, at most `limit`.

    Never touches usage: bumping is the store's job, on exactly what it returns.
    """
    wanted = query_tokens(query)
    if not wanted or limit <= 0:
        return []
    scored: list[tuple[float, int, MemoryRecord]] = []
    for index, record in enumerate(records):
        if record.status != "active":
            continue
        hits = len(wanted & record_tokens(record))  # tokenized once: the gate and the score share it
        if hits:
            score = weighted_score(hits / len(wanted), recency_score(record, now))
            scored.append((score, index, record))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [record for _, _, record in scored[:limit]]


def matches_filter(record: MemoryRecord, query: str) -> bool:
    """The list filter: some query token hits the record, whole token (same test as retrieval)."""
    return bool(query_tokens(query) & record_tokens(record))


@dataclass(frozen=True, slots=True)
class WritePlan:
    """What one candidate does: bump an existing record, or insert (maybe retiring another)."""

    action: Literal["dedup", "insert"]
    dedup_id: str | None = None
    supersede_id: str | None = None


def plan_write(scope_key: str, candidate: MemoryCandidate, pool: Sequence[MemoryRecord]) -> WritePlan:
    """Decide one candidate against the rows that can matter to it: a dedup, a supersede or an insert.

    The dedup key is `meaning_key`, the same one restatement labels use: a candidate that restates an
    active record (case, punctuation, markup, spacing aside) is folded into it, not stored again.
    `pool` needs only the scope's active rows whose key equals the candidate's (in seq order) and the
    active row the candidate supersedes; anything else in it is ignored.

    A candidate that names a record to supersede dedups only against that record: a collision with an
    unrelated record must never swallow a correction.
    """
    active = [r for r in pool if r.status == "active" and r.scope_key == scope_key]
    norm = meaning_key(candidate.text)
    if candidate.supersedes:
        target = next((r for r in active if r.id == candidate.supersedes), None)
        if target is None:
            return WritePlan("insert")
        if meaning_key(target.text) == norm:
            return WritePlan("dedup", dedup_id=target.id)
        return WritePlan("insert", supersede_id=target.id)
    same = next((r for r in active if meaning_key(r.text) == norm), None)
    if same is not None:
        return WritePlan("dedup", dedup_id=same.id)
    return WritePlan("insert")


def fold_into(record: MemoryRecord, candidate: MemoryCandidate, now: float) -> MemoryRecord:
    """The record a restating candidate confirms: used once more, now, and observed as late as the
    later of the two (a fact heard again is as fresh as its newest telling). Text, origin and
    provenance stay the first record's."""
    heard = now if candidate.observed_at is None else float(candidate.observed_at)
    observed = heard if record.observed_at is None else max(record.observed_at, heard)
    return replace(record, use_count=record.use_count + 1, last_used_at=now, observed_at=observed)


def mint_record(
    scope_key: str, seq: int, candidate: MemoryCandidate, now: float, supersedes: str | None = None
) -> MemoryRecord:
    """A fresh active record with id `mem:<scope_key>:<seq>` and the candidate's provenance."""
    return MemoryRecord(
        id=record_id(scope_key, seq),
        scope_key=scope_key,
        kind=candidate.kind,
        text=candidate.text,
        keywords=tuple(candidate.keywords),
        source_thread_key=candidate.source_thread_key,
        source_run_id=candidate.source_run_id,
        created_at=now,
        last_used_at=None,
        use_count=0,
        confidence=candidate.confidence,
        supersedes=supersedes,
        status="active",
        origin=candidate.origin,
        origin_conversation=candidate.origin_conversation,
        observed_at=now if candidate.observed_at is None else float(candidate.observed_at),
    )


def eviction_key(record: MemoryRecord) -> tuple[float, float]:
    """The eviction order: least recently used (the last use, else the creation) first, then the older
    creation; full ties in seq order. A store that orders in SQL (PostgreSQL's eviction index) states
    this same key."""
    return (record.last_used_at if record.last_used_at is not None else record.created_at, record.created_at)


def plan_eviction(records: Iterable[MemoryRecord], cap: int) -> list[str]:
    """Ids of the active records to evict so at most `cap` stay: least recently used first
    (`eviction_key`; `records` in seq order, so full ties go by seq)."""
    active = [r for r in records if r.status == "active"]
    excess = len(active) - cap
    if excess <= 0:
        return []
    active.sort(key=eviction_key)
    return [r.id for r in active[:excess]]
