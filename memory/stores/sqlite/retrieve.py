"""A scope's retrieve, on a worker thread holding the scope's lock.

The stemmed rankings read the scope index (memory/stores/sqlite/index_sync.py); the seed's `spec`
ranking reads the FTS5 bm25 prefilter and scores with the spec scorer. Either way the read takes no
write lock: its usage bumps are held back and written in batches (memory/stores/sqlite/usage_bumps.py),
and laid over what later reads see until then.
"""

from __future__ import annotations

import builtins
import functools
import sqlite3
from collections.abc import Callable, Sequence

from memory.ranking.embedder import Embedder, Matrix
from memory.ranking.fusion import Ranked, Ranking, rank
from memory.ranking.lexical import query_stems
from memory.rules.engine import (
    candidate_cap,
)
from memory.rules.retention import Retention
from memory.stores.sql_common import bumped
from memory.stores.sqlite.index_sync import OpenScopes
from memory.stores.sqlite.sql import R_COLUMNS, fts_match_terms, row_record, snapshot, unexpired
from memory.stores.sqlite.writes import store_vectors

DECODED_ROWS = 4096  # rows kept decoded for the spec ranking's retrieves (the others read the scope index)


class Retriever:
    """Ranks a scope's records for a query and holds back their usage bumps."""

    def __init__(
        self,
        scopes: OpenScopes,
        ranking: Ranking,
        embedder: Embedder | None,
        clock: Callable[[], float],
        retention: Retention,
    ) -> None:
        self._scopes = scopes
        self._retention = retention
        self._ranking = ranking
        self._embedder = embedder
        self._clock = clock
        # A retrieve reads the same candidate rows again and again: an unchanged row (every column
        # equal, so a bump or a forget is a different key) decodes to the same record.
        self._decode = functools.lru_cache(maxsize=DECODED_ROWS)(row_record)

    def retrieve_now(
        self,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        limit: int,
        query_vector: Matrix | None,
        connection: sqlite3.Connection,
    ) -> builtins.list[Ranked]:
        """`retrieve` with the scope's retention cutoff as of now (a multi-scope read, scope by scope)."""
        cutoff = self._retention.cutoff(scope_key, self._clock())
        return self.retrieve(connection, scope_key, query, terms, limit, query_vector, cutoff)

    def retrieve(
        self,
        connection: sqlite3.Connection,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        limit: int,
        query_vector: Matrix | None = None,
        cutoff: float | None = None,
    ) -> builtins.list[Ranked]:
        if not self._ranking.stemmed:
            return self._retrieve_spec(connection, scope_key, query, terms, limit, cutoff)
        index = self._scopes.synced_index(connection, scope_key)
        embedder = self._embedder
        if embedder is not None and query_vector is None:
            query_vector = embedder.embed_query(query)
        stems = query_stems(query)
        wanted = frozenset(terms)
        now = self._clock()
        chosen = index.select(stems, wanted, query_vector, now, self._ranking, limit, cutoff)
        if embedder is not None and any(c.cosine is None for c in chosen):
            # Vectors made on use (rows older than the embedder): for the prefilter's worth of the best
            # candidates, stored (never into a row erased meanwhile), then the scope caught up and
            # scored again — as `rank` would score them once they all have vectors.
            wide = index.select(stems, wanted, query_vector, now, self._ranking, candidate_cap(limit), cutoff)
            unvectored = [c for c in wide if c.cosine is None]
            vectors = embedder.embed([c.record.text for c in unvectored])
            fresh = [(c.seq, v) for c, v in zip(unvectored, vectors, strict=True)]
            store_vectors(connection, fresh, embedder.name)
            index = self._scopes.synced_index(connection, scope_key)
            chosen = index.select(stems, wanted, query_vector, now, self._ranking, limit, cutoff)
        results = self._used(connection, scope_key, [Ranked(c.record, c.relevance) for c in chosen], now)
        for c, item in zip(chosen, results, strict=True):  # what the database holds once bumps are written
            index.set_record(c.seq, item.record)
        return results

    def _retrieve_spec(
        self,
        connection: sqlite3.Connection,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        limit: int,
        cutoff: float | None,
    ) -> builtins.list[Ranked]:
        """The seed's read (`memory.ranking = "spec"`): the FTS5 bm25 prefilter, then the spec scorer."""
        match = fts_match_terms(terms)
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
        # bm25 only chose who reaches the engine; seq order makes ties rank as in every store.
        rows.sort(key=lambda row: int(row[0]))
        now = self._clock()
        records = [self._decode(tuple(row[1:])) for row in rows]
        records = self._scopes.overlay(scope_key, records)  # what an immediate bump would have left
        records = unexpired(records, cutoff)  # expired: never returned, erased on the next write
        return self._used(connection, scope_key, rank(records, query, limit, now, self._ranking), now)

    def _used(
        self, connection: sqlite3.Connection, scope_key: str, ranked: Sequence[Ranked], now: float
    ) -> builtins.list[Ranked]:
        """A read's results as their usage bumps leave them; the bumps themselves are held back and
        written in batches (memory/stores/sqlite/usage_bumps.py). The caller holds the scope lock."""
        if not ranked:
            return []
        if self._scopes.bump_later(scope_key, [item.record for item in ranked], now):
            self._scopes.write_bumps(connection, scope_key)
        return bumped(ranked, now)
