"""The in-process store's rows and its curation storage (`InProcessBackend`, under the curation front
of memory/stores/front.py): the review queue, edits with history, merges, and the curation log beside
the rows. Every write is planned by memory/stores/writing.py; every decision comes from memory/rules."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from dataclasses import replace

import structlog

from memory.ranking.embedder import Embedder, Matrix
from memory.rules.curation import (
    ChainWalk,
    edit_candidate,
    entry,
    history_of,
    merge_duplicates,
    names,
    newest_first,
    write_pool,
)
from memory.rules.engine import plan_eviction
from memory.rules.retention import Retention
from memory.stores.writing import (
    NO_CAP,
    Absorb,
    Activate,
    Approval,
    BatchPlan,
    Erase,
    Evict,
    Fold,
    Insert,
    Step,
    Supersede,
    Withdraw,
    approval_pool_candidate,
    plan_approval,
    plan_edit,
    plan_merge,
)
from memory.types import (
    CurationEntry,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    OriginLabel,
    RecordVersion,
    WriteResult,
)

log = structlog.get_logger("memory")

Clock = Callable[[], float]


class InProcessRows:
    """The in-process store's rows and what every change does to them (its state is declared here,
    set by the store): a planned batch applied, erasure, eviction, the curation log beside them."""

    _cap: int | None
    _clock: Clock
    _retention: Retention
    _embedder: Embedder | None
    _vectors: dict[str, Matrix]
    _erased: dict[str, EraseReason]
    _scopes: dict[str, builtins.list[MemoryRecord]]
    _seq: dict[str, int]
    _curation: builtins.list[CurationEntry]
    _lock: asyncio.Lock

    def _write(
        self,
        scope_key: str,
        batch: Sequence[MemoryCandidate],
        cap: int | None,
        vectors: Matrix | None,
        *,
        pending: bool,
    ) -> WriteResult:
        """The batch planned (memory/stores/writing.py) and applied after the scope's expired records
        are erased."""
        now = self._clock()
        cutoff = self._retention.cutoff(scope_key, now)
        if cutoff is not None:  # the scope is being written: its expired records go now
            self._erase_where(scope_key, lambda r: r.created_at < cutoff, "expired")
        rows = self._scopes.setdefault(scope_key, [])
        plan = BatchPlan(scope_key, self._seq.get(scope_key, 0), now, pending=pending)
        for index, candidate in enumerate(batch):
            self._apply(
                scope_key, plan.add(index, candidate, write_pool(rows, candidate, pending=pending)), vectors
            )
        self._seq[scope_key] = plan.seq
        limit = self._cap if cap is None else cap
        waiting = self._live_rows(scope_key, "pending") if pending else []
        evicted = self._apply(scope_key, plan.finish(NO_CAP if limit is None else limit, waiting), vectors)
        return plan.result(evicted)

    def _apply(self, scope_key: str, steps: Sequence[Step], vectors: Matrix | None) -> int:
        """The plan's steps in their order over the scope's rows; how many were evicted."""
        rows = self._scopes.setdefault(scope_key, [])
        evicted = 0
        for step in steps:
            if isinstance(step, Fold | Activate | Absorb):
                kept = _kept(step)
                rows[:] = [kept if r.id == kept.id else r for r in rows]
            elif isinstance(step, Supersede | Withdraw):
                rows[:] = [replace(r, status="superseded") if r.id == step.record_id else r for r in rows]
            elif isinstance(step, Insert):
                rows.append(step.record)
            elif isinstance(step, Erase):
                self._erase_where(scope_key, _among(set(step.record_ids)), step.reason)
            elif isinstance(step, Evict):
                evicted = self._evict(scope_key, step.cap)
            else:
                for item in step.entries:
                    self._append(item)
            if isinstance(step, Insert | Activate) and step.record.status == "active":
                self._keep_vector(step.record.id, vectors, step.vector)
        return evicted

    def _keep_vector(self, record_id: str, vectors: Matrix | None, index: int | None) -> None:
        if vectors is not None and index is not None:
            self._vectors[record_id] = vectors[index]

    # -- shared with the store ------------------------------------------------------------------------

    def _chain(self, scope_key: str, record: MemoryRecord) -> ChainWalk:
        walk = ChainWalk(record)
        walk.add(self._scopes.get(scope_key, []))
        return walk

    def _chain_ids(self, scope_key: str, record: MemoryRecord) -> set[str]:
        return {v.id for v in self._chain(scope_key, record).versions()}

    def _append(self, item: CurationEntry) -> None:
        """One entry, and the entries past the read audit's retention dropped (as the audit drops)."""
        cutoff = self._retention.audit_cutoff(self._clock())
        self._curation = [e for e in self._curation if e.at >= cutoff]
        self._curation.append(item)

    def _entries(self) -> builtins.list[CurationEntry]:
        cutoff = self._retention.audit_cutoff(self._clock())
        return [e for e in self._curation if e.at >= cutoff]

    def _find(self, scope_key: str, record_id: str, *statuses: str) -> MemoryRecord | None:
        return next(
            (r for r in self._live_rows(scope_key, *statuses) if r.id == record_id),
            None,
        )

    def _live_rows(self, scope_key: str, *statuses: str) -> builtins.list[MemoryRecord]:
        return [
            r for r in self._scopes.get(scope_key, []) if r.status in statuses and r.id not in self._erased
        ]

    def _unexpired_rows(self, scope_key: str, status: str) -> builtins.list[MemoryRecord]:
        cutoff = self._retention.cutoff(scope_key, self._clock())
        rows = self._live_rows(scope_key, status)
        return rows if cutoff is None else [r for r in rows if r.created_at >= cutoff]

    async def _embed(self, text: str) -> Matrix | None:
        if self._embedder is None:
            return None
        vectors = await asyncio.to_thread(self._embedder.embed, [text])
        vector: Matrix = vectors[0]
        return vector

    def _evict(self, scope_key: str, cap: int | None = None) -> int:
        """Evict the least recently used active records over the cap (`cap` None: the store's)."""
        cap = self._cap if cap is None else cap
        if cap is None:
            return 0
        doomed = set(plan_eviction(self._scopes.get(scope_key, []), cap))
        rows = self._scopes.get(scope_key, [])
        rows[:] = [replace(r, status="evicted") if r.id in doomed else r for r in rows]
        return len(doomed)

    def _erase_where(
        self, scope_key: str, doomed: Callable[[MemoryRecord], bool], reason: EraseReason
    ) -> int:
        """Scrub text and keywords of every not-yet-erased matching row; a live one is forgotten."""
        rows = self._scopes.get(scope_key, [])
        erased = 0
        for index, row in enumerate(rows):
            if row.id in self._erased or not doomed(row):
                continue
            status = "forgotten" if row.status in ("active", "pending") else row.status
            rows[index] = replace(row, text="", keywords=(), status=status)
            self._vectors.pop(row.id, None)  # the vector is derived from the text: it goes too
            self._erased[row.id] = reason
            erased += 1
        return erased

    def _next_seq(self, scope_key: str) -> int:
        seq = self._seq.get(scope_key, 0) + 1
        self._seq[scope_key] = seq
        return seq


class InProcessBackend:
    """The writes and curation storage (`StoreBackend` under memory/stores/front.py) over one
    in-process store's rows."""

    def __init__(self, rows: InProcessRows) -> None:
        self._rows = rows

    async def write(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        rows = self._rows
        vectors = None
        if rows._embedder is not None:  # off the loop, before the lock
            vectors = await asyncio.to_thread(rows._embedder.embed, [candidate.text for candidate in batch])
        async with rows._lock:
            return rows._write(scope_key, batch, cap, vectors, pending=False)

    async def write_pending(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        async with self._rows._lock:
            return self._rows._write(scope_key, batch, cap, None, pending=True)

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        r = self._rows
        rows = r._unexpired_rows(scope_key, "pending")
        return rows[::-1][:limit]

    async def approve(self, scope_key: str, record_id: str, actor: str, cap: int) -> Approval | None:
        r = self._rows
        waiting = r._find(scope_key, record_id, "pending")
        if waiting is None:
            return None
        vector = await r._embed(waiting.text)
        async with r._lock:
            record = r._find(scope_key, record_id, "pending")
            if record is None:
                return None
            rows = r._scopes[scope_key]
            walk = ChainWalk(record)
            walk.add(rows)
            pool = write_pool(rows, approval_pool_candidate(record, walk))
            change = plan_approval(record, walk, pool, r._clock(), actor, cap)
            evicted = r._apply(scope_key, change.steps, None if vector is None else vector[None, :])
        return Approval(change.record, change.folded, change.superseded, evicted)

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        r = self._rows
        async with r._lock:
            record = r._find(scope_key, record_id, "pending")
            if record is None:
                return False
            r._erase_where(scope_key, lambda r: r.id == record_id, "rejected")
            r._append(entry(record, "rejected", actor, r._clock()))
        return True

    async def expire_pending(self, older_than: float, actor: str) -> int:
        r = self._rows
        total = 0
        async with r._lock:
            now = r._clock()
            for scope_key in builtins.list(r._scopes):
                doomed = [r for r in r._live_rows(scope_key, "pending") if r.created_at < older_than]
                total += r._erase_where(scope_key, _among({r.id for r in doomed}), "expired")
                for record in doomed:
                    r._append(entry(record, "expired", actor, now))
        if total:
            log.info("memory.pending_expired", expired=total)
        return total

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, typed_in: OriginLabel
    ) -> MemoryRecord | None:
        r = self._rows
        old = r._find(scope_key, record_id, "active", "pending")
        cutoff = r._retention.cutoff(scope_key, r._clock())
        if old is None or (cutoff is not None and old.created_at < cutoff):  # expired: none to edit
            return None
        candidate = edit_candidate(old, text, typed_in)
        vector = await r._embed(candidate.text) if old.status == "active" else None
        async with r._lock:
            old = r._find(scope_key, record_id, "active", "pending")
            if old is None:
                return None
            change = plan_edit(old, r._next_seq(scope_key), candidate, r._clock(), actor)
            r._apply(scope_key, change.steps, None if vector is None else vector[None, :])
        return change.record

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        r = self._rows
        rows = r._scopes.get(scope_key, [])
        start = next((r for r in rows if r.id == record_id), None)
        if start is None:
            return []
        walk = ChainWalk(start)
        walk.add(rows)
        versions = walk.versions()
        ids = {v.id for v in versions}
        entries = [e for e in r._entries() if e.scope_key == scope_key and e.record_id in ids]
        return history_of(versions, {v.id: r._erased.get(v.id) for v in versions}, entries)

    async def append_entry(self, entry: CurationEntry) -> None:
        self._rows._append(entry)

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        r = self._rows
        found = [e for e in r._entries() if e.scope_key == scope_key and names(e, record_id)]
        return newest_first(found, limit)

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        r = self._rows
        return r._unexpired_rows(scope_key, "active")

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        r = self._rows
        async with r._lock:
            rows = r._scopes.get(scope_key, [])
            survivor, duplicates = merge_duplicates(scope_key, survivor_id, duplicate_ids, rows)
            if survivor is None or not duplicates:
                return 0
            chains = [r._chain(scope_key, d) for d in duplicates]
            change = plan_merge(survivor, duplicates, chains, r._clock(), actor)
            r._apply(scope_key, change.steps, None)
        return change.merged


def _kept(step: Fold | Activate | Absorb) -> MemoryRecord:
    """The row as a step that rewrites one in place leaves it."""
    if isinstance(step, Fold):
        return step.folded
    return step.record if isinstance(step, Activate) else step.merged


def _among(record_ids: set[str]) -> Callable[[MemoryRecord], bool]:
    return lambda record: record.id in record_ids
