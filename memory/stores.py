"""The in-process stores: the disabled default and a dict of scopes for tests and development."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from memory.embedder import Embedder, Matrix
from memory.engine import (
    WritePlan,
    matches_filter,
    mint_record,
    normalize_text,
    plan_eviction,
    plan_write,
    prepare_batch,
)
from memory.lexical import query_stems, term_stats
from memory.ranking import DEFAULT_RANKING, Ranked, Ranking, rank
from memory.types import MemoryCandidate, MemoryRecord, WriteResult

Clock = Callable[[], float]


class NullMemoryStore:
    """Memory switched off: remembers nothing, finds nothing."""

    async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
        return []

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, list[Ranked]]:
        return {}

    async def write(self, scope_key: str, candidates: Sequence[MemoryCandidate]) -> WriteResult:
        return WriteResult()

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> list[MemoryRecord]:
        return []

    async def forget(self, scope_key: str, record_id: str) -> bool:
        return False

    async def aclose(self) -> None:
        return None


class InMemoryMemoryStore:
    """Records per scope in a dict; the engine decides everything. Restarts lose it all."""

    def __init__(
        self,
        cap: int | None = None,
        clock: Clock = time.time,
        *,
        ranking: Ranking = DEFAULT_RANKING,
        embedder: Embedder | None = None,
    ) -> None:
        self._cap = cap
        self._clock = clock
        self._ranking = ranking
        self._embedder = embedder
        self._vectors: dict[str, Matrix] = {}  # record id → its unit vector
        self._scopes: dict[str, builtins.list[MemoryRecord]] = {}
        self._seq: dict[str, int] = {}
        self._lock = asyncio.Lock()

    def records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        """Every row of a scope, whatever its status (for tests and inspection)."""
        return builtins.list(self._scopes.get(scope_key, ()))

    async def retrieve(self, scope_key: str, query: str, limit: int) -> builtins.list[MemoryRecord]:
        query_vector = await self._query_vector(query)
        return [item.record for item in self._retrieve(scope_key, query, limit, query_vector)]

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        query_vector = await self._query_vector(query)  # once for every scope
        found = {key: self._retrieve(key, query, limit, query_vector) for key in dict.fromkeys(scope_keys)}
        return {key: ranked for key, ranked in found.items() if ranked}

    async def _query_vector(self, query: str) -> Matrix | None:
        """Off the loop: a heavy embedder takes ~20 ms a query."""
        if self._embedder is None or not self._ranking.stemmed:
            return None
        return await asyncio.to_thread(self._embedder.embed_query, query)

    def _retrieve(
        self, scope_key: str, query: str, limit: int, query_vector: Matrix | None
    ) -> builtins.list[Ranked]:
        now = self._clock()
        rows = self._scopes.get(scope_key, [])
        stats = term_stats(rows, query_stems(query)) if self._ranking.stemmed else None
        cosines = None
        if query_vector is not None:
            vectors = {
                r.id: self._vectors[r.id] for r in rows if r.status == "active" and r.id in self._vectors
            }
            cosines = {record_id: float(vector @ query_vector) for record_id, vector in vectors.items()}
        ranked = rank(rows, query, limit, now, self._ranking, stats=stats, cosines=cosines)
        if not ranked:
            return []
        bumped = {
            r.record.id: replace(r.record, last_used_at=now, use_count=r.record.use_count + 1) for r in ranked
        }
        self._scopes[scope_key] = [bumped.get(r.id, r) for r in rows]
        return [Ranked(bumped[r.record.id], r.relevance) for r in ranked]

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        """`cap` overrides the store's cap for this batch (the memory service's per-request cap)."""
        candidates = prepare_batch(candidates)
        if not candidates:
            return WriteResult()
        cap = self._cap if cap is None else cap
        vectors: dict[str, Matrix] = {}
        if self._embedder is not None:
            texts = [candidate.text for candidate in candidates]
            vectors = dict(zip(texts, await asyncio.to_thread(self._embedder.embed, texts), strict=True))
        async with self._lock:
            now = self._clock()
            rows = builtins.list(self._scopes.get(scope_key, []))
            inserted = deduped = superseded = 0
            for candidate in candidates:
                plan = plan_write(scope_key, candidate, _pool(rows, candidate))
                rows, changed = _apply(
                    rows, plan, scope_key, candidate, now, lambda: self._next_seq(scope_key)
                )
                if plan.action == "dedup":
                    deduped += 1
                else:
                    inserted += 1
                    superseded += changed
            evicted = 0
            if cap is not None:
                doomed = set(plan_eviction(rows, cap))
                rows = [replace(r, status="evicted") if r.id in doomed else r for r in rows]
                evicted = len(doomed)
            self._scopes[scope_key] = rows
            for row in rows:
                if row.status == "active" and row.id not in self._vectors and row.text in vectors:
                    self._vectors[row.id] = vectors[row.text]
            return WriteResult(inserted=inserted, deduped=deduped, superseded=superseded, evicted=evicted)

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> builtins.list[MemoryRecord]:
        rows = [r for r in reversed(self._scopes.get(scope_key, [])) if r.status == "active"]
        if query is not None:
            rows = [r for r in rows if matches_filter(r, query)]
        return rows[: max(0, limit)]

    async def forget(self, scope_key: str, record_id: str) -> bool:
        rows = self._scopes.get(scope_key, [])
        for index, row in enumerate(rows):
            if row.id == record_id and row.status == "active":
                rows[index] = replace(row, status="forgotten")
                return True
        return False

    async def aclose(self) -> None:
        return None

    def _next_seq(self, scope_key: str) -> int:
        seq = self._seq.get(scope_key, 0) + 1
        self._seq[scope_key] = seq
        return seq


def _pool(rows: Sequence[MemoryRecord], candidate: MemoryCandidate) -> builtins.list[MemoryRecord]:
    """Exactly the rows plan_write reads: same-norm actives (seq order) and the supersede target."""
    norm = normalize_text(candidate.text)
    return [
        r
        for r in rows
        if r.status == "active" and (r.id == candidate.supersedes or normalize_text(r.text) == norm)
    ]


def _apply(
    rows: builtins.list[MemoryRecord],
    plan: WritePlan,
    scope_key: str,
    candidate: MemoryCandidate,
    now: float,
    next_seq: Callable[[], int],
) -> tuple[builtins.list[MemoryRecord], int]:
    if plan.action == "dedup":
        return [replace(r, use_count=r.use_count + 1) if r.id == plan.dedup_id else r for r in rows], 0
    superseded = 0
    if plan.supersede_id is not None:
        rows = [replace(r, status="superseded") if r.id == plan.supersede_id else r for r in rows]
        superseded = 1
    rows.append(mint_record(scope_key, next_seq(), candidate, now, supersedes=plan.supersede_id))
    return rows, superseded
