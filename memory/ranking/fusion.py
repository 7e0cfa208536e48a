"""Which ranking a store applies, and the one pure function every store ranks with.

Two rankings:

- `spec`: the original scorer, exactly: α·keywordMatch + β·recency over whole tokens, no stems, no IDF,
  no vectors (`memory.rules.engine.rank_records`).
- `v2` (the default): the same shape over Snowball stems, the keyword match IDF-weighted within the
  scope, and — when the store has an embedder — fused with the record's closeness to the query by a
  noisy OR of the two weighted signals: relevance = 1 − (1 − (1 − w)·lexical)·(1 − w·max(centered
  cosine, 0)), the chance that either says "relevant" if each does so independently (a record strong
  in both gains less from the second than a plain sum would give it). The centered cosine is
  taken after the scope's centroid (the mean of its record vectors) is subtracted from the record's
  vector and the query's: what every record of the scope shares (the speakers' names, the register of
  the text) then no longer counts as closeness to this query. A record that shares no stem with the
  query enters only when its plain cosine reaches the threshold, so an unrelated record never fills
  the block.
- `v2` with pseudo-relevance feedback (`Feedback`, an embedder's tuned setting): a second pass in the
  manner of RM3. The first pass's best records vote for their stems (each with its relevance spread
  over its stems, times the stem's IDF weight); the heaviest few the query lacks form a feedback query,
  and the lexical score becomes (1 − β)·lexical + β·(the feedback query's weighted match). The gate
  still reads the query's own lexical match: feedback reorders admitted records, never admits one.

A time phrase in the query ("last week", "since 2026-10-01": `memory.rules.when`) adds to the score of
each admitted record by how close the time its conversation happened is to the phrase's window, in
every ranking but `spec`'s; it reorders, never admits. A query without one is scored exactly as
before: the same arithmetic, the same order.

No I/O: stores hand in the candidates, the scope's term statistics and the cosines they computed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from memory.ranking.lexical import TermStats, idf_weights, query_stems, record_stems, weighted_match
from memory.rules.engine import longest_terms, match_tokens, rank_records
from memory.rules.scorer import (
    KEYWORD_WEIGHT,
    RECENCY_TAU_SECONDS,
    RECENCY_WEIGHT,
    keyword_match,
    last_seen,
    observed_time,
    query_tokens,
    recency_score,
    weighted_score,
)
from memory.rules.visibility import shown_to_anyone
from memory.rules.when import TimeWindow, time_window
from memory.types import MemoryRecord, Ranked

__all__ = [
    "DEFAULT_RANKING",
    "NO_FEEDBACK",
    "SPEC",
    "Centering",
    "Feedback",
    "Ranked",
    "Ranking",
    "Scored",
    "centered_cosines",
    "closeness",
    "feedback_weights",
    "merge_score",
    "prefilter_terms",
    "rank",
    "score_arrays",
    "score_with_feedback",
    "stats_stems",
    "time_closeness",
    "time_window",
]

Floats = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]

Vectors = npt.NDArray[np.float32]

RankingMode = Literal["spec", "v2"]
RANKING_MODES: tuple[str, ...] = ("v2", "spec")

# The cosine's share of the relevance when none is given (each embedder's own tuned weight is in
# memory/ranking/embedder.py, TUNED_WEIGHTS).
DEFAULT_SEMANTIC_WEIGHT = 0.3
# A record with no lexical match enters only at or above this cosine: high enough that an unrelated
# record, however close its register, never fills a slot of the block.
DEFAULT_SEMANTIC_THRESHOLD = 0.7
# Below this squared length (float32 products leave ~1e-7 of noise) a centered vector is the centroid
# itself: no closer to the query than the scope's average record is.
_CENTERED_EPSILON = 1e-6
# What a record observed inside the query's time window adds to its score (a third of what recency can:
# a named time reorders records the question matches about equally; weighing as much as recency, it
# lifted records of the window that match the question worse above the one it asks about), and how fast
# that falls off outside: over the window's own width, at least a day and at most a week.
TIME_WEIGHT = 0.1
_TIME_SCALE_SECONDS = (86_400.0, 7 * 86_400.0)


@dataclass(frozen=True, slots=True)
class Feedback:
    """Lexical pseudo-relevance feedback: the first pass's `records` best records give the `stems`
    heaviest stems the query lacks, weighing `weight` (β) of the lexical score. Off by default (each
    embedder's measured setting is in memory/ranking/embedder.py, TUNED_FEEDBACK)."""

    records: int = 0
    stems: int = 0
    weight: float = 0.0

    def __post_init__(self) -> None:
        if self.records < 0 or self.stems < 0:
            raise ValueError(f"feedback needs counts ≥ 0, got {self.records!r} and {self.stems!r}")
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"feedback weight must be in [0, 1], got {self.weight!r}")

    @property
    def enabled(self) -> bool:
        return self.records > 0 and self.stems > 0 and self.weight > 0.0


NO_FEEDBACK = Feedback()


@dataclass(frozen=True, slots=True)
class Ranking:
    """The ranking settings a store is built with (`memory.ranking`, `memory.semantic_*`)."""

    mode: RankingMode = "v2"
    semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT
    semantic_threshold: float = DEFAULT_SEMANTIC_THRESHOLD
    feedback: Feedback = NO_FEEDBACK

    def __post_init__(self) -> None:
        if self.mode not in RANKING_MODES:
            raise ValueError(f"ranking mode must be one of {', '.join(RANKING_MODES)}, got {self.mode!r}")
        if not 0.0 <= self.semantic_weight <= 1.0:
            raise ValueError(f"semantic weight must be in [0, 1], got {self.semantic_weight!r}")
        if not -1.0 <= self.semantic_threshold <= 1.0:
            raise ValueError(f"semantic threshold must be in [-1, 1], got {self.semantic_threshold!r}")

    @property
    def stemmed(self) -> bool:
        return self.mode == "v2"


SPEC = Ranking(mode="spec")
DEFAULT_RANKING = Ranking()


def prefilter_terms(ranking: Ranking, query: str) -> list[str]:
    """The terms a store's prefilter ORs together (at most the 24 longest): stems for v2, tokens for spec.

    A store's index holds the same stems (`memory.ranking.lexical.stems_of`), so a record is a candidate
    exactly when it shares a whole stem with the query — the gate `rank` applies.
    """
    if ranking.stemmed:
        return longest_terms(query_stems(query))
    return match_tokens(query)


@dataclass(frozen=True, slots=True)
class Scored:
    """Per record, aligned with the input: its relevance, its score, and whether the gate admits it."""

    relevance: Floats
    score: Floats
    admitted: Flags


@dataclass(frozen=True, slots=True)
class Centering:
    """What the centered cosine needs of a scope, whatever the query: its centroid μ (the mean of its
    record vectors), each record's dot product with μ, and the inverse of each record's distance from μ
    (0 for a vector that is the centroid itself). Computed once per change of the scope's vectors."""

    centroid: Floats
    offsets: Floats
    inverse_lengths: Floats

    @classmethod
    def of(cls, centroid: Floats, offsets: Floats, norms: Floats) -> Centering:
        """From r·μ (`offsets`) and |r|² (`norms`) per record: |r − μ|² = |r|² − 2·r·μ + |μ|²."""
        record_sq = norms - 2.0 * offsets + float(centroid @ centroid)
        away = record_sq > _CENTERED_EPSILON
        inverse = np.zeros_like(record_sq)
        inverse[away] = 1.0 / np.sqrt(record_sq[away])
        return cls(centroid, offsets, inverse)


def centered_cosines(products: Floats, centering: Centering, query: Vectors) -> Floats:
    """Each record's cosine with the query once the scope's centroid μ is taken from both, from dot
    products alone (no centered copy of the matrix): (r − μ)·(q − μ) = r·q − r·μ − q·μ + |μ|².
    `products` are r·q; a query or a vector equal to the centroid gets 0."""
    centroid = centering.centroid
    q = query.astype(np.float64)
    query_offset = float(q @ centroid)
    centroid_norm = float(centroid @ centroid)
    query_sq = float(q @ q) - 2.0 * query_offset + centroid_norm
    if query_sq <= _CENTERED_EPSILON:
        return np.zeros_like(products)
    scale = centering.inverse_lengths / np.sqrt(query_sq)
    centered: Floats = (products - centering.offsets + (centroid_norm - query_offset)) * scale
    np.clip(centered, -1.0, 1.0, out=centered)
    return centered


def row_products(matrix: Vectors, query: Vectors) -> Floats:
    """Each row's dot product with `query`, one row at a time on this thread: a matrix-vector product
    through BLAS runs on its worker threads, which on a busy host made one scope's product many times
    slower than one thread alone, and a store's reads already run beside other threads. `vecdot` takes
    each row by itself, so a row's product is the same whatever the matrix around it (a scope index
    multiplies the whole scope, another store its candidates only), and it is faster than `einsum`."""
    products: Floats = np.vecdot(matrix, query).astype(np.float64)
    return products


def closeness(
    matrix: Vectors, norms: Floats, query: Vectors, centroid: Floats | None
) -> tuple[Floats, Floats]:
    """Each row's plain cosine with the query and its centered one (`centered_cosines`). `norms` are
    the rows' squared lengths; with no centroid (a scope with no vectors yet) the centered cosine is
    the plain one."""
    products = row_products(matrix, query)
    if centroid is None:
        return products, products
    offsets = row_products(matrix, centroid.astype(np.float32))
    return products, centered_cosines(products, Centering.of(centroid, offsets, norms), query)


def time_closeness(observed: Floats, window: TimeWindow) -> Floats:
    """Per record, how close the time it was observed is to the window: 1 inside it, else
    exp(−distance / the window's width, clamped to a day … a week)."""
    scale = min(max(window.end - window.start, _TIME_SCALE_SECONDS[0]), _TIME_SCALE_SECONDS[1])
    distance = np.maximum(window.start - observed, 0.0) + np.maximum(observed - window.end, 0.0)
    closeness: Floats = np.exp(-distance / scale)
    return closeness


@dataclass(frozen=True, slots=True)
class Timed:
    """A query's time window and, per record, when it was observed: what the time bias reads."""

    window: TimeWindow
    observed: Floats


def score_arrays(
    lexical: Floats,
    matched: Flags,
    cosine: Floats | None,
    seen: Floats,
    now: float,
    ranking: Ranking,
    centered: Floats | None = None,
    gate: Floats | None = None,
    timed: Timed | None = None,
) -> Scored:
    """The v2 formula over many records at once — the one place it is written.

    `lexical` is each record's IDF-weighted match, `matched` whether it shares a prefilter stem with
    the query, `cosine` its vector's cosine with the query's (NaN: no vector; None: no embedder), which
    the gate reads, `centered` the same cosine once the scope's centroid is taken from both (None: the
    plain cosine), which the fusion reads, `seen` its last use (else creation), `gate` the query's own
    lexical match when `lexical` holds feedback too (None: `lexical` is it), `timed` the query's time
    window with each record's observation time (None: the query names no time). `rank` scores its
    candidates with it and the SQLite store's scope index (memory/scope_index.py) scores a whole scope
    with it, so both order records identically.
    """
    shares = matched & ((lexical if gate is None else gate) > 0.0)
    if cosine is None:
        relevance = lexical
        admitted = shares
    else:
        relevance = _fused(lexical, cosine, cosine if centered is None else centered, ranking.semantic_weight)
        # A NaN cosine (no vector) compares false: such a record is admitted by its stems alone.
        admitted = shares | (cosine >= ranking.semantic_threshold)
    # In place where it can be: a whole scope's arrays are scored at every read.
    recency = now - seen
    np.maximum(recency, 0.0, out=recency)
    np.negative(recency, out=recency)
    recency /= RECENCY_TAU_SECONDS
    np.exp(recency, out=recency)
    score = relevance * KEYWORD_WEIGHT
    recency *= RECENCY_WEIGHT
    score += recency
    if timed is not None:
        score += TIME_WEIGHT * time_closeness(timed.observed, timed.window)
    return Scored(relevance, score, admitted)


def _fused(lexical: Floats, cosine: Floats, closer: Floats, w: float) -> Floats:
    """The noisy OR of the weighted lexical match and the weighted (centered) cosine, clipped at 0;
    the lexical match alone where the record has no vector (a NaN `cosine`)."""
    semantic = np.maximum(closer, 0.0)
    semantic *= w
    np.subtract(1.0, semantic, out=semantic)
    fused = lexical * (1.0 - w)
    np.subtract(1.0, fused, out=fused)
    fused *= semantic
    np.subtract(1.0, fused, out=fused)
    missing = np.isnan(cosine)
    if missing.any():
        fused[missing] = lexical[missing]
    return fused


def stats_stems(ranking: Ranking, query: str, records: Iterable[MemoryRecord]) -> list[str]:
    """The stems whose document frequencies a store hands `rank`: the query's, and with feedback on
    every stem of the candidates too (a feedback stem is weighed by its IDF in the scope)."""
    stems = list(query_stems(query))
    if ranking.feedback.enabled:
        held = set(stems)
        for record in records:
            fresh = record_stems(record) - held
            held |= fresh
            stems.extend(sorted(fresh))
    return stems


def feedback_weights(
    top: Sequence[tuple[frozenset[str], float]],
    query: Collection[str],
    stats: TermStats,
    feedback: Feedback,
) -> dict[str, float]:
    """The feedback query (RM3's relevance model, IDF-weighted): each of the `top` records (its stems,
    its first-pass relevance; best first) spreads its relevance evenly over its stems; a stem weighs
    that mass times its IDF weight in the scope. The `feedback.stems` heaviest stems the query lacks,
    ties alphabetical, so every store picks the same ones."""
    mass: dict[str, float] = {}
    for stems, relevance in top:
        if not stems or relevance <= 0.0:
            continue
        share = relevance / len(stems)
        for stem in sorted(stems):
            if stem not in query:
                mass[stem] = mass.get(stem, 0.0) + share
    weights = idf_weights(mass, stats)
    heavy = {stem: mass[stem] * weights[stem] for stem in mass}
    chosen = sorted(heavy, key=lambda stem: (-heavy[stem], stem))[: feedback.stems]
    return {stem: heavy[stem] for stem in chosen}


def score_with_feedback(
    lexical: Floats,
    matched: Flags,
    cosine: Floats | None,
    seen: Floats,
    now: float,
    ranking: Ranking,
    centered: Floats | None,
    *,
    query: Collection[str],
    stats: TermStats,
    stems_at: Callable[[int], frozenset[str]],
    match: Callable[[Mapping[str, float]], Floats],
    eligible: Flags | None = None,
    ties: npt.NDArray[np.int64] | None = None,
    timed: Timed | None = None,
) -> Scored:
    """`score_arrays`, then (with `ranking.feedback` on) its second pass: the first pass's best
    `eligible` admitted records (ties: lower `ties` key first, else lower index) give the feedback
    query (`feedback_weights`), `match` says each record's weighted match with it (the weighted share
    it holds, as `weighted_match`), and the records are scored again with the lexical score blended
    with it. The gate reads the first pass's lexical score. `stems_at(i)` are record i's stems.

    Stores pass as `eligible` only records every reader may see (`shown_to_anyone`): a store ranks
    before the read rule filters, and a record some reader may not see must not shape, through its
    words, the order in which that reader gets the others.
    """
    first = score_arrays(lexical, matched, cosine, seen, now, ranking, centered, timed=timed)
    feedback = ranking.feedback
    if not feedback.enabled:
        return first
    admitted = first.admitted if eligible is None else first.admitted & eligible
    chosen = np.flatnonzero(admitted)
    if chosen.size == 0:
        return first
    if ties is None:
        best = chosen[np.argsort(-first.score[chosen], kind="stable")][: feedback.records]
    else:
        best = chosen[np.lexsort((ties[chosen], -first.score[chosen]))][: feedback.records]
    top = [(stems_at(i), float(first.relevance[i])) for i in best.tolist()]
    weights = feedback_weights(top, query, stats, feedback)
    if not weights:
        return first
    blended = blend_feedback(lexical, match(weights), feedback.weight)
    return score_arrays(blended, matched, cosine, seen, now, ranking, centered, gate=lexical, timed=timed)


def blend_feedback(lexical: Floats, feedback_match: Floats, weight: float) -> Floats:
    """The lexical match the second pass scores: the question's, with `weight` of the feedback
    query's (the scope index's shortlist bounds the same blend, so it lives once here)."""
    blended: Floats = (1.0 - weight) * lexical + weight * feedback_match
    return blended


def rank(
    records: Iterable[MemoryRecord],
    query: str,
    limit: int,
    now: float,
    ranking: Ranking,
    *,
    stats: TermStats | None = None,
    cosines: Mapping[str, float] | None = None,
    centered: Mapping[str, float] | None = None,
) -> list[Ranked]:
    """Active records that pass the relevance gate, best score first (ties: input order), ≤ `limit`.

    `stats` are the scope's document frequencies for `stats_stems` (None: every stem weighs the
    same); `cosines` maps a record id to its vector's cosine with the query's (None or a missing id:
    that record ranks lexically), `centered` to that cosine with the whole scope's centroid taken from
    both (`closeness`; None: the plain cosine is fused). Never touches usage.
    """
    if ranking.mode == "spec":
        wanted = query_tokens(query)
        return [
            Ranked(record, keyword_match(wanted, record))
            for record in rank_records(records, query, limit, now)
        ]
    stems = query_stems(query)
    if not stems or limit <= 0:
        return []
    active = [record for record in records if record.status == "active"]
    if not active:
        return []
    weights = idf_weights(stems, stats if stats is not None else TermStats(0, {}))
    lexical = np.array([weighted_match(weights, record_stems(record)) for record in active])
    cosine = closer = None
    if cosines is not None:
        cosine = np.array([cosines.get(record.id, np.nan) for record in active], dtype=np.float64)
        if centered is not None:
            closer = np.array([centered.get(record.id, np.nan) for record in active], dtype=np.float64)
    seen = np.array([last_seen(record) for record in active], dtype=np.float64)
    window = time_window(query, now)
    timed = None
    if window is not None:
        timed = Timed(window, np.array([observed_time(record) for record in active], dtype=np.float64))
    matched = np.ones(len(active), dtype=np.bool_)
    voters = np.array([shown_to_anyone(record) for record in active], dtype=np.bool_)
    held = [record_stems(record) for record in active]

    def match(feedback: Mapping[str, float]) -> Floats:
        return np.array([weighted_match(feedback, have) for have in held])

    scored = score_with_feedback(
        lexical,
        matched,
        cosine,
        seen,
        now,
        ranking,
        closer,
        query=stems,
        stats=stats if stats is not None else TermStats(0, {}),
        stems_at=held.__getitem__,
        match=match,
        eligible=voters,
        timed=timed,
    )
    chosen = np.flatnonzero(scored.admitted)
    # Best score first, ties in input order (a stable sort of the negated scores).
    order = chosen[np.argsort(-scored.score[chosen], kind="stable")][:limit]
    return [Ranked(active[i], float(scored.relevance[i])) for i in order.tolist()]


def merge_score(ranked: Ranked, now: float, window: TimeWindow | None = None) -> float:
    """The cross-scope order: each record's relevance with its recency as the pool sees it (each
    store ranked only its own scopes), and with the query's time `window` the same time bias the
    stores ranked with."""
    score = weighted_score(ranked.relevance, recency_score(ranked.record, now))
    if window is None:
        return score
    observed = np.array([observed_time(ranked.record)], dtype=np.float64)
    return score + TIME_WEIGHT * float(time_closeness(observed, window)[0])
