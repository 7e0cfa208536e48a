import math
from dataclasses import replace

import numpy as np
import pytest

from memory.ranking.fusion import (
    SPEC,
    Feedback,
    Ranked,
    Ranking,
    closeness,
    feedback_weights,
    merge_score,
    rank,
    row_products,
    stats_stems,
)
from memory.ranking.lexical import TermStats, term_stats
from memory.rules.engine import rank_records
from memory.types import MemoryRecord
from tests.memory.records import DAY, NOW, record
from tests.memory.rules.scoring import score_record

V2 = Ranking()


def ids(ranked: list[Ranked]) -> list[str]:
    return [item.record.id for item in ranked]


SPEC_CASES = [
    ([record("deploy train", id="mem:o:1"), record("unrelated", id="mem:o:2")], "deploy", 8),
    (
        [
            record("deploy", id="mem:o:1", created_at=NOW - 30 * DAY),
            record("deploy train schedule", id="mem:o:2", created_at=NOW - 30 * DAY),
            record("deploy train", id="mem:o:3", created_at=NOW - 2 * DAY),
        ],
        "deploy train schedule",
        2,
    ),
    ([record("deploys nightly", id="mem:o:1"), record("deployed", id="mem:o:2")], "deploys", 8),
    ([record("deploy", id="mem:o:1", status="superseded")], "deploy", 8),
    ([record("deploy")], "?!", 8),
]


@pytest.mark.parametrize(("records", "query", "limit"), SPEC_CASES)
def test_the_spec_ranking_is_the_seeds_scorer_exactly(
    records: list[MemoryRecord], query: str, limit: int
) -> None:
    ranked = rank(records, query, limit, NOW, SPEC, cosines={r.id: 1.0 for r in records})
    assert [item.record for item in ranked] == rank_records(records, query, limit, NOW)
    for item in ranked:  # relevance + recency is the spec's score: no stems, no IDF, no vectors
        assert math.isclose(merge_score(item, NOW), score_record(item.record, query, NOW))


def test_v2_matches_inflections_through_stems() -> None:
    records = [record("we deployed on friday", id="mem:o:1"), record("billing", id="mem:o:2")]
    assert ids(rank(records, "deploys", 8, NOW, V2)) == ["mem:o:1"]


def test_v2_weights_a_rare_term_over_a_common_one() -> None:
    records = [record("the team", id="mem:o:1"), record("kubernetes", id="mem:o:2")]
    stats = TermStats(documents=100, frequencies={"team": 60, "kubernet": 2})
    ranked = rank(records, "team kubernetes", 8, NOW, V2, stats=stats)
    assert ids(ranked) == ["mem:o:2", "mem:o:1"]
    assert ranked[0].relevance > 0.5 > ranked[1].relevance
    # Without statistics every stem weighs the same: a tie, broken by input order.
    assert ids(rank(records, "team kubernetes", 8, NOW, V2)) == ["mem:o:1", "mem:o:2"]


def test_a_record_sharing_only_question_words_is_not_returned() -> None:
    records = [record("one kind of thing I mentioned", id="mem:o:1"), record("cake", id="mem:o:2")]
    assert ids(rank(records, "What kind of cake did I mention?", 8, NOW, V2)) == ["mem:o:2"]
    # The spec ranking keeps its own stopwords only: "kind" and "mention" still match there.
    assert ids(rank(records, "What kind of cake did I mention?", 8, NOW, SPEC)) == ["mem:o:1", "mem:o:2"]


def test_v2_keeps_recency_in_the_score() -> None:
    records = [
        record("deploy notes", id="mem:o:1", created_at=NOW - 30 * DAY),
        record("deploy notes", id="mem:o:2", created_at=NOW - DAY),
    ]
    assert ids(rank(records, "deploy", 8, NOW, V2)) == ["mem:o:2", "mem:o:1"]


def test_the_gate_never_returns_an_unrelated_record() -> None:
    records = [record("lunch menu on fridays", id="mem:o:1"), record("deploy train", id="mem:o:2")]
    # Close in meaning but below the threshold, and no shared stem: it stays out.
    cosines = {"mem:o:1": V2.semantic_threshold - 0.01, "mem:o:2": 0.1}
    assert ids(rank(records, "deploy", 8, NOW, V2, cosines=cosines)) == ["mem:o:2"]
    assert rank(records, "kubernetes", 8, NOW, V2, cosines=cosines) == []


def test_a_record_without_a_shared_stem_enters_at_the_cosine_threshold() -> None:
    records = [record("ship the release on friday", id="mem:o:1")]
    ranked = rank(records, "deploy", 8, NOW, V2, cosines={"mem:o:1": V2.semantic_threshold})
    assert ids(ranked) == ["mem:o:1"]
    assert math.isclose(ranked[0].relevance, V2.semantic_weight * V2.semantic_threshold)


def test_fusion_is_a_noisy_or_of_the_weighted_lexical_score_and_cosine() -> None:
    ranking = Ranking(semantic_weight=0.5)
    records = [record("deploy api", id="mem:o:1"), record("deploy web", id="mem:o:2")]
    ranked = rank(records, "deploy api", 8, NOW, ranking, cosines={"mem:o:1": -0.3, "mem:o:2": 0.9})
    by_id = {item.record.id: item.relevance for item in ranked}
    assert math.isclose(by_id["mem:o:1"], 0.5 * 1.0)  # a negative cosine adds nothing
    assert math.isclose(by_id["mem:o:2"], 1 - (1 - 0.5 * 0.5) * (1 - 0.5 * 0.9))
    assert ids(ranked) == ["mem:o:2", "mem:o:1"]  # the cosine can reorder lexical matches


def test_a_record_strong_in_both_signals_gains_less_from_the_second_than_a_sum_gives() -> None:
    ranking = Ranking(semantic_weight=0.5)
    ranked = rank(
        [record("deploy api", id="mem:o:1")], "deploy api", 8, NOW, ranking, cosines={"mem:o:1": 0.8}
    )
    assert math.isclose(ranked[0].relevance, 1 - 0.5 * 0.6)  # 0.7, where 0.5 + 0.4 would be 0.9


FEEDBACK = Ranking(feedback=Feedback(records=1, stems=2, weight=0.5))


def test_feedback_weighs_the_top_records_stems_the_query_lacks_by_relevance_and_idf() -> None:
    stats = TermStats(10, {"deploy": 5, "api": 1, "web": 9, "cluster": 1})
    top = [(frozenset({"deploy", "api"}), 1.0), (frozenset({"deploy", "web", "cluster"}), 0.6)]
    weights = feedback_weights(top, ["deploy"], stats, Feedback(records=2, stems=2, weight=0.2))
    rare = math.log(1 + 9.5 / 1.5) ** 1.5
    # api: 1.0 / 2 of the first record's mass; cluster: 0.6 / 3 of the second's; web is common.
    assert weights == pytest.approx({"api": 0.5 * rare, "cluster": 0.2 * rare})


def test_feedback_stems_tied_in_weight_are_taken_in_alphabetical_order() -> None:
    top = [(frozenset({"deploy", "zeta", "alpha", "mid"}), 1.0)]
    weights = feedback_weights(top, ["deploy"], TermStats(4, {}), Feedback(records=1, stems=2, weight=0.2))
    assert list(weights) == ["alpha", "mid"]


def test_feedback_lifts_a_match_that_shares_stems_with_the_best_record() -> None:
    records = [  # public: only records anyone may see vote in the feedback
        record("deploy cluster staging", id="mem:o:1", origin="public"),
        record("deploy menu", id="mem:o:2", origin="public"),
        record("deploy staging", id="mem:o:3", origin="public"),
        record("rollback staging", id="mem:o:4", origin="public"),
    ]
    stats = term_stats(records, stats_stems(FEEDBACK, "deploy cluster", records))
    plain = rank(records, "deploy cluster", 8, NOW, V2, stats=stats)
    assert ids(plain) == ["mem:o:1", "mem:o:2", "mem:o:3"]
    # The best record's other stem (staging) now counts: deploy staging shares it.
    lifted = rank(records, "deploy cluster", 8, NOW, FEEDBACK, stats=stats)
    assert ids(lifted) == ["mem:o:1", "mem:o:3", "mem:o:2"]


def test_feedback_never_admits_a_record_that_shares_no_stem_with_the_query() -> None:
    records = [record("deploy cluster rollback", id="mem:o:1"), record("rollback staging", id="mem:o:2")]
    stats = term_stats(records, stats_stems(FEEDBACK, "deploy", records))
    assert ids(rank(records, "deploy", 8, NOW, FEEDBACK, stats=stats)) == ["mem:o:1"]
    cosines = {"mem:o:1": 0.2, "mem:o:2": 0.1}  # below the threshold: the cosine admits neither
    assert ids(rank(records, "deploy", 8, NOW, FEEDBACK, stats=stats, cosines=cosines)) == ["mem:o:1"]


def test_feedback_is_off_by_default_and_stats_stems_are_then_the_querys() -> None:
    records = [record("deploy cluster rollback", id="mem:o:1")]
    assert not V2.feedback.enabled
    assert stats_stems(V2, "deploy cluster", records) == ["deploy", "cluster"]
    assert stats_stems(FEEDBACK, "deploy cluster", records) == ["deploy", "cluster", "rollback"]


def test_the_fusion_reads_the_centered_cosine_and_the_gate_the_plain_one() -> None:
    ranking = Ranking(semantic_weight=0.4)
    records = [
        record("deploy api", id="mem:o:1"),
        record("deploy web", id="mem:o:2"),
        record("lunch menu", id="mem:o:3"),  # no shared stem
        record("ship it friday", id="mem:o:4"),  # no shared stem
    ]
    cosines = {"mem:o:1": 0.9, "mem:o:2": 0.8, "mem:o:3": ranking.semantic_threshold - 0.01, "mem:o:4": 0.75}
    # What the scope's records share made record 1 look closer; taken away, record 2 is.
    centered = {"mem:o:1": 0.1, "mem:o:2": 0.6, "mem:o:3": 0.9, "mem:o:4": -0.2}
    ranked = rank(records, "deploy", 8, NOW, ranking, cosines=cosines, centered=centered)
    assert ids(ranked) == ["mem:o:2", "mem:o:1", "mem:o:4"]  # record 3 stays out, however centered
    by_id = {item.record.id: item.relevance for item in ranked}
    assert math.isclose(by_id["mem:o:2"], 1 - (1 - 0.6 * 1.0) * (1 - 0.4 * 0.6))
    assert by_id["mem:o:4"] == 0.0  # admitted by its plain cosine, no closer than average
    assert ids(rank(records, "deploy", 8, NOW, ranking, cosines=cosines))[:2] == ["mem:o:1", "mem:o:2"]


def test_the_centered_cosine_is_the_cosine_once_the_scopes_mean_is_taken_from_both() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(6, 5)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    query = (matrix[0] + rng.normal(size=5)).astype(np.float32)
    query /= np.linalg.norm(query)
    wide = matrix.astype(np.float64)
    mean = wide.mean(axis=0)
    off, away = wide - mean, query.astype(np.float64) - mean
    wanted = off @ away / (np.linalg.norm(off, axis=1) * np.linalg.norm(away))

    plain, centered = closeness(matrix, np.einsum("ij,ij->i", wide, wide), query, mean)

    assert plain == pytest.approx(wide @ query.astype(np.float64), abs=1e-6)
    assert centered == pytest.approx(wanted, abs=1e-5)
    # A scope of one record: it is its own centroid, so it is no closer than average to anything.
    _, alone = closeness(matrix[:1], np.ones(1), query, wide[0])
    assert alone.tolist() == [0.0]


def test_a_rows_product_is_the_same_whatever_matrix_holds_it() -> None:
    # A scope index takes the products over its whole matrix, another store over its candidates'
    # rows only: both must give a record the same float, or equal scores could order differently.
    rng = np.random.default_rng(11)
    matrix = rng.normal(size=(4097, 256)).astype(np.float32)
    query = rng.normal(size=256).astype(np.float32)

    whole = row_products(matrix, query)
    picked = [0, 1, 2048, 4096]

    assert [row_products(matrix[[i]], query)[0] for i in picked] == [whole[i] for i in picked]
    assert row_products(matrix[2040:2050], query).tolist() == whole[2040:2050].tolist()
    assert whole == pytest.approx(matrix.astype(np.float64) @ query.astype(np.float64), abs=1e-3)


def test_a_record_without_a_vector_ranks_lexically() -> None:
    records = [record("deploy api", id="mem:o:1")]
    ranked = rank(records, "deploy api", 8, NOW, V2, cosines={})
    assert ranked[0].relevance == 1.0


def test_ranking_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="ranking mode"):
        Ranking(mode="bm25")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="semantic weight"):
        Ranking(semantic_weight=1.5)


def test_only_records_anyone_may_see_vote_in_the_feedback() -> None:
    # The store ranks before the read rule filters: with feedback on, a private record's words must not
    # become feedback stems and reorder the public records a public reader gets (an attacker review).
    # The document frequencies are held equal here: they count every record of the scope, as the
    # query's own do.
    ranking = Ranking(feedback=Feedback(records=3, stems=5, weight=0.2))
    visible = [
        record("deploy beta checklist", id="mem:o:1", origin="public"),
        record("deploy acme checklist", id="mem:o:2", origin="public"),
    ]
    hidden = {
        word: record(f"deploy {word} merger", id="mem:o:0", origin="private", origin_conversation="slack:G7")
        for word in ("acme", "beta")
    }
    every = [*visible, *hidden.values()]
    stats = term_stats(every, stats_stems(ranking, "deploy", every))

    def order(records: list[MemoryRecord]) -> list[str]:
        return [
            r.record.id
            for r in rank(records, "deploy", 8, NOW, ranking, stats=stats)
            if r.record.origin == "public"
        ]

    assert order([hidden["acme"], *visible]) == order([hidden["beta"], *visible])
    # A public record with the same words does vote: feedback is on.
    voter = replace(hidden["acme"], origin="public", origin_conversation=None)
    assert order([voter, *visible]) != order([replace(voter, text="deploy beta merger"), *visible])
