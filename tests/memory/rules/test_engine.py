from dataclasses import replace

import pytest

from memory.rules.engine import (
    WritePlan,
    fold_into,
    mint_record,
    parse_record_id,
    plan_eviction,
    plan_write,
    prepare_batch,
    rank_records,
)
from memory.types import MAX_TEXT_CHARS
from tests.memory.records import DAY, NOW, fact, record
from tests.memory.rules.restate_corpus import NEAR_MISSES

DEPLOYS = "Deploys go through make ship from the main branch."
# The three restatements of one fact: as written, lower-cased without the period, and with
# the command in backticks and a "!".
RESTATED = (
    DEPLOYS,
    "deploys go through make ship from the main branch",
    "Deploys go through `make ship` from the main branch!",
)


def test_rank_records_gates_on_a_whole_token_match() -> None:
    records = [record("deploy train", id="mem:o:1"), record("unrelated", id="mem:o:2")]
    assert [r.id for r in rank_records(records, "deploy", 8, NOW)] == ["mem:o:1"]


def test_rank_records_orders_by_score_and_limits() -> None:
    records = [
        record("deploy", id="mem:o:1", created_at=NOW - 30 * DAY),
        record("deploy train schedule", id="mem:o:2", created_at=NOW - 30 * DAY),
        record("deploy train", id="mem:o:3", created_at=NOW - 2 * DAY),
    ]
    ranked = rank_records(records, "deploy train schedule", 2, NOW)
    assert [r.id for r in ranked] == ["mem:o:2", "mem:o:3"]


def test_rank_records_skips_non_active_records() -> None:
    records = [
        record("deploy", id="mem:o:1", status="superseded"),
        record("deploy", id="mem:o:2", status="forgotten"),
        record("deploy", id="mem:o:3", status="evicted"),
    ]
    assert rank_records(records, "deploy", 8, NOW) == []


def test_rank_records_does_not_mutate_usage() -> None:
    rec = record("deploy", id="mem:o:1")
    ranked = rank_records([rec], "deploy", 8, NOW)
    assert ranked[0].use_count == 0 and ranked[0].last_used_at is None


def test_rank_records_with_no_query_tokens_returns_nothing() -> None:
    assert rank_records([record("deploy")], "?!", 8, NOW) == []


def test_plan_write_folds_a_restatement_into_the_active_record() -> None:
    pool = [record(DEPLOYS, id="mem:org:acme:1")]
    for text in RESTATED:
        assert plan_write("org:acme", fact(text), pool) == WritePlan("dedup", dedup_id="mem:org:acme:1")


@pytest.mark.parametrize(("first", "second"), NEAR_MISSES)
def test_plan_write_never_folds_a_near_miss(first: str, second: str) -> None:
    assert plan_write("org:acme", fact(second), [record(first)]) == WritePlan("insert")


def test_fold_into_confirms_the_record_and_keeps_the_later_date() -> None:
    kept = record(DEPLOYS, observed_at=NOW - 9 * DAY, origin="public")
    later = fold_into(kept, replace(fact(RESTATED[2]), observed_at=NOW - DAY), NOW)
    assert (later.use_count, later.last_used_at, later.observed_at) == (1, NOW, NOW - DAY)
    assert (later.text, later.origin, later.id) == (kept.text, "public", kept.id)
    earlier = fold_into(kept, replace(fact(RESTATED[1]), observed_at=NOW - 30 * DAY), NOW)
    assert earlier.observed_at == NOW - 9 * DAY  # an older telling never dates the record back
    assert fold_into(kept, fact(RESTATED[1]), NOW).observed_at == NOW  # undated: heard now


def test_plan_write_dedups_against_an_active_record_with_the_same_normalized_text() -> None:
    pool = [record("We deploy on Tuesdays", id="mem:org:acme:1")]
    assert plan_write("org:acme", fact("we  DEPLOY on tuesdays"), pool) == WritePlan(
        "dedup", dedup_id="mem:org:acme:1"
    )


def test_plan_write_dedup_picks_the_earliest_of_duplicate_norms() -> None:
    pool = [record("x", id="mem:org:acme:1"), record("X", id="mem:org:acme:2")]
    assert plan_write("org:acme", fact("x"), pool).dedup_id == "mem:org:acme:1"


def test_plan_write_never_dedups_against_a_superseded_record() -> None:
    pool = [record("old fact", id="mem:org:acme:1", status="superseded")]
    assert plan_write("org:acme", fact("old fact"), pool) == WritePlan("insert")


def test_plan_write_supersedes_a_named_active_record_in_the_same_scope() -> None:
    pool = [record("deploys on tuesdays", id="mem:org:acme:1")]
    plan = plan_write("org:acme", fact("deploys on thursdays", supersedes="mem:org:acme:1"), pool)
    assert plan == WritePlan("insert", supersede_id="mem:org:acme:1")


def test_plan_write_unknown_or_foreign_supersede_id_supersedes_nothing_but_still_inserts() -> None:
    foreign = [record("x", id="mem:user:slack:U1:1", scope_key="user:slack:U1")]
    assert plan_write("org:acme", fact("y", supersedes="mem:user:slack:U1:1"), foreign) == WritePlan("insert")
    assert plan_write("org:acme", fact("y", supersedes="mem:org:acme:99"), []) == WritePlan("insert")


def test_plan_write_restating_the_supersede_target_is_a_dedup_no_op() -> None:
    pool = [record("deploys on tuesdays", id="mem:org:acme:1")]
    plan = plan_write("org:acme", fact("Deploys on Tuesdays", supersedes="mem:org:acme:1"), pool)
    assert plan == WritePlan("dedup", dedup_id="mem:org:acme:1")


def test_a_targeted_supersede_is_not_swallowed_by_a_collision_with_an_unrelated_record() -> None:
    pool = [
        record("deploys on tuesdays", id="mem:org:acme:1"),
        record("deploys on thursdays", id="mem:org:acme:2"),
    ]
    plan = plan_write("org:acme", fact("deploys on thursdays", supersedes="mem:org:acme:1"), pool)
    assert plan == WritePlan("insert", supersede_id="mem:org:acme:1")


def test_a_collision_never_swallows_a_supersede_even_when_the_id_is_unresolvable() -> None:
    pool = [record("deploys on thursdays", id="mem:org:acme:2")]
    plan = plan_write("org:acme", fact("deploys on thursdays", supersedes="mem:org:acme:404"), pool)
    assert plan == WritePlan("insert")


def test_an_empty_supersedes_is_a_plain_candidate_that_dedups() -> None:
    pool = [record("x", id="mem:org:acme:1")]
    assert plan_write("org:acme", fact("x", supersedes=""), pool) == WritePlan(
        "dedup", dedup_id="mem:org:acme:1"
    )


def test_mint_record_shape() -> None:
    rec = mint_record("org:acme", 7, fact("hello", keywords=("k",)), NOW, supersedes="mem:org:acme:3")
    assert rec.id == "mem:org:acme:7"
    assert (rec.scope_key, rec.kind, rec.text, rec.keywords) == ("org:acme", "fact", "hello", ("k",))
    assert (rec.source_thread_key, rec.source_run_id, rec.confidence) == ("slack:C1:1.0", "run-1", 0.9)
    assert (rec.created_at, rec.last_used_at, rec.use_count, rec.status) == (NOW, None, 0, "active")
    assert rec.supersedes == "mem:org:acme:3"


def test_parse_record_id_round_trips_scope_keys_with_colons() -> None:
    assert parse_record_id("mem:user:slack:U1:12") == ("user:slack:U1", 12)
    assert parse_record_id("mem:org:acme:3") == ("org:acme", 3)
    assert parse_record_id("org:acme:3") is None
    assert parse_record_id("mem:org:acme:x") is None
    assert parse_record_id("mem::3") is None


def test_plan_eviction_evicts_nothing_at_or_under_the_cap() -> None:
    records = [record("x", id=f"mem:o:{i}") for i in range(3)]
    assert plan_eviction(records, 3) == []
    assert plan_eviction(records, 5) == []


def test_plan_eviction_evicts_exactly_the_excess_least_recently_used_first() -> None:
    records = [
        record("a", id="mem:o:1", created_at=NOW - 10 * DAY, last_used_at=NOW),
        record("b", id="mem:o:2", created_at=NOW - 5 * DAY),
        record("c", id="mem:o:3", created_at=NOW - 8 * DAY),
        record("d", id="mem:o:4", created_at=NOW - DAY),
    ]
    assert plan_eviction(records, 2) == ["mem:o:3", "mem:o:2"]


def test_plan_eviction_breaks_ties_by_older_created_at() -> None:
    records = [
        record("a", id="mem:o:1", created_at=NOW - DAY, last_used_at=NOW - 2 * DAY),
        record("b", id="mem:o:2", created_at=NOW - 2 * DAY),
    ]
    assert plan_eviction(records, 1) == ["mem:o:2"]


def test_plan_eviction_ignores_non_active_rows() -> None:
    active = [record("a", id="mem:o:1", created_at=NOW - DAY), record("b", id="mem:o:2")]
    dead = [
        replace(record("c", id="mem:o:3", created_at=NOW - 9 * DAY), status=status)
        for status in ("superseded", "forgotten", "evicted")
    ]
    assert plan_eviction(dead + active, 2) == []
    assert plan_eviction(dead + active, 1) == ["mem:o:1"]


def test_prepare_batch_redacts_every_candidate_and_keeps_the_rest() -> None:
    (out,) = prepare_batch([fact("deploy with DB_PASSWORD=hunter2", keywords=("hunter2", "deploy"))])
    assert out == replace(
        fact("deploy with DB_PASSWORD=hunter2", keywords=("hunter2", "deploy")),
        text="deploy with DB_PASSWORD=[REDACTED]",
        keywords=("[REDACTED]", "deploy"),  # the password alone, as a keyword, is still the password
    )


def test_prepare_batch_refuses_text_that_redaction_pushes_over_the_cap() -> None:
    # "pwd=a" becomes "pwd=[REDACTED]": nine characters longer than what was checked.
    text = "x" * (MAX_TEXT_CHARS - len(" pwd=a")) + " pwd=a"
    with pytest.raises(ValueError, match=r"candidates\[0\]\.text"):
        prepare_batch([fact(text)])
