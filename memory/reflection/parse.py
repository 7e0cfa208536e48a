"""The extractor's reply, validated: strict on the envelope, lenient inside, every field redacted.

A fact over the record text cap is dropped, not truncated: a cut sentence may say something else.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from memory.rules.redact import redact_secrets
from memory.types import MAX_KEYWORD_CHARS, MAX_TEXT_CHARS, MemoryCandidate

MAX_REFLECTION_FACTS = 5
MIN_REFLECTION_CONFIDENCE = 0.6
# Keywords the extractor may propose for one fact, as its prompt says; a stored record may hold more
# (memory.types.MAX_RECORD_KEYWORDS), from other writers.
MAX_PROPOSED_KEYWORDS = 10

# Whom a fact is about, as the extractor tags it: routing only, never stored.
FactAudience = Literal["user", "repo", "channel", "org"]
FACT_AUDIENCES: tuple[FactAudience, ...] = ("user", "repo", "channel", "org")
# Narrowest first: the summary inherits the narrowest audience any fact carried, so a summary of a
# run that learned something about one user never lands wider than that user's facts.
_NARROWNESS: dict[FactAudience, int] = {"user": 0, "repo": 1, "channel": 2, "org": 3}


@dataclass(frozen=True, slots=True)
class ReflectionFact:
    """A candidate and the audience it asked for; the tag is routing-only, never stored."""

    candidate: MemoryCandidate
    audience: FactAudience


@dataclass(frozen=True, slots=True)
class ParsedReflection:
    """What survived validation. `error` names why the whole envelope was rejected (nothing written)."""

    facts: tuple[ReflectionFact, ...] = ()
    summary: ReflectionFact | None = None
    dropped: tuple[str, ...] = ()
    error: str | None = None

    @property
    def candidates(self) -> tuple[ReflectionFact, ...]:
        return self.facts if self.summary is None else (*self.facts, self.summary)


_FENCE = re.compile(r"^```[a-zA-Z]*[ \t]*\n?(?P<body>.*?)\n?```$", re.DOTALL)


def parse_reflection(
    text: str,
    shown_ids: Iterable[str],
    *,
    source_thread_key: str,
    source_run_id: str | None = None,
    observed_at: float | None = None,
) -> ParsedReflection:
    """Strict on the envelope, lenient inside; never raises on model output. Every candidate is dated
    `observed_at` (when the conversation happened; None: the store's write time).

    A malformed envelope writes nothing (the reply is not what was asked for); a bad fact inside a
    good one costs only that fact, named in `dropped`.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    try:
        envelope = json.loads(body)
    except (ValueError, RecursionError):
        return ParsedReflection(error="not_json")
    if not isinstance(envelope, dict):
        return ParsedReflection(error="not_object")
    raw_facts = envelope.get("facts")
    if not isinstance(raw_facts, list):
        return ParsedReflection(error="facts_not_list")

    shown = frozenset(shown_ids)
    facts: list[ReflectionFact] = []
    dropped: list[str] = []
    narrowest: FactAudience = "org"
    for raw in raw_facts:
        if isinstance(raw, dict):
            audience = _audience(raw.get("audience"))
            if _NARROWNESS[audience] < _NARROWNESS[narrowest]:
                narrowest = audience
        fact, reason = _parse_fact(raw, shown, source_thread_key, source_run_id, observed_at)
        if fact is None:
            dropped.append(reason)
        elif len(facts) >= MAX_REFLECTION_FACTS:
            dropped.append("over_limit")
        else:
            facts.append(fact)

    summary: ReflectionFact | None = None
    raw_summary = envelope.get("summary")
    if isinstance(raw_summary, str):
        summary_text = redact_secrets(raw_summary.strip())
        if summary_text and len(summary_text) <= MAX_TEXT_CHARS:
            candidate = MemoryCandidate(
                kind="summary",
                text=summary_text,
                source_thread_key=source_thread_key,
                source_run_id=source_run_id,
                observed_at=observed_at,
            )
            summary = ReflectionFact(candidate=candidate, audience=narrowest)
        elif summary_text:
            dropped.append("summary_too_long")
    return ParsedReflection(facts=tuple(facts), summary=summary, dropped=tuple(dropped))


def _parse_fact(
    raw: object,
    shown: frozenset[str],
    source_thread_key: str,
    source_run_id: str | None,
    observed_at: float | None,
) -> tuple[ReflectionFact | None, str]:
    if not isinstance(raw, dict):
        return None, "not_object"
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        return None, "no_text"
    confidence = raw.get("confidence")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not math.isfinite(confidence)
        or not MIN_REFLECTION_CONFIDENCE <= confidence <= 1
    ):
        return None, "confidence"
    clean = redact_secrets(text.strip())
    if len(clean) > MAX_TEXT_CHARS:
        return None, "text_too_long"
    supersedes = raw.get("supersedes")
    candidate = MemoryCandidate(
        kind="fact",
        text=clean,
        source_thread_key=source_thread_key,
        keywords=_proposed_keywords(raw.get("keywords")),
        source_run_id=source_run_id,
        confidence=float(confidence),
        supersedes=supersedes if isinstance(supersedes, str) and supersedes in shown else None,
        observed_at=observed_at,
    )
    return ReflectionFact(candidate=candidate, audience=_audience(raw.get("audience"))), ""


def _audience(value: object) -> FactAudience:
    """`user`, `repo` or `channel` when the extractor said so; any other or missing value is `org`."""
    if isinstance(value, str):
        wanted = value.strip().lower()
        for audience in FACT_AUDIENCES:
            if wanted == audience:
                return audience
    return "org"


def _proposed_keywords(value: object) -> tuple[str, ...]:
    """Lowercased, trimmed, deduped, at most MAX_PROPOSED_KEYWORDS; anything but a list of strings
    → none."""
    if not isinstance(value, list):
        return ()
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            continue
        keyword = redact_secrets(redact_secrets(item).strip().lower())
        if keyword and len(keyword) <= MAX_KEYWORD_CHARS and keyword not in out:
            out.append(keyword)
        if len(out) >= MAX_PROPOSED_KEYWORDS:
            break
    return tuple(out)
