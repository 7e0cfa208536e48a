"""The time bias of the one ranking: a query's time phrase lifts what was observed in its window; a
query without one is ranked exactly as it was before records had a time at all."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest

from memory.ranking.fusion import (
    DEFAULT_RANKING,
    TIME_WEIGHT,
    Feedback,
    Ranked,
    Ranking,
    merge_score,
    rank,
    stats_stems,
    time_closeness,
    time_window,
)
from memory.ranking.lexical import query_stems, record_stems, term_stats
from memory.ranking.scope_index import ScopeIndex
from memory.rules.engine import longest_terms
from memory.rules.scorer import weighted_score
from memory.rules.when import TimeWindow
from memory.types import MemoryRecord
from tests.memory.embedders import ConceptEmbedder
from tests.memory.records import DAY, NOW, record

WORDS = ("deploy release staging api lunch menu cluster schedule train notes owner script").split()  # noqa: SIM905
# Time-free queries, with words a time phrase is made of but no phrase ("the last" without a unit).
QUERIES = [
    "deploy",
    "how do we deploy the api",
    "release train schedule",
    "who owns the staging cluster",
    "the last deploy notes",
    "lunch menu owner script",
    "may we deploy",
]
RANKINGS = [DEFAULT_RANKING, Ranking(feedback=Feedback(records=3, stems=4, weight=0.3))]


def corpus(seed: int) -> list[MemoryRecord]:
    rng = random.Random(seed)
    return [
        record(
            " ".join(rng.sample(WORDS, 4)),
            id=f"mem:org:acme:{n}",
            created_at=NOW - rng.randrange(60) * DAY,
            last_used_at=None if rng.random() < 0.5 else NOW - rng.randrange(10) * DAY,
            observed_at=NOW - rng.randrange(400) * DAY,
        )
        for n in range(1, 61)
    ]


def undated(records: list[MemoryRecord]) -> list[MemoryRecord]:
    return [replace(r, observed_at=None) for r in records]


def cosines(records: list[MemoryRecord], query: str) -> dict[str, float]:
    embedder = ConceptEmbedder()
    matrix = embedder.embed([r.text for r in records])
    wanted = embedder.embed_query(query)
    return {r.id: float(row @ wanted) for r, row in zip(records, matrix, strict=True)}


@pytest.mark.parametrize("ranking", RANKINGS, ids=["v2", "feedback"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_query_without_a_time_phrase_ranks_exactly_as_without_dates(ranking: Ranking, seed: int) -> None:
    dated = corpus(seed)
    plain = undated(dated)
    for query in QUERIES:
        assert time_window(query, NOW) is None, query
        stats = term_stats(plain, stats_stems(ranking, query, plain))
        for vectors in (None, cosines(plain, query)):
            with_dates = rank(dated, query, 10, NOW, ranking, stats=stats, cosines=vectors)
            without = rank(plain, query, 10, NOW, ranking, stats=stats, cosines=vectors)
            assert [(r.record.id, r.relevance) for r in with_dates] == [
                (r.record.id, r.relevance) for r in without
            ], query


@pytest.mark.parametrize("seed", [1, 2])
def test_the_scope_index_ranks_a_time_free_query_exactly_as_without_dates(seed: int) -> None:
    dated, plain = corpus(seed), undated(corpus(seed))
    embedder = ConceptEmbedder()
    indexes = []
    for records in (dated, plain):
        index = ScopeIndex()
        vectors = embedder.embed([r.text for r in records])
        for seq, (item, vector) in enumerate(zip(records, vectors, strict=True), start=1):
            index.add(seq, item, record_stems(item), vector)
        indexes.append(index)
    for query in QUERIES:
        stems = query_stems(query)
        vector = embedder.embed_query(query)
        found = [
            [
                (c.seq, c.relevance)
                for c in index.select(
                    stems, frozenset(longest_terms(stems)), vector, NOW, DEFAULT_RANKING, 10
                )
            ]
            for index in indexes
        ]
        assert found[0] == found[1], query


def test_a_time_phrase_lifts_the_record_observed_in_its_window_in_rank_and_in_the_scope_index() -> None:
    records = [
        record("deploy note alpha", id="mem:org:acme:1", observed_at=NOW - 40 * DAY),
        record("deploy note beta", id="mem:org:acme:2", observed_at=NOW - 8 * DAY),  # last week
        record("deploy note gamma", id="mem:org:acme:3", observed_at=NOW - DAY),  # yesterday
    ]
    index = ScopeIndex()
    for seq, item in enumerate(records, start=1):
        index.add(seq, item, record_stems(item), None)

    def both(query: str) -> tuple[list[str], list[str]]:
        stems = query_stems(query)
        ranked = [r.record.id for r in rank(records, query, 5, NOW, DEFAULT_RANKING)]
        chosen = index.select(
            stems,
            frozenset(longest_terms(stems)),
            None,
            NOW,
            DEFAULT_RANKING,
            5,
            None,
            time_window(query, NOW),
        )
        return ranked, [c.record.id for c in chosen]

    for query, first in (
        ("deploy note", "1"),
        ("deploy note yesterday", "3"),
        ("deploy note last week", "2"),
    ):
        ranked, selected = both(query)
        assert ranked == selected, query
        assert ranked[0] == f"mem:org:acme:{first}", query
        assert len(ranked) == 3  # reordered, never filtered


def test_a_time_phrase_never_admits_a_record_the_query_does_not_match() -> None:
    records = [record("lunch menu", observed_at=NOW - DAY)]
    assert rank(records, "what happened yesterday", 5, NOW, DEFAULT_RANKING) == []


def test_a_stale_exact_match_still_beats_a_loose_one_in_the_window() -> None:
    # The bias weighs a third of what recency can: it reorders near-equals, not a match against a miss.
    exact = record("staging cluster owner", id="mem:org:acme:1", observed_at=NOW - 90 * DAY)
    loose = record("staging notes", id="mem:org:acme:2", observed_at=NOW - DAY)
    found = rank([exact, loose], "staging cluster owner yesterday", 5, NOW, DEFAULT_RANKING)
    assert [r.record.id for r in found] == ["mem:org:acme:1", "mem:org:acme:2"]


def test_the_record_the_question_asks_about_beats_one_that_only_shares_its_time() -> None:
    # The rebooted cluster was noted yesterday, but the question asks who owns it: the time phrase may
    # reorder near-equals, not lift a record that matches the question clearly worse.
    records = [
        record("Dana owns the staging cluster", id="mem:org:acme:1", observed_at=NOW - 90 * DAY),
        record("the staging cluster was rebooted", id="mem:org:acme:2", observed_at=NOW - DAY),
        record("lunch menu", id="mem:org:acme:3", observed_at=NOW - 50 * DAY),
        record("deploy notes", id="mem:org:acme:4", observed_at=NOW - 50 * DAY),
    ]
    query = "who owns the staging cluster, as of yesterday"
    stats = term_stats(records, stats_stems(DEFAULT_RANKING, query, records))
    ranked = rank(records, query, 5, NOW, DEFAULT_RANKING, stats=stats)
    assert [r.record.id for r in ranked] == ["mem:org:acme:1", "mem:org:acme:2"]
    index = ScopeIndex()
    for seq, item in enumerate(records, start=1):
        index.add(seq, item, record_stems(item), None)
    stems = query_stems(query)
    window = time_window(query, NOW)
    chosen = index.select(stems, frozenset(longest_terms(stems)), None, NOW, DEFAULT_RANKING, 5, None, window)
    assert [c.record.id for c in chosen] == ["mem:org:acme:1", "mem:org:acme:2"]


def test_closeness_is_one_inside_and_falls_off_over_the_windows_width_clamped() -> None:
    day = TimeWindow(NOW, NOW + DAY)
    observed = np.array([NOW + DAY / 2, NOW - DAY, NOW + 2 * DAY, NOW - 30 * DAY])
    assert np.allclose(time_closeness(observed, day), [1.0, math.exp(-1), math.exp(-1), math.exp(-30)])
    year = TimeWindow(NOW - 365 * DAY, NOW)  # falls off over a week at most
    assert math.isclose(float(time_closeness(np.array([NOW + 7 * DAY]), year)[0]), math.exp(-1))


def test_the_cross_scope_merge_adds_the_same_bias_and_nothing_without_a_window() -> None:
    inside = Ranked(record("deploy", observed_at=NOW - DAY), 0.5)
    outside = Ranked(record("deploy", observed_at=NOW - 300 * DAY), 0.5)
    window = time_window("yesterday", NOW)
    assert window is not None
    assert merge_score(inside, NOW) == merge_score(outside, NOW) == weighted_score(0.5, 1.0)
    assert merge_score(inside, NOW, window) == weighted_score(0.5, 1.0) + TIME_WEIGHT
    assert merge_score(outside, NOW, window) < merge_score(inside, NOW, window)


def test_an_undated_record_counts_from_its_creation() -> None:
    old = record("deploy note", id="mem:org:acme:1", created_at=NOW - DAY)
    new = record("deploy note", id="mem:org:acme:2", created_at=NOW - 40 * DAY)
    found = rank([new, old], "deploy note yesterday", 5, NOW, DEFAULT_RANKING)
    assert [r.record.id for r in found] == ["mem:org:acme:1", "mem:org:acme:2"]
