"""A read of one or more scopes on one connection: the FTS (or stem) prefilter by rank, the scope's
document frequencies and vectors, the engine's ranking, and every scope's usage bump in ONE transaction.

The retrieve is advisory: the store answers `[]` when the server is lost rather than fail the reply.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence

from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder, Matrix
from memory.ranking.fusion import Ranked, Ranking, rank, stats_stems
from memory.ranking.vectors import (
    GENERATION_TERM,
    ScopeVectors,
    record_cosines,
    semantic_candidates,
    to_blob,
)
from memory.rules.engine import (
    candidate_cap,
)
from memory.rules.retention import Retention
from memory.stores.postgres.rows import Connection, Row, fetch_rows
from memory.stores.postgres.sql import (
    _BUMP_USAGE,
    _NEXT_GENERATION,
    _NO_COMMIT_WAIT,
    _SELECT_BY_SEQS,
    _SELECT_MATCHES,
    _SELECT_STEM_MATCHES,
    _SELECT_VECTORS,
    _SET_VECTOR,
)
from memory.stores.postgres.terms import more_term_stats, term_stats
from memory.stores.sql_common import bumped

# Per scope: its returned records, their seqs (to bump), and the vectors made on use.
_Chosen = tuple[builtins.list[Ranked], builtins.list[int], builtins.list[tuple[int, Matrix]]]


class Retriever:
    """Ranks scopes' records for a query, keeping each scope's vectors as one matrix between reads."""

    def __init__(
        self, ranking: Ranking, embedder: Embedder | None, clock: Callable[[], float], retention: Retention
    ) -> None:
        self._ranking = ranking
        self._embedder = embedder
        self._clock = clock
        self._retention = retention
        # Each scope's vectors as one matrix, re-read when the scope's generation moves (any replica).
        self._vector_cache: dict[str, ScopeVectors] = {}

    async def retrieve_scopes(
        self,
        pool: AsyncConnectionPool[Connection],
        scope_keys: Sequence[str],
        query: str,
        terms: Sequence[str],
        tsquery: str,
        limit: int,
    ) -> dict[str, builtins.list[Ranked]]:
        # No transaction for the reads: each SELECT is one snapshot (before or after any concurrent
        # batch), and a bump landing on a row a concurrent batch just retired is harmless.
        chosen: dict[str, _Chosen] = {}
        query_vector = None
        if self._embedder is not None and self._ranking.stemmed:  # once for every scope
            query_vector = await asyncio.to_thread(self._embedder.embed_query, query)
        async with pool.connection() as conn:
            now = self._clock()
            for scope_key in scope_keys:
                chosen[scope_key] = await self._rank_scope(
                    conn, scope_key, query, terms, tsquery, limit, now, query_vector
                )
            if not any(seqs or fresh for _, seqs, fresh in chosen.values()):
                return {}
            # One round trip (pipeline) and one transaction for every scope's bump; no WAL flush wait:
            # a usage bump lost in a server crash is harmless, and retrieve is on every request's path.
            async with conn.pipeline(), conn.transaction():
                await conn.execute(_NO_COMMIT_WAIT)
                for scope_key, (_, seqs, fresh) in chosen.items():
                    if seqs:
                        await conn.execute(_BUMP_USAGE, (now, scope_key, seqs))
                    if fresh and self._embedder is not None:  # vectors made lazily, on use
                        model = self._embedder.name
                        for seq, vector in fresh:
                            await conn.execute(_SET_VECTOR, (to_blob(vector), model, scope_key, seq))
                        await conn.execute(_NEXT_GENERATION, (scope_key, GENERATION_TERM))
        return {scope_key: bumped(ranked, now) for scope_key, (ranked, _, _) in chosen.items() if ranked}

    async def _rank_scope(
        self,
        conn: Connection,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        tsquery: str,
        limit: int,
        now: float,
        query_vector: Matrix | None,
    ) -> _Chosen:
        """One scope's ranking: its returned records, their seqs (to bump), and vectors made on use."""
        params = {"scope": scope_key, "q": tsquery, "n": candidate_cap(limit)}
        stemmed = self._ranking.stemmed
        rows = await fetch_rows(conn, _SELECT_STEM_MATCHES if stemmed else _SELECT_MATCHES, params)
        # The rank only chose who reaches the engine; seq order makes ties rank as in every store.
        rows.sort(key=lambda row: row[0])
        stats, generation = await term_stats(conn, scope_key, terms) if stemmed else (None, 0)
        cosines: dict[str, float] | None = None
        centered: dict[str, float] | None = None
        fresh: builtins.list[tuple[int, Matrix]] = []
        if stats is not None and query_vector is not None:
            rows, cosines, centered, fresh = await self._semantic(
                conn, scope_key, query_vector, rows, generation, limit
            )
        cutoff = self._retention.cutoff(scope_key, now)
        if cutoff is not None:  # expired: never returned, erased on the scope's next write
            rows = [row for row in rows if row[1].created_at >= cutoff]
        records = [record for _, record in rows]
        if stats is not None and self._ranking.feedback.enabled:  # feedback stems weigh their IDF too
            stats = await more_term_stats(conn, scope_key, stats, stats_stems(self._ranking, query, records))
        # numpy over up to a whole scope's candidates: off the event loop, like every other CPU-heavy step.
        ranked = await asyncio.to_thread(
            rank, records, query, limit, now, self._ranking, stats=stats, cosines=cosines, centered=centered
        )
        seqs = {record.id: seq for seq, record in rows}
        return ranked, [seqs[item.record.id] for item in ranked], fresh

    async def _semantic(
        self,
        conn: Connection,
        scope_key: str,
        query_vector: Matrix,
        rows: builtins.list[Row],
        generation: int,
        limit: int,
    ) -> tuple[builtins.list[Row], dict[str, float], dict[str, float], builtins.list[tuple[int, Matrix]]]:
        """The candidates' plain and centered cosines (the centroid is the whole scope's), plus the
        records the prefilter missed that are close enough in meaning, and vectors made now for
        candidates that had none of this model."""
        embedder = self._embedder
        assert embedder is not None
        vectors = self._vector_cache.get(scope_key)
        if vectors is None or vectors.generation != generation:
            cursor = await conn.execute(_SELECT_VECTORS, (scope_key, embedder.name))
            # Up to a scope's cap of vectors decoded into one matrix: not on the event loop.
            vectors = await asyncio.to_thread(ScopeVectors.build, generation, await cursor.fetchall())
            self._vector_cache[scope_key] = vectors
        cosines, centered = await asyncio.to_thread(vectors.cosines, query_vector)
        threshold = self._ranking.semantic_threshold
        extra = semantic_candidates(cosines, threshold, (seq for seq, _ in rows), candidate_cap(limit))
        if extra:
            rows = sorted(
                [*rows, *await fetch_rows(conn, _SELECT_BY_SEQS, (scope_key, extra))], key=lambda r: r[0]
            )
        unvectored = [(seq, record) for seq, record in rows if seq not in cosines]
        fresh: builtins.list[tuple[int, Matrix]] = []
        if unvectored:
            made = await asyncio.to_thread(embedder.embed, [record.text for _, record in unvectored])
            seqs = [seq for seq, _ in unvectored]
            plain, close = vectors.cosines_of(seqs, made, query_vector)
            cosines.update(plain)
            centered.update(close)
            fresh.extend(zip(seqs, made, strict=True))
        ids_by_seq = {seq: record.id for seq, record in rows}
        return (
            rows,
            record_cosines(cosines, ids_by_seq),
            record_cosines(centered, ids_by_seq),
            fresh,
        )
