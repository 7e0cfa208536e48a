"""The one write algorithm every store runs, planned here and applied by each backend.

A reflection's batch and a pending batch (`BatchPlan`), an approval (`plan_approval`), an edit
(`plan_edit`) and a merge (`plan_merge`) are planned against the rows each plan reads, which the
backend loads inside its transaction (a batch's after the scope's expired records are erased), into
steps to persist in the order they must run. Each backend applies the steps in that order, in the
same transaction, and keeps only the storage of each step. So every store folds, supersedes,
inserts, erases, evicts and logs in one order, and answers with one result shape.

Every decision comes from memory/rules (engine, curation); nothing here reads or writes storage.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass

from memory.rules.curation import (
    SYSTEM_ACTOR,
    ChainWalk,
    approval_candidate,
    approved_record,
    edited_record,
    entry,
    merged_survivor,
    pending_record,
    pending_to_expire,
    plan_pending,
    run_actor,
)
from memory.rules.engine import fold_into, mint_record, plan_write
from memory.types import CurationEntry, EraseReason, MemoryCandidate, MemoryRecord, WriteResult

# No cap: a store built without one never evicts (nor expires waiting records over a cap).
NO_CAP = 2**62


@dataclass(frozen=True, slots=True)
class Fold:
    """A restatement confirms `target`: used once more, now, observed as late as `folded` says
    (`fold_into`). A backend increments the stored count in place, so a usage bump it still holds
    for the row adds to it."""

    target: MemoryRecord
    folded: MemoryRecord


@dataclass(frozen=True, slots=True)
class Supersede:
    """An active record retired by its correction: `superseded`, out of the indexes."""

    record_id: str


@dataclass(frozen=True, slots=True)
class Withdraw:
    """A pending row replaced by its edit: `superseded`. It never entered the indexes, so nothing
    comes out of them; the `Erase` that follows takes its words."""

    record_id: str


@dataclass(frozen=True, slots=True)
class Insert:
    """A new row at `seq` (active: into the indexes; pending: outside them); `vector`: the index of
    its text's vector in the batch's vectors, when the backend made them."""

    seq: int
    record: MemoryRecord
    vector: int | None = None


@dataclass(frozen=True, slots=True)
class Activate:
    """A pending row made active as `record` says (its `supersedes` and last use), into the indexes;
    `vector`: the index of its vector in the vectors the backend made, when it made them."""

    record: MemoryRecord
    vector: int | None = None


@dataclass(frozen=True, slots=True)
class Erase:
    """These rows' text erased for `reason` (a live one is forgotten)."""

    record_ids: tuple[str, ...]
    reason: EraseReason


@dataclass(frozen=True, slots=True)
class Absorb:
    """A merge's survivor takes its duplicates' uses: counted, last used and observed as `merged`
    says (`merged_survivor`); `survivor` is the row as the plan read it (a backend that keeps the
    count apart from the row adds the difference there)."""

    survivor: MemoryRecord
    merged: MemoryRecord


@dataclass(frozen=True, slots=True)
class Evict:
    """The least recently used active records past `cap` evicted (`plan_eviction`'s order); the
    backend may read them off an index instead of the whole active set."""

    cap: int


@dataclass(frozen=True, slots=True)
class Log:
    """The curation entries of this change, appended in its transaction (entries past the log's
    retention dropped on the way)."""

    entries: tuple[CurationEntry, ...]


Step = Fold | Supersede | Withdraw | Insert | Activate | Erase | Absorb | Evict | Log


@dataclass(frozen=True, slots=True)
class Approval:
    """What an approval did: the active record it left (the pending one, or the one it folded into),
    what it superseded, how many it evicted. The memory service's client knows only the record: it
    says None for the other two (the service's own `memory.approve` line has them)."""

    record: MemoryRecord
    folded: bool
    superseded: str | None
    evicted: int | None


@dataclass(frozen=True, slots=True)
class Change:
    """A change's steps, in order. `record`: the record it leaves (an approval's active record, the
    pending one or the one it folded into; an edit's new version; a merge's survivor), `superseded`
    what it retired, `merged` how many duplicates a merge folded."""

    steps: tuple[Step, ...]
    record: MemoryRecord
    superseded: str | None = None
    merged: int = 0

    @property
    def folded(self) -> bool:
        return any(isinstance(step, Fold) for step in self.steps)

    @property
    def erased(self) -> int:
        return sum(len(step.record_ids) for step in self.steps if isinstance(step, Erase))


class BatchPlan:
    """A batch (a reflection's, or with `pending` one whose new records wait for review) planned one
    candidate at a time after the scope's last `seq`: the backend loads the rows a candidate's plan
    reads (`write_pool` in memory/rules/curation.py says which: same-meaning live rows in seq order,
    and the active row it names to supersede) inside its transaction, applies `add`'s steps, and
    after the last candidate applies `finish`'s: the eviction over the cap (with `pending`: the
    oldest waiting past it expired), then the curation log."""

    def __init__(self, scope_key: str, seq: int, now: float, *, pending: bool = False) -> None:
        self.scope_key = scope_key
        self.seq = seq
        self.now = now
        self.pending = pending
        self._entries: builtins.list[CurationEntry] = []
        self._inserted = self._deduped = self._superseded = self._expired = 0

    def add(self, index: int, candidate: MemoryCandidate, pool: Sequence[MemoryRecord]) -> tuple[Step, ...]:
        """One candidate (the batch's `index`th: its vector's index) against `pool`."""
        scope_key, now = self.scope_key, self.now
        actor = run_actor(candidate.source_run_id)
        decided = (plan_pending if self.pending else plan_write)(scope_key, candidate, pool)
        if decided.action == "dedup":
            target = next(r for r in pool if r.id == decided.dedup_id)
            self._entries.append(entry(target, "folded", actor, now))
            self._deduped += 1
            return (Fold(target, fold_into(target, candidate, now)),)
        self.seq += 1
        self._inserted += 1
        if self.pending:
            return (Insert(self.seq, pending_record(scope_key, self.seq, candidate, now, decided)),)
        minted = mint_record(scope_key, self.seq, candidate, now, decided.supersede_id)
        if decided.supersede_id is None:
            return (Insert(self.seq, minted, index),)
        self._superseded += 1
        self._entries.append(
            CurationEntry(decided.supersede_id, scope_key, "superseded", actor, now, minted.id)
        )
        return (Supersede(decided.supersede_id), Insert(self.seq, minted, index))

    def finish(self, cap: int, waiting: Sequence[MemoryRecord] = ()) -> tuple[Step, ...]:
        """The batch's last steps: the eviction over `cap` (with `pending`: the oldest of `waiting`,
        every pending row of the scope now, past `cap` expired instead), then the log."""
        if not self.pending:
            return (Evict(cap), Log(tuple(self._entries)))
        doomed = set(pending_to_expire(waiting, cap))
        over = [r for r in waiting if r.id in doomed]
        self._expired = len(over)
        self._entries.extend(entry(r, "expired", SYSTEM_ACTOR, self.now) for r in over)
        expire: tuple[Step, ...] = (Erase(tuple(r.id for r in over), "expired"),) if over else ()
        return (*expire, Log(tuple(self._entries)))

    def result(self, evicted: int = 0) -> WriteResult:
        """What the batch did (`evicted`: the backend's count; a pending batch's are its expired)."""
        return WriteResult(
            inserted=self._inserted,
            deduped=self._deduped,
            superseded=self._superseded,
            evicted=self._expired if self.pending else evicted,
        )


def approval_pool_candidate(record: MemoryRecord, chain: ChainWalk) -> MemoryCandidate:
    """The candidate whose pool a backend loads for an approval (as a write loads a candidate's)."""
    return approval_candidate(record, chain.target())


def plan_approval(
    record: MemoryRecord,
    chain: ChainWalk,
    pool: Sequence[MemoryRecord],
    now: float,
    actor: str,
    cap: int,
) -> Change:
    """A pending record approved as its write would be planned (`plan_write`): folded into an active
    record of the same meaning (and erased, reason `merged`), or made active, superseding what it
    corrects, then the scope evicted over `cap`, then the log. `pool`: the rows its candidate's plan
    reads (`approval_pool`)."""
    scope_key = record.scope_key
    candidate = approval_candidate(record, chain.target())
    decided = plan_write(scope_key, candidate, pool)
    if decided.action == "dedup":
        target = next(r for r in pool if r.id == decided.dedup_id)
        survivor = fold_into(target, candidate, now)
        entries = (
            entry(record, "approved", actor, now, target.id),
            entry(target, "folded", actor, now, record.id),
        )
        steps: tuple[Step, ...] = (Fold(target, survivor), Erase((record.id,), "merged"), Log(entries))
        return Change(steps, survivor)
    approved = approved_record(record, decided, chain.versions(), now)
    logged = [entry(record, "approved", actor, now)]
    retire: tuple[Step, ...] = ()
    if decided.supersede_id is not None:
        by = run_actor(record.source_run_id)
        logged.insert(0, CurationEntry(decided.supersede_id, scope_key, "superseded", by, now, record.id))
        retire = (Supersede(decided.supersede_id),)
    steps = (*retire, Activate(approved, vector=0), Evict(cap), Log(tuple(logged)))
    return Change(steps, approved, decided.supersede_id)


def plan_edit(old: MemoryRecord, seq: int, candidate: MemoryCandidate, now: float, actor: str) -> Change:
    """An edit of the active or pending `old` into its new version at `seq` (`edited_record`, in the
    old one's status). `candidate`: `edit_candidate`'s, the person's words checked and redacted, its
    origin the narrower of the record's and where they were typed. The old version is retired first:
    an active one superseded; a pending one withdrawn and its words erased (reason `edited`: it was
    never approved, the new version waits instead). Then the new version is inserted (an active one
    with the edit's one vector, index 0), then the log."""
    new = edited_record(old, seq, candidate, now)
    retire: tuple[Step, ...] = (
        (Supersede(old.id),) if old.status == "active" else (Withdraw(old.id), Erase((old.id,), "edited"))
    )
    insert = Insert(seq, new, 0 if new.status == "active" else None)
    return Change((*retire, insert, Log((entry(old, "edited", actor, now, new.id),))), new, old.id)


def plan_merge(
    survivor: MemoryRecord,
    duplicates: Sequence[MemoryRecord],
    chains: Sequence[ChainWalk],
    now: float,
    actor: str,
) -> Change:
    """A merge of the active `duplicates` into the active `survivor` (both as `merge_duplicates`
    picks them): the survivor absorbs their uses (`merged_survivor`), then every version of each
    duplicate's chain (`chains`: the duplicates' walks) is erased, reason `merged` (forgetting the
    survivor could not reach them), then one entry per duplicate is logged, in the order asked."""
    merged = merged_survivor(survivor, duplicates)
    doomed = tuple(sorted({v.id for chain in chains for v in chain.versions()}))
    entries = tuple(entry(d, "merged", actor, now, survivor.id) for d in duplicates)
    steps = (Absorb(survivor, merged), Erase(doomed, "merged"), Log(entries))
    return Change(steps, merged, merged=len(duplicates))
