"""Compositions of the scorer's pieces that only the tests look at."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from memory.rules.scorer import frame_bullets, keyword_match, recency_score, render_bullet, weighted_score
from memory.types import MemoryRecord
from tests.memory.records import NOW


def score_record(record: MemoryRecord, query: str | Collection[str], now: float) -> float:
    """One record's spec score: keyword match and recency, weighted."""
    return weighted_score(keyword_match(query, record), recency_score(record, now))


def render_memory_block(
    records: Sequence[MemoryRecord], scope_keys: Sequence[str], today: float = NOW
) -> str:
    """The advisory block: the prefix, the fence, one sanitized bullet per record (no budget)."""
    return frame_bullets(scope_keys, [render_bullet(record) for record in records], today)


def unescape_memory_field(text: str) -> str:
    """The exact inverse of escape_memory_field (`&` last, as it was escaped first)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
