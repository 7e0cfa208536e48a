"""The curation rules every store shares (memory/rules/curation.py), on rows built by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memory.rules.curation import (
    ChainWalk,
    history_of,
    merged_survivor,
    pending_to_expire,
    plan_pending,
    run_actor,
    validate_entry,
    write_pool,
)
from memory.types import CurationEntry, MemoryRecord, RecordStatus
from tests.memory.records import NOW, fact, record

ORG = "org:acme"


def row(seq: int, text: str, status: RecordStatus = "active", supersedes: str | None = None) -> MemoryRecord:
    return replace(
        record(text, id=f"mem:{ORG}:{seq}", created_at=NOW + seq, status=status), supersedes=supersedes
    )


def rid(seq: int) -> str:
    return f"mem:{ORG}:{seq}"


def chain(start: MemoryRecord, rows: list[MemoryRecord]) -> list[str]:
    walk = ChainWalk(start)
    walk.add(rows)
    return [v.id for v in walk.versions()]


def test_a_chain_follows_supersedes_both_ways_oldest_first() -> None:
    rows = [row(1, "a", "superseded"), row(2, "b", "superseded", rid(1)), row(3, "c", supersedes=rid(2))]
    assert chain(rows[0], rows) == chain(rows[2], rows) == [rid(1), rid(2), rid(3)]


def test_a_pending_correction_is_not_a_version_of_the_live_record_it_names() -> None:
    target, correction = row(1, "mondays"), row(2, "tuesdays", "pending", rid(1))
    assert chain(target, [target, correction]) == [rid(1)]
    assert chain(correction, [target, correction]) == [rid(2)]
    walk = ChainWalk(correction)
    walk.add([target, correction])
    assert walk.target() == target


def test_the_walk_asks_only_for_what_the_chain_can_reach() -> None:
    newest = row(3, "c", supersedes=rid(2))
    walk = ChainWalk(newest)
    assert walk.wanted() == ([rid(2)], [])  # an active row has no successor to look for
    walk.add([row(2, "b", "superseded", rid(1))])
    assert walk.wanted() == ([rid(1)], [rid(2)])
    walk.add([row(1, "a", "superseded")])
    assert walk.wanted() == ([], [rid(1)])
    assert walk.wanted() == ([], [])


def test_the_oldest_pending_records_beyond_the_cap_expire() -> None:
    rows = [row(3, "c", "pending"), row(1, "a", "pending"), row(2, "b", "pending"), row(4, "d")]
    assert pending_to_expire(rows, 1) == [rid(1), rid(2)]
    assert pending_to_expire(rows, 3) == []


def test_a_merged_survivor_adds_uses_and_keeps_the_latest_times() -> None:
    survivor = replace(row(1, "a"), use_count=2, last_used_at=None, observed_at=NOW)
    first = replace(row(2, "b"), use_count=3, last_used_at=NOW + 50, observed_at=NOW + 9)
    second = replace(row(3, "c"), use_count=0, last_used_at=NOW + 20, observed_at=None)
    merged = merged_survivor(survivor, [first, second])
    assert (merged.id, merged.use_count, merged.last_used_at, merged.observed_at) == (
        rid(1),
        5,
        NOW + 50,
        NOW + 9,
    )


def test_a_pending_correction_folds_only_into_a_pending_correction_of_the_same_target() -> None:
    target = row(1, "deploys go out on mondays")
    waiting = row(2, "deploys go out on tuesdays", "pending", rid(1))
    other = row(3, "deploys go out on tuesdays", "pending")
    correction = fact("Deploys go out on Tuesdays!", supersedes=rid(1))
    rows = [target, waiting, other]
    assert plan_pending(ORG, correction, write_pool(rows, correction, pending=True)).dedup_id == rid(2)
    plain = fact("deploys go out on tuesdays")
    assert plan_pending(ORG, plain, write_pool([target, other], plain, pending=True)).dedup_id == rid(3)
    lone = [target, other]
    planned = plan_pending(ORG, correction, write_pool(lone, correction, pending=True))
    assert (planned.action, planned.supersede_id) == ("insert", rid(1))


def test_a_history_gives_each_version_its_own_entries_and_hides_erased_text() -> None:
    rows = [row(1, "a", "superseded"), replace(row(2, "", "forgotten", rid(1)))]
    entries = [
        CurationEntry(rid(2), ORG, "forgotten", "machine", NOW + 9),
        CurationEntry(rid(1), ORG, "edited", "machine", NOW + 5, rid(2)),
    ]
    history = history_of(rows, {rid(1): None, rid(2): "forgotten"}, entries)
    assert [(v.text, v.erased_reason, [e.action for e in v.entries]) for v in history] == [
        ("a", None, ["edited"]),
        (None, "forgotten", ["forgotten"]),
    ]


def test_a_reflected_write_acts_as_its_run() -> None:
    assert (run_actor("r-1"), run_actor(None), run_actor("")) == ("run:r-1", "reflection", "reflection")


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (CurationEntry(rid(1), ORG, "liked", "machine", NOW), "action"),  # type: ignore[arg-type]
        (CurationEntry("", ORG, "remembered", "machine", NOW), "record_id"),
        (CurationEntry(rid(1), ORG, "remembered", "machine", NOW, related_id=""), "related_id"),
        (CurationEntry(rid(1), ORG, "remembered", " ", NOW), "actor"),
        (CurationEntry(rid(1), ORG, "remembered", "machine", -1.0), "at"),
    ],
)
def test_a_bad_entry_is_refused_naming_its_field(bad: CurationEntry, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        validate_entry(bad)
