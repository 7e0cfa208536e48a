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
from memory.rules.curation import FORGETTABLE
from memory.rules.engine import (
    matches_filter,
)
from memory.rules.person import PersonRename
from memory.rules.retention import NO_RETENTION, Retention
from memory.stores.contract import EventClaims, ScopeMaintenance
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
        self._claimed: dict[str, float] = {}  # claim key → when it expires
        self._curation: builtins.list[CurationEntry] = []
        self._scopes: dict[str, builtins.list[MemoryRecord]] = {}
        self._seq: dict[str, int] = {}
        self._lock = asyncio.Lock()
        self._backend = InProcessStorage(self)

    def records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        """Every row of a scope, whatever its status (for tests and inspection)."""
        return builtins.list(self._scopes.get(scope_key, ()))

    def erased_reason(self, record_id: str) -> EraseReason | None:
        """Why a record was erased, or None (for tests and inspection)."""
        return self._erased.get(record_id)

    def claims(self) -> EventClaims | None:
        """None: a dict in one process shares nothing with another."""
        return None

    def maintenance(self) -> ScopeMaintenance | None:
        """None: nothing here outlives the process, so there is nothing to walk or reindex."""
        return None


class InProcessReads:
    """The reads and erasures (`ReadBackend`) over one in-process store's rows."""

    _rows: InProcessMemoryStore

    async def rank(
        self, scope_key: str, query: str, terms: Sequence[str], limit: int
    ) -> builtins.list[Ranked]:
        return self._ranked(scope_key, query, limit, await self._query_vector(query))

    async def rank_many(
        self, scope_keys: Sequence[str], query: str, terms: Sequence[str], limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        query_vector = await self._query_vector(query)  # once for every scope
        found = {key: self._ranked(key, query, limit, query_vector) for key in scope_keys}
        return {key: ranked for key, ranked in found.items() if ranked}

    async def _query_vector(self, query: str) -> Matrix | None:
        """Off the loop: a heavy embedder takes longer per query than the loop may be held."""
        r = self._rows
        if r._embedder is None or not r._ranking.stemmed:
            return None
        return await asyncio.to_thread(r._embedder.embed_query, query)

    def _ranked(
        self, scope_key: str, query: str, limit: int, query_vector: Matrix | None
    ) -> builtins.list[Ranked]:
        r, now = self._rows, self._rows._clock()
        rows = r._scopes.get(scope_key, [])
        fresh = _unexpired(r, scope_key, rows, now)  # expired: never returned, erased on the next write
        # The scope's statistics count every active record, expired ones too until erased: as the
        # durable stores' indexes count them (and as the centroid below does).
        stats = term_stats(rows, stats_stems(r._ranking, query, fresh)) if r._ranking.stemmed else None
        cosines = centered = None
        if query_vector is not None:
            cosines, centered = self._cosines(rows, query_vector)
        ranked = rank(fresh, query, limit, now, r._ranking, stats=stats, cosines=cosines, centered=centered)
        if not ranked:
            return []
        bumped = {
            item.record.id: replace(item.record, last_used_at=now, use_count=item.record.use_count + 1)
            for item in ranked
        }
        r._scopes[scope_key] = [bumped.get(row.id, row) for row in rows]
        return [Ranked(bumped[item.record.id], item.relevance) for item in ranked]

    def _cosines(
        self, rows: Sequence[MemoryRecord], query_vector: Matrix
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Plain and centered cosines by record id; the centroid is the scope's, over every active
        record with a vector (expired ones too, until erased: as the durable stores count them)."""
        vectors = self._rows._vectors
        held = [r.id for r in rows if r.status == "active" and r.id in vectors]
        if not held:
            return {}, {}
        matrix = np.stack([vectors[record_id] for record_id in held])
        plain, centered = ScopeVectors.of(0, range(len(held)), matrix).cosines(query_vector)
        return (
            {record_id: plain[n] for n, record_id in enumerate(held)},
            {record_id: centered[n] for n, record_id in enumerate(held)},
        )

    async def list_records(
        self, scope_key: str, limit: int, query: str | None, cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        rows = [r for r in reversed(self._rows._scopes.get(scope_key, [])) if r.status == "active"]
        if cutoff is not None:
            rows = [r for r in rows if r.created_at >= cutoff]
        if query is not None:
            rows = [r for r in rows if matches_filter(r, query)]
        return rows[:limit]

    async def fetch(
        self, scope_key: str, record_ids: Sequence[str], cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        wanted, erased = set(record_ids), self._rows._erased
        rows = [
            r
            for r in self._rows._scopes.get(scope_key, [])
            if r.id in wanted and r.id not in erased and r.status != "pending"
        ]
        return rows if cutoff is None else [r for r in rows if r.created_at >= cutoff]

    async def forget(self, scope_key: str, record_id: str) -> bool:
        """Every version of the record's chain is erased with it: an edit leaves no older text behind."""
        r = self._rows
        async with r._lock:
            record = r._find(scope_key, record_id, *FORGETTABLE)
            if record is None:
                return False
            chain = r._chain_ids(scope_key, record)
            return r._erase_where(scope_key, lambda row: row.id in chain, "forgotten") > 0

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        return self._rows._erase_where(scope_key, lambda r: True, reason)

    async def erase_expired(self) -> int:
        r, now = self._rows, self._rows._clock()
        total = 0
        for scope_key in builtins.list(r._scopes):
            cutoff = r._retention.cutoff(scope_key, now)
            if cutoff is not None:
                total += r._erase_where(scope_key, _created_before(cutoff), "expired")
        return total

    async def link_sources(self, link: SourceLink) -> None:
        self._rows._sources.update((m, link.run_id, key) for m in link.messages for key in link.scope_keys)

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        wanted = set(messages)
        runs: dict[str, set[str]] = {}
        for message, run_id, scope_key in self._rows._sources:
            if message in wanted:
                runs.setdefault(scope_key, set()).add(run_id)
        return sum(self._rows._erase_where(key, _from_runs(ids), reason) for key, ids in runs.items())

    async def pseudonymize(self, rename: PersonRename) -> int:
        r = self._rows
        async with r._lock:
            # Their own scope lives on under the pseudonym (a row written since its erasure erased first).
            r._erase_where(rename.person_key, lambda row: True, "user_request")
            moved = [rename.row(row) for row in r._scopes.pop(rename.person_key, [])]
            if moved:
                r._scopes[rename.pseudonym_key] = moved
                r._seq[rename.pseudonym_key] = r._seq.pop(rename.person_key, 0)
            r._erased = {rename.record(key): reason for key, reason in r._erased.items()}
            entries = [rename.entry(e) for e in r._curation]
            renamed = sum(1 for new, old in zip(entries, r._curation, strict=True) if new != old)
            audited = [rename.read(e) for e in r._audit]
            renamed += sum(1 for new, old in zip(audited, r._audit, strict=True) if new != old)
            r._curation, r._audit = entries, audited
            # The person's links name their scope, and only ever found records now erased.
            r._sources = {s for s in r._sources if s[2] != rename.person_key}
        return renamed

    async def record_read(self, entry: ReadAudit, cutoff: float) -> None:
        r = self._rows
        r._audit = [e for e in r._audit if e.at >= cutoff]
        r._audit.append(entry)

    async def read_audit(self, query: AuditQuery, cutoff: float) -> builtins.list[ReadAudit]:
        found = [e for e in self._rows._audit if e.at >= cutoff and audit_matches(e, query)]
        found.sort(key=lambda e: -e.at)  # stable: equal times keep newest-appended first after reverse
        return found[: query.limit]

    async def claim(self, key: str, ttl_seconds: float) -> bool:
        """Within this process only (the store answers `claims()` with None: nothing is shared)."""
        r, now = self._rows, self._rows._clock()
        if r._claimed.get(key, now) > now:
            return False
        r._claimed[key] = now + ttl_seconds
        return True

    async def scope_keys(self) -> builtins.list[str]:
        r = self._rows
        return [key for key, rows in r._scopes.items() if any(row.id not in r._erased for row in rows)]

    async def unreadable_scopes(self) -> builtins.list[str]:
        return []

    async def reindex_batch(self, scope_key: str, embedder: Embedder, batch: int) -> tuple[int, int]:
        """Nothing to do: every active record got its vector when it was written."""
        return 0, 0

    async def foreign_vectors(self, model: str) -> int:
        """None: one embedder made every vector this process holds."""
        return 0


class InProcessStorage(InProcessReads, InProcessBackend):
    """Everything the front runs on (`StoreBackend`) over one in-process store's rows."""

    _rows: InProcessMemoryStore


def _unexpired(
    rows: InProcessMemoryStore, scope_key: str, records: Sequence[MemoryRecord], now: float
) -> builtins.list[MemoryRecord]:
    cutoff = rows._retention.cutoff(scope_key, now)
    return builtins.list(records) if cutoff is None else [r for r in records if r.created_at >= cutoff]


def _created_before(cutoff: float) -> Callable[[MemoryRecord], bool]:
    return lambda record: record.created_at < cutoff


def _from_runs(run_ids: set[str]) -> Callable[[MemoryRecord], bool]:
    return lambda record: record.source_run_id in run_ids
