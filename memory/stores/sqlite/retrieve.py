"""A scope's retrieve, on a worker thread: ranked holding the scope's lock, embedded outside it.

The stemmed rankings read the scope index (memory/stores/sqlite/index.py); the seed's `spec`
ranking reads the FTS5 bm25 prefilter and scores with the spec scorer. Either way the read takes no
write lock: its usage bumps are held back and written in batches (memory/stores/usage_bumps.py),
and laid over what later reads see until then.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import structlog

from memory.ranking.embedder import Embedder, Matrix
from memory.ranking.fusion import Ranked, Ranking, rank, time_window
from memory.ranking.lexical import query_stems
from memory.rules.engine import (
    candidate_cap,
)
from memory.rules.retention import Retention
from memory.stores.sql_common import bumped
from memory.stores.sqlite.connections import ScopeConnections
from memory.stores.sqlite.index import OpenScopes
from memory.stores.sqlite.sql import R_COLUMNS, fts_match_terms, snapshot, unexpired
from memory.stores.sqlite.writes import store_vectors

log = structlog.get_logger("memory")


@dataclass(frozen=True, slots=True)
class ScopeRead:
    """One scope's retrieve: what it asks and how far back it may see (`cutoff`, the retention's)."""

    scope_key: str
    query: str
    terms: Sequence[str]
    limit: int
    cutoff: float | None
    query_vector: Matrix | None = None


@dataclass(frozen=True, slots=True)
class Unvectored:
    """A read that met candidates without a vector of this embedder: their seqs and texts."""

    seqs: tuple[int, ...]
    texts: tuple[str, ...]


class Retriever:
    """Ranks scopes' records for a query and holds back their usage bumps."""

    def __init__(
        self,
        scopes: OpenScopes,
        connections: ScopeConnections,
        ranking: Ranking,
        embedder: Embedder | None,
        clock: Callable[[], float],
        retention: Retention,
    ) -> None:
        self._scopes = scopes
        self._connections = connections
        self._retention = retention
        self._ranking = ranking
        self._embedder = embedder
        self._clock = clock

    def read(
        self,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        limit: int,
        query_vector: Matrix | None,
        cutoff: float | None,
    ) -> builtins.list[Ranked]:
        """One scope's retrieve, on a worker thread: ranked under the scope's lock, embedded outside it
        (the query, and the vectors its candidates lack), so no write to the scope waits for a model."""
        embedder = self._embedder
        if embedder is not None and self._ranking.stemmed and query_vector is None:
            query_vector = embedder.embed_query(query)
        asked = ScopeRead(scope_key, query, terms, limit, cutoff, query_vector)
        nothing = cast("builtins.list[Ranked] | Unvectored", [])  # no database: nothing to rank
        found = self._connections.run(scope_key, lambda c: self._ranked(c, asked), nothing, False, False)
        if isinstance(found, Unvectored) and embedder is not None:
            fresh = builtins.list(zip(found.seqs, embedder.embed(builtins.list(found.texts)), strict=True))
            found = self._connections.run(
                scope_key, lambda c: self._ranked(c, asked, fresh), nothing, False, False
            )
        return [] if isinstance(found, Unvectored) else found  # a call with `fresh` never answers Unvectored

    def read_each(
        self, keys: Sequence[str], query: str, terms: Sequence[str], limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """Several scopes, each under its own lock in turn and ranked as its own retrieve ranks it; the
        query embedded once. One scope's database failing costs that scope only."""
        found: dict[str, builtins.list[Ranked]] = {}
        embed = self._embedder is not None and self._ranking.stemmed
        query_vector = self._embedder.embed_query(query) if embed and self._embedder is not None else None
        for key in keys:
            cutoff = self._retention.cutoff(key, self._clock())
            try:
                ranked = self.read(key, query, terms, limit, query_vector, cutoff)
            except sqlite3.Error as error:
                log.warning("memory.retrieve_failed", scope_key=key, error=type(error).__name__)
                continue
            if ranked:
                found[key] = ranked
        return found

    def _ranked(
        self,
        connection: sqlite3.Connection,
        asked: ScopeRead,
        fresh: Sequence[tuple[int, Matrix]] | None = None,
    ) -> builtins.list[Ranked] | Unvectored:
        """The scope's best records for the query, their bumps held back; the caller holds the lock.

        Candidates without a vector (rows older than the embedder) get one made on use, but not under
        the lock: the first call answers `Unvectored` (the prefilter's worth of the best candidates
        that lack one), the caller embeds them with the lock released and calls again with them as
        `fresh`. That call stores them (never into a row erased meanwhile), catches the index up and
        ranks — as `rank` would score them once they all have vectors — and never answers `Unvectored`.
        """
        if not self._ranking.stemmed:
            return self._retrieve_spec(connection, asked)
        embedder, query_vector = self._embedder, asked.query_vector
        if embedder is not None and query_vector is None:
            query_vector = embedder.embed_query(asked.query)
        scope_key, limit, cutoff = asked.scope_key, asked.limit, asked.cutoff
        if fresh and embedder is not None:
            store_vectors(connection, fresh, embedder.name)
        index = self._scopes.synced_index(connection, scope_key)
        stems = query_stems(asked.query)
        wanted = frozenset(asked.terms)
        now = self._clock()
        window = time_window(asked.query, now)
        chosen = index.select(stems, wanted, query_vector, now, self._ranking, limit, cutoff, window)
        if fresh is None and embedder is not None and any(c.cosine is None for c in chosen):
            wide = index.select(
                stems, wanted, query_vector, now, self._ranking, candidate_cap(limit), cutoff, window
            )
            unvectored = [c for c in wide if c.cosine is None]
            return Unvectored(tuple(c.seq for c in unvectored), tuple(c.record.text for c in unvectored))
        results = self._used(connection, scope_key, [Ranked(c.record, c.relevance) for c in chosen], now)
        for c, item in zip(chosen, results, strict=True):  # what the database holds once bumps are written
            index.set_record(c.seq, item.record)
        return results

    def _retrieve_spec(self, connection: sqlite3.Connection, asked: ScopeRead) -> builtins.list[Ranked]:
        """The seed's read (`memory.ranking = "spec"`): the FTS5 bm25 prefilter, then the spec scorer."""
        scope_key, limit = asked.scope_key, asked.limit
        match = fts_match_terms(asked.terms)
        if match is None:
            return []
        with snapshot(connection):  # a read: no write lock, the usage bump is written later
            rows = connection.execute(
                f"SELECT r.seq, {R_COLUMNS} FROM ("
                "  SELECT rowid, bm25(records_fts) AS score FROM records_fts"
                "  WHERE records_fts MATCH ? ORDER BY score LIMIT ?"
                ") AS f JOIN records AS r ON r.seq = f.rowid WHERE r.status = 'active'",
                (match, candidate_cap(limit)),
            ).fetchall()
            decode = self._scopes.decoder(connection, scope_key)  # as of the rows' change generation
        # bm25 only chose who reaches the engine; seq order makes ties rank as in every store.
        rows.sort(key=lambda row: int(row[0]))
        now = self._clock()
        records = [decode(tuple(row[1:])) for row in rows]
        records = self._scopes.overlay(scope_key, records)  # what an immediate bump would have left
        records = unexpired(records, asked.cutoff)  # expired: never returned, erased on the next write
        return self._used(connection, scope_key, rank(records, asked.query, limit, now, self._ranking), now)

    def _used(
        self, connection: sqlite3.Connection, scope_key: str, ranked: Sequence[Ranked], now: float
    ) -> builtins.list[Ranked]:
        """A read's results as their usage bumps leave them; the bumps themselves are held back and
        written in batches (memory/stores/usage_bumps.py). The caller holds the scope lock."""
        if not ranked:
            return []
        if self._scopes.bump_later(scope_key, [item.record for item in ranked], now):
            self._scopes.write_bumps(connection, scope_key)
        return bumped(ranked, now)
