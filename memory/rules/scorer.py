"""Pure retrieval scoring, the hard budget, and the containment of record text.

No I/O: every store, the read path and the reflection pass call these same functions.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from memory.rules.redact import redact_secrets
from memory.types import MemoryRecord

KEYWORD_WEIGHT = 0.7
RECENCY_WEIGHT = 0.3
RECENCY_TAU_SECONDS = 7 * 24 * 3600.0
CHARS_PER_TOKEN = 4

FENCE_OPEN = "<background_memory>"
FENCE_CLOSE = "</background_memory>"

_TOKEN = re.compile(r"[a-z0-9]+")
_WHITESPACE = re.compile(r"\s+")
ELLIPSIS = "…"
# A cut never ends on a joiner or variation selector: they belong to the character after them.
_JOINERS = "\u200d\ufe0e\ufe0f"


def tokenize(text: str) -> list[str]:
    """Word tokens of `text`: runs of ASCII letters and digits, lowercased, in order."""
    return _TOKEN.findall(text.lower())


def record_tokens(record: MemoryRecord) -> frozenset[str]:
    """Every token a record can be matched by: its keywords and its text."""
    # One pass: a space between the parts keeps any token from spanning two of them.
    return frozenset(tokenize(" ".join((record.text, *record.keywords))))


# Function words a chat message is full of and a fact is never about. A query's stopwords select
# nothing: a record that shares only "the" and "to" with a question is not relevant to it, and leaving
# them out of the prefilter keeps a store from scoring nearly every row of a scope on every retrieve.
STOPWORDS: frozenset[str] = frozenset(
    {
        "a",
        "about",
        "after",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "for",
        "from",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "ours",
        "s",
        "she",
        "should",
        "so",
        "some",
        "such",
        "t",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
    }
)


def query_terms(query: str) -> list[str]:
    """The query's tokens that can select a record, in order of appearance: every token but stopwords."""
    return [token for token in tokenize(query) if token not in STOPWORDS]


def query_tokens(query: str) -> frozenset[str]:
    return frozenset(query_terms(query))


def keyword_match(query: str | Collection[str], record: MemoryRecord) -> float:
    """The fraction of the query's distinct tokens present in the record, whole tokens only."""
    wanted = query_tokens(query) if isinstance(query, str) else frozenset(query)
    if not wanted:
        return 0.0
    have = record_tokens(record)
    return len(wanted & have) / len(wanted)


def last_seen(record: MemoryRecord) -> float:
    """What recency counts from: the last use, else the creation."""
    return record.last_used_at if record.last_used_at is not None else record.created_at


def observed_time(record: MemoryRecord) -> float:
    """When the record's source conversation happened: its `observed_at`, else its creation (a record
    is never observed after it was written)."""
    return record.observed_at if record.observed_at is not None else record.created_at


def day_of(epoch: float) -> str:
    """A time as the block shows it: its UTC calendar date, `2026-11-24` (compact, unambiguous, and
    what the model reasons about "last week" from)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def recency_score(record: MemoryRecord, now: float) -> float:
    """exp(-age/τ) over last use, else creation: 1 when fresh, 1/e after a week."""
    age = max(0.0, now - last_seen(record))
    return math.exp(-age / RECENCY_TAU_SECONDS)


def weighted_score(keyword: float, recency: float) -> float:
    """α·keyword + β·recency: keyword dominates, so a stale exact match beats a fresh loose one, and
    recency breaks ties."""
    return KEYWORD_WEIGHT * keyword + RECENCY_WEIGHT * recency


# Fields cleaned lately: every read renders the scope's hot records again, and two redaction passes
# per field cost more than the whole retrieve (the function is pure; the cache is bounded).
CLEANED_FIELDS = 4096


@functools.lru_cache(maxsize=CLEANED_FIELDS)
def clean_memory_field(text: str) -> str:
    """What a record field may show anywhere: redacted, one line with whitespace collapsed, and
    redacted again.

    Redaction normalizes first (memory/rules/redact.py drops every invisible character before it matches),
    so no token a split hid can reassemble here; and the second pass sees what the collapse joined (a
    name and its value that stood on two lines), so the sanitizer never reassembles a secret either.
    """
    return redact_secrets(_WHITESPACE.sub(" ", redact_secrets(text)).strip())


def escape_memory_field(text: str) -> str:
    """`&` first, so the escaping is unambiguous and can be undone exactly."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def sanitize_memory_field(text: str) -> str:
    """What a record field may contribute to a prompt: one line, no raw tag characters."""
    return escape_memory_field(clean_memory_field(text))


def render_bullet(record: MemoryRecord) -> str:
    text = sanitize_memory_field(record.text)
    return f"{_bullet_head(record)}{text}{_bullet_tail(record)}"


def _bullet_head(record: MemoryRecord) -> str:
    """`- 2026-11-24: `: the day the record's conversation happened, before its text."""
    return f"- {day_of(observed_time(record))}: "


def _bullet_tail(record: MemoryRecord) -> str:
    return f" (source: {sanitize_memory_field(record.source_thread_key)})"


def render_prefix(scope_keys: Iterable[str], today: float) -> str:
    """The block's first line: whose memory it is, that it may be stale, and today's date (the one
    each record's date is read against)."""
    names = " + ".join(sanitize_memory_field(key) for key in scope_keys)
    return (
        f"Background memory for {names} (may be outdated — verify before acting; "
        f"dates are UTC, today is {datetime.fromtimestamp(today, UTC):%A} {day_of(today)}):"
    )


def frame_bullets(scope_keys: Sequence[str], bullets: Sequence[str], today: float) -> str:
    """The advisory block around rendered bullets: the prefix, then the fence holding them."""
    return "\n".join([render_prefix(scope_keys, today), FENCE_OPEN, *bullets, FENCE_CLOSE])


@dataclass(frozen=True, slots=True)
class BudgetedBlock:
    """The records shown, in order, and the block they make (None when not even one fits)."""

    records: tuple[MemoryRecord, ...]
    text: str | None


def budget_memory_block(
    records: Sequence[MemoryRecord],
    scope_keys: Sequence[str],
    limit: int,
    max_tokens: int,
    *,
    today: float,
) -> BudgetedBlock:
    """The block under its hard budget, so memory never crowds the request out of the prompt: at
    most `limit` records and `max_tokens` × 4 characters for the whole block — prefix, fences, line
    breaks and every escape included.

    Records are kept in order while their rendered bullets fit. The first is always shown: when it
    alone is too long it is cut at a character boundary (never inside an escape such as `&lt;`) and
    ends with "…". A budget too small for the frame and a cut first bullet gives no block. `today`
    (epoch seconds, the run's time) is the date the prefix states.
    """
    room = max_tokens * CHARS_PER_TOKEN - len(frame_bullets(scope_keys, (), today))
    kept: list[MemoryRecord] = []
    bullets: list[str] = []
    for record in records[: max(0, limit)]:
        bullet = render_bullet(record)
        if len(bullet) + 1 > room:  # + its line break
            cut = None if kept else _cut_bullet(record, room - 1)
            if cut is None:
                break
            bullet = cut
        kept.append(record)
        bullets.append(bullet)
        room -= len(bullet) + 1
    if not kept:
        return BudgetedBlock((), None)
    return BudgetedBlock(tuple(kept), frame_bullets(scope_keys, bullets, today))


def _cut_bullet(record: MemoryRecord, width: int) -> str | None:
    """The record's bullet in at most `width` characters: its text cut, whole characters and whole
    escapes only, then "…"; None when not even the provenance fits."""
    head = _bullet_head(record)
    tail = f"{ELLIPSIS}{_bullet_tail(record)}"
    room = width - len(head) - len(tail)
    if room < 0:
        return None
    text = clean_memory_field(record.text)
    end = used = 0
    for char in text:
        cost = len(escape_memory_field(char))
        if used + cost > room:
            break
        used += cost
        end += 1
    cut = text[:end].rstrip().rstrip(_JOINERS)
    return f"{head}{escape_memory_field(cut)}{tail}"
