"""Clusters of stored restatements and their survivors (memory/rules/consolidate.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memory.rules.consolidate import clusters
from memory.types import MemoryRecord
from tests.memory.rules.fold_corpus import FOLD_NEAR_MISSES, RESTYLED_TRIPLE
from tests.memory.rules.restate_corpus import NEAR_MISSES

SCOPE = "org:acme"


def record(seq: int, text: str, *, scope: str = SCOPE, **fields: object) -> MemoryRecord:
    base = MemoryRecord(
        id=f"mem:{scope}:{seq}",
        scope_key=scope,
        kind="fact",
        text=text,
        source_thread_key="slack:C1:1700000000.000100",
        created_at=1_700_000_000.0 + seq,
        origin="public",
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def test_the_restyled_triple_forms_one_cluster_kept_in_the_oldest_record() -> None:
    records = [record(seq, text) for seq, text in enumerate(RESTYLED_TRIPLE, start=1)]
    found = clusters([*records, record(9, "Rollbacks go through make ship")])
    assert len(found) == 1
    assert found[0].survivor.id == "mem:org:acme:1"
    assert found[0].duplicate_ids == ("mem:org:acme:2", "mem:org:acme:3")


@pytest.mark.parametrize(("first", "second"), [*NEAR_MISSES, *FOLD_NEAR_MISSES])
def test_a_near_miss_pair_stays_apart(first: str, second: str) -> None:
    assert clusters([record(1, first), record(2, second)]) == []


def test_the_most_used_record_survives_before_the_oldest() -> None:
    older, used = (
        record(1, "deploys go through make ship"),
        record(2, "Deploys go through make ship!", use_count=4),
    )
    (cluster,) = clusters([older, used])
    assert (cluster.survivor.id, cluster.duplicate_ids) == (used.id, (older.id,))


def test_on_equal_use_the_oldest_survives_whatever_the_order_given() -> None:
    newer, older = (
        record(2, "Deploys go through make ship", created_at=5.0),
        record(7, "deploys go through make ship"),
    )
    older = replace(older, created_at=1.0)
    (cluster,) = clusters([newer, older])
    assert cluster.survivor.id == older.id


def test_records_learned_under_different_origins_are_never_merged() -> None:
    public = record(1, "Deploys go through make ship")
    private = record(2, "deploys go through make ship", origin="private", origin_conversation="slack:G1")
    assert clusters([public, private]) == []


def test_only_active_records_with_text_are_grouped() -> None:
    active = record(1, "Deploys go through make ship")
    assert clusters([active, record(2, "deploys go through make ship", status="superseded")]) == []
    assert clusters([record(3, "**!**"), record(4, "…")]) == []  # no meaning left to compare


def test_each_scope_is_clustered_on_its_own() -> None:
    org = record(1, "Deploys go through make ship")
    repo = record(1, "deploys go through make ship", scope="repo:acme/api")
    assert clusters([org, repo]) == []
    pair = [repo, record(2, "Deploys go through make ship!", scope="repo:acme/api")]
    (cluster,) = clusters([org, *pair])
    assert cluster.scope_key == "repo:acme/api"
