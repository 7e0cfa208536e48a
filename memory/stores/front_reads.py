"""The store front's reading and erasing half: `MemoryStore`'s reads, erasures, run ledger, read audit,
claims and scope maintenance written once over a backend (`ReadBackend` in memory/stores/contract.py).

Here, for every backend: the scope keys checked, the limits clamped to MAX_LIMIT, a query without
prefilter terms or a limit of 0 answered without a hop, ids and messages deduplicated, the retention's
cutoffs computed, and one structlog event per erasure (`memory.store.forget`, `.erased`, `.expired`,
`.sources_erased`, `.pseudonymized`: ids and counts, `store=` from `_log_fields`). The backend reads
and erases rows, and turns its driver's failure into a `MemoryStoreError`.

Where the backend is itself a store behind its own front (the memory service's HTTP client,
`_rules_here` False), the rules that depend on that store's settings run there, not here: this
process knows neither its ranking nor its retention. The front then gates no query on prefilter terms,
computes no cutoff and always asks for the start-up sweep, so no rule runs twice in two ways.

Failure policy: a retrieve is advisory only when the storage is out of reach (`MemoryUnavailable`: a
server down or lost): the reply then goes on without memory, with one `memory.retrieve_failed`
warning. Any other failure (a closed store, a database file holding another scope) is a fault, raised
like every other operation's, so it is seen and fixed rather than read as "nothing remembered".
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

import structlog

from memory.ranking.embedder import Embedder
from memory.ranking.fusion import Ranked, Ranking, prefilter_terms
from memory.ranking.lexical import forget_cached_texts
from memory.ranking.vectors import REINDEX_BATCH, Progress
from memory.rules.arguments import distinct_scopes, fetch_ids, linkable
from memory.rules.claims import validate_claim
from memory.rules.curation import log_limit
from memory.rules.engine import parse_record_id
from memory.rules.person import PersonRename, logged_scope
from memory.rules.retention import Retention
from memory.rules.scope import validate_scope_key
from memory.stores.contract import ReadBackend
from memory.types import AuditQuery, EraseReason, MemoryRecord, MemoryUnavailable, ReadAudit, SourceLink

log = structlog.get_logger("memory")

Clock = Callable[[], float]


class ReadFront:
    """Mixed into a store through `StoreFront`: `_backend` the storage, `_ranking`, `_embedder`,
    `_retention` and `_clock` the store's, `_log_fields` what every event adds (e.g. which store)."""

    _backend: ReadBackend
    _ranking: Ranking
    _embedder: Embedder | None
    _retention: Retention
    _clock: Clock
    _log_fields: ClassVar[Mapping[str, str]] = {}
    # False for a backend that applies its own store's ranking and retention (the memory service's
    # client): `_ranking` and `_retention` are then never read (see the module's docstring).
    _rules_here: ClassVar[bool] = True

    async def retrieve(self, scope_key: str, query: str, limit: int) -> builtins.list[MemoryRecord]:
        """At most MAX_LIMIT records, like the memory service; `[]` when the storage is out of reach."""
        validate_scope_key(scope_key)
        limit, terms = log_limit(limit), self._terms(query)
        if not limit or terms is None:
            return []
        try:
            ranked = await self._backend.rank(scope_key, query, terms, limit)
        except MemoryUnavailable as error:
            self._read_failed(error, scope_key=scope_key)
            return []
        return [item.record for item in ranked]

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """Each scope once, ranked as its own retrieve ranks it, in one hop; `{}` when the storage is
        out of reach."""
        keys = distinct_scopes(scope_keys)
        limit, terms = log_limit(limit), self._terms(query)
        if not limit or terms is None or not keys:
            return {}
        try:
            return await self._backend.rank_many(keys, query, terms, limit)
        except MemoryUnavailable as error:
            self._read_failed(error, scope_keys=keys)
            return {}

    def _terms(self, query: str) -> builtins.list[str] | None:
        """The query's prefilter terms by the store's ranking; None when it has none (nothing can
        match: no hop). Where the ranking is the backend's own, none are computed here."""
        if not self._rules_here:
            return []
        return prefilter_terms(self._ranking, query) or None

    def _cutoff(self, scope_key: str) -> float | None:
        """Records of the scope created before this are expired (None: none, or the backend's rule)."""
        return self._retention.cutoff(scope_key, self._clock()) if self._rules_here else None

    def _audit_cutoff(self) -> float:
        """Audit rows older than this are past retention (-inf: the backend keeps its own)."""
        return self._retention.audit_cutoff(self._clock()) if self._rules_here else -math.inf

    def _read_failed(self, error: MemoryUnavailable, **scopes: object) -> None:
        cause = error.__cause__ or error
        log.warning(
            "memory.retrieve_failed",
            **self._log_fields,
            **scopes,
            error=type(cause).__name__,
            message=f"memory unavailable, continuing without memory: {error}",
        )

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> builtins.list[MemoryRecord]:
        """Newest first, at most MAX_LIMIT, within the scope's retention; never bumps usage."""
        validate_scope_key(scope_key)
        limit = log_limit(limit)
        if not limit:
            return []
        return await self._backend.list_records(scope_key, limit, query, self._cutoff(scope_key))

    async def fetch(self, scope_key: str, record_ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        ids = fetch_ids(record_ids)
        if not ids:
            return []
        # Retention's "never returned by a read" holds by id too (*Why?*, the editor, the review).
        return await self._backend.fetch(scope_key, ids, self._cutoff(scope_key))

    async def forget(self, scope_key: str, record_id: str) -> bool:
        """A foreign or malformed id forgets nothing: no row of this scope can hold it."""
        validate_scope_key(scope_key)
        forgotten = own_id(scope_key, record_id) and await self._backend.forget(scope_key, record_id)
        if forgotten:
            forget_cached_texts()
        log.info(
            "memory.store.forget", **self._log_fields, scope_key=scope_key, id=record_id, forgotten=forgotten
        )
        return forgotten

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        validate_scope_key(scope_key)
        erased = await self._backend.erase_scope(scope_key, reason)
        if erased:
            forget_cached_texts()
        named = logged_scope(scope_key, reason)
        log.info("memory.store.erased", **self._log_fields, **named, reason=reason, erased=erased)
        return erased

    async def erase_expired(self) -> int:
        """Start-up's sweep (no sweeper runs later: a write erases its scope's expired records)."""
        if self._rules_here and not self._retention.expires:
            return 0
        erased = await self._backend.erase_expired()
        if erased:
            forget_cached_texts()
            log.info("memory.store.expired", **self._log_fields, erased=erased)
        return erased

    async def link_sources(self, link: SourceLink) -> None:
        if linkable(link):
            await self._backend.link_sources(link)

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        wanted = builtins.list(dict.fromkeys(messages))
        if not wanted:
            return 0
        erased = await self._backend.erase_sources(wanted, reason)
        if erased:
            forget_cached_texts()
        log.info(
            "memory.store.sources_erased",
            **self._log_fields,
            messages=len(wanted),
            reason=reason,
            erased=erased,
        )
        return erased

    async def pseudonymize_person(self, person_key: str, pseudonym: str) -> int:
        renamed = await self._backend.pseudonymize(PersonRename(person_key, pseudonym))
        forget_cached_texts()  # a row the person's scope took since its erasure is erased by the move
        log.info("memory.store.pseudonymized", **self._log_fields, renamed=renamed)
        return renamed

    async def record_read(self, entry: ReadAudit) -> None:
        await self._backend.record_read(entry, self._audit_cutoff())

    async def read_audit(self, query: AuditQuery) -> builtins.list[ReadAudit]:
        return await self._backend.read_audit(query, self._audit_cutoff())

    async def claim_event(self, key: str, ttl_seconds: float) -> bool:
        """Once per key across every process sharing the store (memory/rules/claims.py)."""
        key, ttl = validate_claim(key, ttl_seconds)
        return await self._backend.claim(key, ttl)

    async def scope_keys(self) -> builtins.list[str]:
        """Every scope the store holds records for (`switchboard memory reindex`, the DM migration)."""
        return await self._backend.scope_keys()

    async def unreadable_scopes(self) -> builtins.list[str]:
        """What holds a scope the store cannot read, which `scope_keys` leaves out (file names)."""
        return await self._backend.unreadable_scopes()

    async def reindex(
        self, scope_key: str, *, batch: int = REINDEX_BATCH, progress: Progress | None = None
    ) -> int:
        """Vectors for the scope's active records that have none of this embedder's, a batch per
        transaction: safe to interrupt and to run again (it resumes where it stopped). How many."""
        validate_scope_key(scope_key)
        embedder = self._embedder
        if embedder is None:
            return 0
        done = 0
        while True:
            made, left = await self._backend.reindex_batch(scope_key, embedder, batch)
            done += made
            if progress is not None:
                progress(scope_key, done, done + left)
            if made == 0 or left == 0:
                return done

    async def foreign_vectors(self) -> int:
        """Active records whose vector another embedder made, every scope (said once at start-up)."""
        return 0 if self._embedder is None else await self._backend.foreign_vectors(self._embedder.name)


def own_id(scope_key: str, record_id: object) -> bool:
    """Only an id of this scope can name one of its records (any other is answered as not found)."""
    parsed = parse_record_id(record_id) if isinstance(record_id, str) else None
    return parsed is not None and parsed[0] == scope_key
