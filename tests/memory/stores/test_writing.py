"""The one write algorithm (memory/stores/writing.py): the steps a batch, an approval, an edit or a
merge is planned into, in the order every backend applies them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memory.rules.curation import ChainWalk, edit_candidate, write_pool
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.writing import (
    Absorb,
    Activate,
    BatchPlan,
    Erase,
    Evict,
    Fold,
    Insert,
    Log,
    Supersede,
    Withdraw,
    plan_approval,
    plan_edit,
    plan_merge,
)
from memory.types import CurationEntry, MemoryCandidate, MemoryRecord, RecordStatus, WriteResult
from tests.memory.records import fact, record

SCOPE = "org:acme"
NOW = 1_800_000_000.0


def row(seq: int, text: str, status: RecordStatus = "active", supersedes: str | None = None) -> MemoryRecord:
    return replace(
        record(text, id=f"mem:{SCOPE}:{seq}", scope_key=SCOPE, status=status), supersedes=supersedes
    )


def kinds(steps: tuple[object, ...]) -> list[str]:
    return [type(step).__name__ for step in steps]


def planned(
    batch: list[MemoryCandidate], rows: list[MemoryRecord], *, pending: bool = False
) -> tuple[BatchPlan, list[object]]:
    plan = BatchPlan(SCOPE, len(rows), NOW, pending=pending)
    steps: list[object] = []
    for index, candidate in enumerate(batch):
        steps.extend(plan.add(index, candidate, write_pool(rows, candidate, pending=pending)))
    return plan, steps


def test_a_batch_ends_with_the_eviction_then_the_log() -> None:
    plan, steps = planned([fact("deploys run nightly")], [])
    last = plan.finish(500)
    assert kinds(last) == ["Evict", "Log"] and last[0] == Evict(500)
    assert kinds(tuple(steps)) == ["Insert"]


def test_a_correction_retires_its_target_before_its_insert_and_logs_the_supersede() -> None:
    old = row(1, "deploys run weekly")
    plan, steps = planned([fact("deploys run nightly", supersedes=old.id)], [old])
    assert kinds(tuple(steps)) == ["Supersede", "Insert"]
    assert steps[0] == Supersede(old.id)
    insert = steps[1]
    assert isinstance(insert, Insert) and insert.seq == 2 and insert.record.supersedes == old.id
    [log] = [step for step in plan.finish(500) if isinstance(step, Log)]
    assert [(e.record_id, e.action, e.related_id) for e in log.entries] == [
        (old.id, "superseded", insert.record.id)
    ]
    assert plan.result(3) == WriteResult(inserted=1, superseded=1, evicted=3)


def test_a_restatement_folds_and_counts_as_deduped() -> None:
    old = row(1, "Deploys run nightly.")
    plan, steps = planned([fact("deploys run nightly")], [old])
    [fold] = steps
    assert isinstance(fold, Fold) and fold.target == old and fold.folded.use_count == old.use_count + 1
    assert plan.result() == WriteResult(deduped=1)


def test_a_pending_batch_expires_the_oldest_waiting_past_the_cap_instead_of_evicting() -> None:
    waiting = [row(n, f"waiting fact {n}", "pending") for n in (1, 2, 3)]
    plan, _ = planned([fact("another fact")], waiting, pending=True)
    last = plan.finish(2, waiting)
    assert kinds(last) == ["Erase", "Log"]
    assert last[0] == Erase((waiting[0].id,), "expired")
    assert plan.result() == WriteResult(inserted=1, evicted=1)


def test_an_approval_activates_then_evicts_then_logs() -> None:
    target = row(1, "deploys run weekly")
    waiting = row(2, "deploys run nightly", "pending", target.id)
    chain = ChainWalk(waiting)
    chain.add([target, waiting])
    change = plan_approval(waiting, chain, [target], NOW, "user:slack:U1", 500)
    assert kinds(change.steps) == ["Supersede", "Activate", "Evict", "Log"]
    activate = change.steps[1]
    assert isinstance(activate, Activate) and activate.record.status == "active"
    assert change.superseded == target.id and not change.folded


def test_an_edit_supersedes_the_active_version_then_inserts_the_new_one_then_logs() -> None:
    old = replace(row(1, "deploys run weekly"), origin="public", origin_conversation="slack:C1", use_count=3)
    candidate = edit_candidate(old, "deploys run nightly", ("dm", "slack:D1"))
    change = plan_edit(old, 2, candidate, NOW, "user:slack:U1")
    assert kinds(change.steps) == ["Supersede", "Insert", "Log"]
    assert change.steps[0] == Supersede(old.id)
    insert = change.steps[1]
    assert isinstance(insert, Insert) and (insert.seq, insert.vector) == (2, 0)
    new = insert.record
    assert new == change.record and change.superseded == old.id
    assert (new.id, new.status, new.supersedes, new.use_count) == (f"mem:{SCOPE}:2", "active", old.id, 3)
    # Typed in a DM: the new words are never shown wider than there.
    assert (new.origin, new.origin_conversation) == ("dm", "slack:D1")
    assert change.steps[2] == Log((CurationEntry(old.id, SCOPE, "edited", "user:slack:U1", NOW, new.id),))
    assert change.erased == 0 and change.merged == 0


def test_an_edit_of_a_pending_record_withdraws_and_erases_it_before_the_new_version_waits() -> None:
    old = replace(
        row(1, "deploys freeze on frydays", "pending"), origin="private", origin_conversation="slack:C1"
    )
    candidate = edit_candidate(old, "deploys freeze on fridays", ("public", "slack:C9"))
    change = plan_edit(old, 4, candidate, NOW, "user:slack:U1")
    assert kinds(change.steps) == ["Withdraw", "Erase", "Insert", "Log"]
    assert change.steps[:2] == (Withdraw(old.id), Erase((old.id,), "edited"))
    insert = change.steps[2]
    assert isinstance(insert, Insert) and insert.vector is None  # a pending row has no vector yet
    assert (insert.record.status, insert.record.supersedes) == ("pending", old.id)
    # Typed somewhere wider: the record keeps its narrower origin.
    assert (insert.record.origin, insert.record.origin_conversation) == ("private", "slack:C1")
    assert change.erased == 1


def test_a_merge_absorbs_the_uses_then_erases_every_version_of_each_duplicate_then_logs_in_order() -> None:
    survivor = replace(row(1, "deploys freeze on fridays"), use_count=2, last_used_at=NOW - 50)
    older = row(2, "zebra wording of the freeze", "superseded")
    edited = replace(row(3, "fridays: deploy freeze", supersedes=older.id), use_count=1, last_used_at=NOW)
    other = replace(row(4, "no deploys on fridays"), use_count=4, observed_at=NOW - 10)
    chains = []
    for duplicate in (other, edited):
        chain = ChainWalk(duplicate)
        chain.add([survivor, older, edited, other])
        chains.append(chain)
    change = plan_merge(survivor, [other, edited], chains, NOW, "user:slack:U1")
    assert kinds(change.steps) == ["Absorb", "Erase", "Log"]
    absorb = change.steps[0]
    assert isinstance(absorb, Absorb) and absorb.survivor == survivor and absorb.merged == change.record
    merged = change.record
    assert (merged.id, merged.use_count, merged.last_used_at, merged.observed_at) == (
        survivor.id,
        7,
        NOW,
        NOW - 10,
    )
    assert change.steps[1] == Erase(tuple(sorted([older.id, edited.id, other.id])), "merged")
    log = change.steps[2]
    assert isinstance(log, Log)
    assert [(e.record_id, e.action, e.related_id) for e in log.entries] == [
        (other.id, "merged", survivor.id),
        (edited.id, "merged", survivor.id),
    ]
    assert change.merged == 2 and change.superseded is None


@pytest.mark.parametrize("call", ["pending", "curation_log", "history", "active_records"])
async def test_the_in_process_store_refuses_a_malformed_scope_key_as_every_store_does(call: str) -> None:
    store = InProcessMemoryStore()
    with pytest.raises(ValueError, match="scope key"):
        if call == "pending":
            await store.pending("org acme", 5)
        elif call == "curation_log":
            await store.curation_log("org acme", "mem:org acme:1", 5)
        elif call == "history":
            await store.history("org acme", "mem:org acme:1")
        else:
            await store.active_records("org acme")
