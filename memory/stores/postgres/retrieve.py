"""A read of one or more scopes on one connection, every scope's usage bump in ONE transaction.

The stemmed rankings read this replica's scope indexes (memory/stores/postgres/scope_cache.py): each
scope caught up with the database in one round trip for all of them, then scored whole in process with
the ranking every store shares. The seed's `spec` ranking reads the FTS prefilter by rank and scores
its candidates with the spec scorer.

The retrieve is advisory: the store answers `[]` when the server is lost rather than fail the reply.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence

from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder, Matrix
from memory.ranking.fusion import Ranked, Ranking, rank, time_window
from memory.ranking.lexical import query_stems
from memory.ranking.scope_index import Candidate
from memory.ranking.vectors import to_blob
from memory.rules.engine import (
    candidate_cap,
)
from memory.rules.retention import Retention
from memory.rules.when import TimeWindow
from memory.stores.postgres.changes import BUMP_READ_BACK, Changes, read_many
from memory.stores.postgres.rows import Connection, fetch_rows
from memory.stores.postgres.scope_cache import ScopeIndexes
from memory.stores.postgres.sql import (
    _BUMP_USAGE,
    _NO_COMMIT_WAIT,
    _SELECT_MATCHES,
    _SET_VECTOR,
)
from memory.stores.sql_common import bumped

# Per scope: the chosen records, and (seq, text) of the pool's records with no vector of this model.
_Selected = tuple[builtins.list[Candidate], builtins.list[tuple[int, str]]]


class Retriever:
    """Ranks scopes' records for a query: the stemmed rankings over this replica's scope indexes."""

    def __init__(
        self, ranking: Ranking, embedder: Embedder | None, clock: Callable[[], float], retention: Retention
    ) -> None:
        self._ranking = ranking
        self._embedder = embedder
        self._clock = clock
        self._retention = retention
        self.indexes = ScopeIndexes(None if embedder is None else embedder.name)

    async def retrieve_scopes(
        self,
        pool: AsyncConnectionPool[Connection],
        scope_keys: Sequence[str],
        query: str,
        terms: Sequence[str],
        tsquery: str,
        limit: int,
    ) -> dict[str, builtins.list[Ranked]]:
        if not self._ranking.stemmed:
            return await self._retrieve_spec(pool, scope_keys, query, tsquery, limit)
        query_vector = None
        if self._embedder is not None:  # once for every scope, off the loop
            query_vector = await asyncio.to_thread(self._embedder.embed_query, query)
        async with self.indexes.locked(scope_keys), pool.connection() as conn:
            now = self._clock()
            chosen = await self._select(conn, scope_keys, query, terms, limit, now, query_vector)
            unvectored = {key: missing for key, (_, missing) in chosen.items() if missing}
            if unvectored:  # vectors made on use, stored, and the scopes ranked again with them
                await self._store_vectors(conn, unvectored)
                chosen = await self._select(conn, scope_keys, query, terms, limit, now, query_vector)
            found = {key: picked for key, (picked, _) in chosen.items() if picked}
            if found:
                await self._bump(conn, found, now)
        return {
            key: bumped([Ranked(c.record, c.relevance) for c in picked], now) for key, picked in found.items()
        }

    async def _select(
        self,
        conn: Connection,
        scope_keys: Sequence[str],
        query: str,
        terms: Sequence[str],
        limit: int,
        now: float,
        query_vector: Matrix | None,
    ) -> dict[str, _Selected]:
        """Every scope caught up (one round trip for all), then ranked whole on a worker thread."""
        changes = await read_many(conn, [(key, self.indexes.since(key)) for key in scope_keys])
        return await asyncio.to_thread(self._rank_all, changes, query, terms, limit, now, query_vector)

    def _rank_all(
        self,
        changes: dict[str, Changes],
        query: str,
        terms: Sequence[str],
        limit: int,
        now: float,
        query_vector: Matrix | None,
    ) -> dict[str, _Selected]:
        """On a worker thread: each scope caught up and ranked whole, holding the scopes' thread locks."""
        stems = query_stems(query)
        wanted = frozenset(terms)
        window = time_window(query, now)
        selected: dict[str, _Selected] = {}
        with self.indexes.held(changes):
            for key, change in changes.items():
                selected[key] = self._rank_one(key, change, stems, wanted, limit, now, query_vector, window)
        return selected

    def _rank_one(
        self,
        key: str,
        change: Changes,
        stems: Sequence[str],
        wanted: frozenset[str],
        limit: int,
        now: float,
        query_vector: Matrix | None,
        window: TimeWindow | None,
    ) -> _Selected:
        """One scope caught up and ranked; the caller holds its thread lock."""
        ranking = self._ranking
        index = self.indexes.apply(key, change)
        cutoff = self._retention.cutoff(key, now)  # expired: never returned, erased on the next write
        picked = index.select(stems, wanted, query_vector, now, ranking, limit, cutoff, window)
        missing: builtins.list[tuple[int, str]] = []
        if self._embedder is not None and any(c.cosine is None for c in picked):
            pool = candidate_cap(limit)
            wide = index.select(stems, wanted, query_vector, now, ranking, pool, cutoff, window)
            missing = [(c.seq, c.record.text) for c in wide if c.cosine is None]
        return picked, missing

    async def _store_vectors(
        self, conn: Connection, unvectored: dict[str, builtins.list[tuple[int, str]]]
    ) -> None:
        """Vectors for the candidates that had none of this model, made off the loop, in one transaction
        (never into a row erased meanwhile); the next catch-up reads them back."""
        embedder = self._embedder
        assert embedder is not None
        texts = [text for missing in unvectored.values() for _, text in missing]
        made = iter(await asyncio.to_thread(embedder.embed, texts))
        async with conn.pipeline(), conn.transaction():
            for key, missing in unvectored.items():
                for seq, _ in missing:
                    await conn.execute(_SET_VECTOR, (to_blob(next(made)), embedder.name, key, seq))

    async def _bump(self, conn: Connection, found: dict[str, builtins.list[Candidate]], now: float) -> None:
        """One round trip (pipeline) and one transaction for every scope's bump, with no WAL flush wait:
        a usage bump lost in a server crash is harmless, and retrieve is on every request's path. The
        bumped rows come back as the bump left them, into the scopes' indexes."""
        cursors = []
        async with conn.pipeline(), conn.transaction():
            await conn.execute(_NO_COMMIT_WAIT)
            for key, picked in found.items():
                cursors.append((key, await conn.execute(BUMP_READ_BACK, (now, key, [c.seq for c in picked]))))
        for key, cursor in cursors:
            self.indexes.read_back(key, await cursor.fetchall())

    async def _retrieve_spec(
        self,
        pool: AsyncConnectionPool[Connection],
        scope_keys: Sequence[str],
        query: str,
        tsquery: str,
        limit: int,
    ) -> dict[str, builtins.list[Ranked]]:
        """The seed's read: the FTS prefilter by rank, then the spec scorer over its candidates."""
        # No transaction for the reads: each SELECT is one snapshot (before or after any concurrent
        # batch), and a bump landing on a row a concurrent batch just retired is harmless.
        chosen: dict[str, tuple[builtins.list[Ranked], builtins.list[int]]] = {}
        async with pool.connection() as conn:
            now = self._clock()
            for key in scope_keys:
                params = {"scope": key, "q": tsquery, "n": candidate_cap(limit)}
                rows = await fetch_rows(conn, _SELECT_MATCHES, params)
                # The rank only chose who reaches the engine; seq order makes ties rank as in every store.
                rows.sort(key=lambda row: row[0])
                cutoff = self._retention.cutoff(key, now)
                if cutoff is not None:  # expired: never returned, erased on the scope's next write
                    rows = [row for row in rows if row[1].created_at >= cutoff]
                records = [record for _, record in rows]
                ranked = await asyncio.to_thread(rank, records, query, limit, now, self._ranking)
                seq_of = {record.id: seq for seq, record in rows}
                if ranked:
                    chosen[key] = (ranked, [seq_of[item.record.id] for item in ranked])
            if not chosen:
                return {}
            async with conn.pipeline(), conn.transaction():
                await conn.execute(_NO_COMMIT_WAIT)
                for key, (_, seqs) in chosen.items():
                    await conn.execute(_BUMP_USAGE, (now, key, seqs))
        return {key: bumped(ranked, now) for key, (ranked, _) in chosen.items()}
