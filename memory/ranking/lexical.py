"""Lexical ranking v2, pure: Snowball English stems and IDF-weighted keyword matching.

A stem is a whole token run through the Snowball English stemmer ("deploys", "deployed" and
"deployment" all become "deploy"), so matching stays whole-token: a one-letter token still matches
only the one-letter token. The keyword match is the share of the query's inverse document frequency
that a record holds, with the frequencies counted in the record's own scope (the store supplies them),
each stem weighing its IDF to the power 1.5. A query's stopwords and its question-frame words ("what
kind of", "how many", "did she mention") select nothing.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import Stemmer

from memory.rules.scorer import clean_memory_field, query_terms, tokenize
from memory.types import MemoryRecord

# A PyStemmer object may be used by one thread at a time: each thread gets its own.
_LOCAL = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    stemmer: Stemmer.Stemmer | None = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        stemmer = Stemmer.Stemmer("english")
        _LOCAL.stemmer = stemmer
    return stemmer


def stem_words(tokens: Iterable[str]) -> list[str]:
    """Each token's Snowball English stem, in order."""
    return list(_stemmer().stemWords(list(tokens)))


def text_stems(text: str) -> list[str]:
    """The stems of `text`'s tokens, in order (what a store's stem index holds for a text)."""
    return stem_words(tokenize(text))


def stems_of(text: str, keywords: Iterable[str] = ()) -> frozenset[str]:
    """Every stem a record of this text and keywords can be matched by (what a store's stem index holds)."""
    # One pass: a space between the parts keeps any token from spanning two of them.
    return _stems(" ".join((text, *keywords)))


@functools.lru_cache(maxsize=16_384)
def _stems(joined: str) -> frozenset[str]:
    """Memoized: every retrieve stems its candidates, and the same records come back again and again."""
    return frozenset(stem_words(tokenize(joined)))


class QueryCache(Protocol):
    """A cache keyed by the queries' words (an embedder's recent query vectors)."""

    def forget_queries(self) -> None: ...


# Every read's query is a person's message, perhaps the very words that taught a record: the caches
# keyed by queries let go of them at a forget as the caches keyed by record text do.
_QUERY_CACHES: weakref.WeakSet[QueryCache] = weakref.WeakSet()


def hold_queries(cache: QueryCache) -> None:
    """`cache` lets go of its queries at every `forget_cached_texts` (held weakly)."""
    _QUERY_CACHES.add(cache)


def forget_cached_texts() -> None:
    """Let go of every record text the process-wide caches hold (the stems memoized by text, the
    cleaned fields) and of every query (its stems, an embedder's query vectors): a forgotten or erased
    record's words must not wait in memory for those caches to fill. Forgetting is rare; the caches
    refill from the next reads."""
    _stems.cache_clear()
    clean_memory_field.cache_clear()
    _query_stems.cache_clear()
    for cache in list(_QUERY_CACHES):
        cache.forget_queries()


def record_stems(record: MemoryRecord) -> frozenset[str]:
    return stems_of(record.text, record.keywords)


# Words that frame a question rather than name what it is about ("what kind of", "how many", "how
# long", "did he mention", "what did she say about", "what other"). On top of the scorer's stopwords they
# select nothing in v2: a record that shares only "kind" or "mention" with a question is not about it.
# The `spec` ranking never sees this list.
QUESTION_WORDS: frozenset[str] = frozenset(
    {
        *("kind", "kinds", "type", "types", "sort", "many", "much", "long", "often", "ever", "other"),
        *("others", "mention", "mentioned", "describe", "described", "say", "said", "tell", "told"),
        *("might", "go", "goes", "going", "went", "get", "gets", "got", "make", "makes", "made"),
        *("thing", "things", "way", "ways", "something", "anything", "take", "took", "give"),
        *("gave", "see", "saw", "find", "found", "want", "wanted", "use", "used", "up", "done"),
    }
)
_QUESTION_STEMS = frozenset(Stemmer.Stemmer("english").stemWords(sorted(QUESTION_WORDS)))

# Each stem weighs its IDF to this power: a rare stem outweighs a common one by more than BM25's IDF
# alone says: a question is about its rarest words.
IDF_EXPONENT = 1.5


def query_stems(query: str) -> tuple[str, ...]:
    """The query's distinct content stems, in order of appearance: stopwords and question-frame words
    never select a record."""
    return _query_stems(query)


@functools.lru_cache(maxsize=1024)
def _query_stems(query: str) -> tuple[str, ...]:
    """Memoized: a read stems its query for the prefilter, the ranking and every scope it reads."""
    stems = stem_words(query_terms(query))
    return tuple(dict.fromkeys(stem for stem in stems if stem not in _QUESTION_STEMS))


@dataclass(frozen=True, slots=True)
class TermStats:
    """A scope's document frequencies for some stems: how many active records hold each, out of how many."""

    documents: int
    frequencies: Mapping[str, int]


def term_stats(records: Iterable[MemoryRecord], stems: Collection[str]) -> TermStats:
    """Counted from the records themselves (the in-process store's way; durable stores keep counts)."""
    wanted = frozenset(stems)
    counts = dict.fromkeys(wanted, 0)
    documents = 0
    for record in records:
        if record.status != "active":
            continue
        documents += 1
        for stem in wanted & record_stems(record):
            counts[stem] += 1
    return TermStats(documents=documents, frequencies=counts)


def idf(frequency: int, documents: int) -> float:
    """BM25's smoothed inverse document frequency: always positive, largest for a stem no record holds."""
    frequency = max(0, min(frequency, documents))
    return math.log(1.0 + (documents - frequency + 0.5) / (frequency + 0.5))


def idf_weights(stems: Iterable[str], stats: TermStats) -> dict[str, float]:
    """Each stem's weight in the keyword match: its IDF in the scope, to the power IDF_EXPONENT."""
    return {stem: idf(stats.frequencies.get(stem, 0), stats.documents) ** IDF_EXPONENT for stem in stems}


def weighted_match(weights: Mapping[str, float], have: Collection[str]) -> float:
    """The IDF-weighted fraction of the query's stems that a record holds (0 when none)."""
    total = sum(weights.values())
    if total <= 0.0:
        return 0.0
    return sum(weight for stem, weight in weights.items() if stem in have) / total
