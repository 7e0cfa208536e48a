"""The in-process store: a dict of scopes, for tests and development; restarts lose it all."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from memory.ranking.embedder import Embedder, Matrix
from memory.ranking.fusion import DEFAULT_RANKING, Ranked, Ranking, rank, stats_stems
from memory.ranking.lexical import term_stats
from memory.ranking.vectors import ScopeVectors
from memory.rules.audit import audit_matches
from memory.rules.engine import (
    matches_filter,
)
from memory.rules.person import PersonRename
from memory.rules.retention import NO_RETENTION, Retention
from memory.stores.contract import CompactingStore, CuratedStore, EventClaims, ScopeMaintenance
from memory.stores.front import StoreFront
from memory.stores.in_process.curating import InProcessBackend, InProcessRows
from memory.types import (
    AuditQuery,
    CurationEntry,
    EraseReason,
    MemoryRecord,
    ReadAudit,
    SourceLink,
)

Clock = Callable[[], float]


class InProcessMemoryStore(InProcessRows, StoreFront):
    """Records per scope in a dict; the engine decides everything. Restarts lose it all."""

    def __init__(
        self,
        cap: int | None = None,
        clock: Clock = time.time,
        *,
        ranking: Ranking = DEFAULT_RANKING,
        embedder: Embedder | None = None,
        retention: Retention = NO_RETENTION,
    ) -> None:
        self._cap = cap
        self._clock = clock
        self._ranking = ranking
        self._embedder = embedder
        self._vectors: dict[str, Matrix] = {}  # record id → its unit vector
        self._retention = retention
        self._erased: dict[str, EraseReason] = {}  # record id → why its text was erased
        self._sources: set[tuple[str, str, str]] = set()  # (message, run id, scope key)
        self._audit: builtins.list[ReadAudit] = []
        self._curation: builtins.list[CurationEntry] = []
        self._scopes: dict[str, builtins.list[MemoryRecord]] = {}
        self._seq: dict[str, int] = {}
        self._lock = asyncio.Lock()
        self._backend = InProcessBackend(self)

    def records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        """Every row of a scope, whatever its status (for tests and inspection)."""
        return builtins.list(self._scopes.get(scope_key, ()))

    def erased_reason(self, record_id: str) -> EraseReason | None:
        """Why a record was erased, or None (for tests and inspection)."""
        return self._erased.get(record_id)

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
        """Off the loop: a heavy embedder takes longer per query than the loop may be held."""
        if self._embedder is None or not self._ranking.stemmed:
            return None
        return await asyncio.to_thread(self._embedder.embed_query, query)

    def _retrieve(
        self, scope_key: str, query: str, limit: int, query_vector: Matrix | None
    ) -> builtins.list[Ranked]:
        now = self._clock()
        rows = self._scopes.get(scope_key, [])
        fresh = self._unexpired(scope_key, rows, now)  # expired: never returned, erased on the next write
        stats = term_stats(fresh, stats_stems(self._ranking, query, fresh)) if self._ranking.stemmed else None
        cosines = centered = None
        if query_vector is not None:
            cosines, centered = self._cosines(rows, query_vector)
        ranked = rank(
            fresh, query, limit, now, self._ranking, stats=stats, cosines=cosines, centered=centered
        )
        if not ranked:
            return []
        bumped = {
            r.record.id: replace(r.record, last_used_at=now, use_count=r.record.use_count + 1) for r in ranked
        }
        self._scopes[scope_key] = [bumped.get(r.id, r) for r in rows]
        return [Ranked(bumped[r.record.id], r.relevance) for r in ranked]

    def _cosines(
        self, rows: Sequence[MemoryRecord], query_vector: Matrix
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Plain and centered cosines by record id; the centroid is the scope's, over every active
        record with a vector (expired ones too, until erased: as the durable stores count them)."""
        held = [r.id for r in rows if r.status == "active" and r.id in self._vectors]
        if not held:
            return {}, {}
        matrix = np.stack([self._vectors[record_id] for record_id in held])
        plain, centered = ScopeVectors.of(0, range(len(held)), matrix).cosines(query_vector)
        return (
            {record_id: plain[n] for n, record_id in enumerate(held)},
            {record_id: centered[n] for n, record_id in enumerate(held)},
        )

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> builtins.list[MemoryRecord]:
        rows = [r for r in reversed(self._scopes.get(scope_key, [])) if r.status == "active"]
        rows = self._unexpired(scope_key, rows, self._clock())
        if query is not None:
            rows = [r for r in rows if matches_filter(r, query)]
        return rows[: max(0, limit)]

    async def forget(self, scope_key: str, record_id: str) -> bool:
        """Every version of the record's chain is erased with it: an edit leaves no older text behind."""
        async with self._lock:
            record = self._find(scope_key, record_id, "active")
            if record is None:
                return False
            chain = self._chain_ids(scope_key, record)
            return self._erase_where(scope_key, lambda r: r.id in chain, "forgotten") > 0

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        return self._erase_where(scope_key, lambda r: True, reason)

    async def pseudonymize_person(self, person_key: str, pseudonym: str) -> int:
        rename = PersonRename(person_key, pseudonym)
        async with self._lock:
            renamed = 0
            entries = [rename.entry(e) for e in self._curation]
            renamed += sum(1 for new, old in zip(entries, self._curation, strict=True) if new != old)
            reads = [rename.read(e) for e in self._audit]
            renamed += sum(1 for new, old in zip(reads, self._audit, strict=True) if new != old)
            self._curation, self._audit = entries, reads
            # The person's links name their scope, and only ever found records now erased.
            self._sources = {s for s in self._sources if s[2] != person_key}
        return renamed

    async def erase_expired(self) -> int:
        now = self._clock()
        total = 0
        for scope_key in builtins.list(self._scopes):
            cutoff = self._retention.cutoff(scope_key, now)
            if cutoff is not None:
                total += self._erase_where(scope_key, _created_before(cutoff), "expired")
        return total

    def claims(self) -> EventClaims | None:
        """None: a dict in one process shares nothing with another."""
        return None

    async def link_sources(self, link: SourceLink) -> None:
        self._sources.update((m, link.run_id, key) for m in link.messages for key in link.scope_keys)

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        wanted = set(messages)
        runs: dict[str, set[str]] = {}
        for message, run_id, scope_key in self._sources:
            if message in wanted:
                runs.setdefault(scope_key, set()).add(run_id)
        return sum(self._erase_where(key, _from_runs(ids), reason) for key, ids in runs.items())

    async def fetch(self, scope_key: str, record_ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        wanted = set(record_ids)
        return [
            r
            for r in self._scopes.get(scope_key, [])
            if r.id in wanted and r.id not in self._erased and r.status != "pending"
        ]

    async def record_read(self, entry: ReadAudit) -> None:
        cutoff = self._retention.audit_cutoff(self._clock())
        self._audit = [e for e in self._audit if e.at >= cutoff]
        self._audit.append(entry)

    async def read_audit(self, query: AuditQuery) -> builtins.list[ReadAudit]:
        cutoff = self._retention.audit_cutoff(self._clock())
        found = [e for e in self._audit if e.at >= cutoff and audit_matches(e, query)]
        found.sort(key=lambda e: -e.at)  # stable: equal times keep newest-appended first after reverse
        return found[: query.limit]

    def _unexpired(
        self, scope_key: str, rows: Sequence[MemoryRecord], now: float
    ) -> builtins.list[MemoryRecord]:
        cutoff = self._retention.cutoff(scope_key, now)
        return builtins.list(rows) if cutoff is None else [r for r in rows if r.created_at >= cutoff]

    async def open(self) -> None:
        return None

    def curation(self) -> CuratedStore | None:
        return self

    def compaction(self) -> CompactingStore | None:
        """None: nothing is written to a file."""
        return None

    async def aclose(self) -> None:
        return None

    def maintenance(self) -> ScopeMaintenance | None:
        """None: nothing here outlives the process, so there is nothing to walk or reindex."""
        return None


def _created_before(cutoff: float) -> Callable[[MemoryRecord], bool]:
    return lambda record: record.created_at < cutoff


def _from_runs(run_ids: set[str]) -> Callable[[MemoryRecord], bool]:
    return lambda record: record.source_run_id in run_ids
