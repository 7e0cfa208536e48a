import math

from memory.ranking.lexical import (
    IDF_EXPONENT,
    TermStats,
    idf,
    idf_weights,
    query_stems,
    record_stems,
    stems_of,
    term_stats,
    weighted_match,
)
from memory.rules.scorer import query_terms
from tests.memory.records import record


def test_inflections_share_one_stem() -> None:
    assert stems_of("deploys deployed deployment deploying") == frozenset({"deploy"})


def test_stems_stay_whole_tokens() -> None:
    stems = record_stems(record("the staging database", keywords=("Ops",)))
    assert stems == frozenset({"the", "stage", "databas", "op"})
    assert "g" not in stems and "stag" not in stems


def test_query_stems_drop_stopwords_and_repeats_in_order() -> None:
    assert query_stems("What did we deploy, and who deployed it?") == ("deploy",)
    assert query_stems("billing clusters for the billing team") == ("bill", "cluster", "team")


def test_question_frame_words_select_nothing_in_v2_only() -> None:
    question = "What kind of cake did she mention, and how many candles?"
    assert query_stems(question) == ("cake", "candl")
    # Inflections of a question word go too; the spec's tokens keep every one of them.
    assert query_stems("Which types of bread were mentioned?") == ("bread",)
    assert {"kind", "mention", "many"} <= set(query_terms(question))


def test_idf_is_highest_for_a_stem_no_record_holds_and_always_positive() -> None:
    assert idf(0, 100) > idf(1, 100) > idf(50, 100) > idf(100, 100) > 0
    assert math.isclose(idf(0, 0), math.log(2.0))


def test_weighted_match_is_the_share_of_the_query_idf_a_record_holds() -> None:
    weights = {"kubernet": 3.0, "team": 1.0}
    assert weighted_match(weights, {"kubernet"}) == 0.75
    assert weighted_match(weights, {"team"}) == 0.25
    assert weighted_match(weights, {"other"}) == 0.0
    assert weighted_match({}, {"team"}) == 0.0


def test_term_stats_count_active_records_holding_each_stem() -> None:
    records = [
        record("we deployed it"),
        record("deploys are on friday"),
        record("deploy again", status="superseded"),
        record("billing"),
    ]
    stats = term_stats(records, ["deploy", "bill", "absent"])
    assert stats == TermStats(documents=3, frequencies={"deploy": 2, "bill": 1, "absent": 0})
    weights = idf_weights(["deploy", "bill"], stats)
    assert weights["bill"] > weights["deploy"]


def test_a_stem_weighs_its_idf_to_the_power_of_the_exponent() -> None:
    stats = TermStats(documents=100, frequencies={"kubernet": 2, "team": 60})
    weights = idf_weights(["kubernet", "team"], stats)
    assert IDF_EXPONENT == 1.5
    assert math.isclose(weights["kubernet"], idf(2, 100) ** 1.5)
    assert math.isclose(weights["team"], idf(60, 100) ** 1.5)
