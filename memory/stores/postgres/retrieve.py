"""A read of one or more scopes on one connection; its usage bumps held back and written in batches.

The stemmed rankings read this replica's scope indexes (memory/stores/postgres/index.py): each
scope caught up with the database in one round trip for all of them, then scored whole in process with
the ranking every store shares. Their usage bumps are laid over the indexes at once and written later,
every pending scope's in ONE transaction (`write_bumps`), as the SQLite store writes its own. The seed's
`spec` ranking reads the FTS prefilter by rank, scores its candidates with the spec scorer and bumps
at once.

The retrieve is advisory: the store answers `[]` when the server is lost rather than fail the reply.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Callable, Sequence

import structlog
from psycopg.rows import TupleRow
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
from memory.stores.postgres.changes import WRITE_BUMPS, Changes, read_many
from memory.stores.postgres.connections import ServerPool
from memory.stores.postgres.failures import error_kind
from memory.stores.postgres.index import PERSONS_MOVED, PERSONS_MOVED_POLL_SECONDS, ScopeIndexes
from memory.stores.postgres.rows import Connection, fetch_rows, own_seq
from memory.stores.postgres.sql import (
    _BUMP_USAGE,
    _FLUSH_LOCK_WAIT,
    _NO_COMMIT_WAIT,
    _SELECT_MATCHES,
    _SET_VECTOR_SKIP_LOCKED,
)
from memory.stores.sql_common import bumped
from memory.stores.usage_bumps import PendingBumps

log = structlog.get_logger("memory")

# Per scope: the chosen records, and (seq, text) of the pool's records with no vector of this model.
_Selected = tuple[builtins.list[Candidate], builtins.list[tuple[int, str]]]

_PERSONS_MOVED = "SELECT value FROM memory_meta WHERE key = %s"


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
        self._flushes: set[asyncio.Future[None]] = set()  # running flushes, kept from the collector
        # The last look at the persons-moved stamp (this store's clock) and what it read.
        self._moves_looked = float("-inf")
        self._moves_seen: str | None = None

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
        vector = self._embed(query)  # on a worker thread while the scopes catch up
        try:
            async with self.indexes.locked(scope_keys), pool.connection() as conn:
                now = self._clock()
                await self._note_persons_moved(conn, scope_keys, now)
                chosen = await self._select(conn, scope_keys, query, terms, limit, now, vector)
                unvectored = {key: missing for key, (_, missing) in chosen.items() if missing}
                if unvectored:  # vectors made on use, stored, and the scopes ranked again with them
                    await self._store_vectors(conn, unvectored)
                    chosen = await self._select(conn, scope_keys, query, terms, limit, now, vector)
                # Written within FLUSH_SECONDS (`write_bumps`); what the reader gets is as they leave it.
                return {
                    key: self.indexes.hold(key, picked, now) for key, (picked, _) in chosen.items() if picked
                }
        finally:
            _settle(vector)

    async def _note_persons_moved(self, conn: Connection, scope_keys: Sequence[str], now: float) -> None:
        """Before a read of a person's scope indexed here (at most once a PERSONS_MOVED_POLL_SECONDS):
        when a person's erasure has moved a scope away since the last look, every person's scope
        indexed here is read afresh, as the moved one's catch-up would read nothing."""
        if now < self._moves_looked + PERSONS_MOVED_POLL_SECONDS or not any(
            key.startswith("user:") and key in self.indexes for key in scope_keys
        ):
            return
        self._moves_looked = now
        cursor = await conn.execute(_PERSONS_MOVED, (PERSONS_MOVED,))
        row = await cursor.fetchone()
        stamp = None if row is None else str(row[0])
        if stamp != self._moves_seen:
            self.indexes.let_go_of_person_scopes()
            self._moves_seen = stamp

    def _embed(self, query: str) -> asyncio.Future[Matrix | None]:
        """The query's vector (once for every scope), made off the loop; None without an embedder."""
        if self._embedder is None:
            done: asyncio.Future[Matrix | None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        return asyncio.ensure_future(asyncio.to_thread(self._embedder.embed_query, query))

    async def _select(
        self,
        conn: Connection,
        scope_keys: Sequence[str],
        query: str,
        terms: Sequence[str],
        limit: int,
        now: float,
        vector: asyncio.Future[Matrix | None],
    ) -> dict[str, _Selected]:
        """Every scope caught up (one statement for all), then ranked whole on a worker thread."""
        changes = await read_many(conn, [(key, self.indexes.since(key)) for key in scope_keys])
        query_vector = await vector
        ranking = asyncio.ensure_future(
            asyncio.to_thread(self._rank_all, changes, query, terms, limit, now, query_vector)
        )
        try:
            return await asyncio.shield(ranking)
        except asyncio.CancelledError:
            # The scopes' locks go with this reader: not before its thread is done with their indexes,
            # or it could lay rows older than a flush's read-back over it.
            await asyncio.wait([ranking])
            raise

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
        (never into a row erased meanwhile, nor one another transaction holds: a flush of usage bumps
        may hold it while it waits for this reader's locks; the next read makes that one again); the
        next catch-up reads them back."""
        embedder = self._embedder
        assert embedder is not None
        texts = [text for missing in unvectored.values() for _, text in missing]
        made = iter(await asyncio.to_thread(embedder.embed, texts))
        async with conn.pipeline(), conn.transaction():
            for key, missing in unvectored.items():
                for seq, _ in missing:
                    params = {"vector": to_blob(next(made)), "model": embedder.name, "scope": key, "seq": seq}
                    await conn.execute(_SET_VECTOR_SKIP_LOCKED, params)

    async def write_bumps(self, server: ServerPool, scope_keys: Sequence[str]) -> None:
        """The scopes' held-back usage bumps (memory/stores/postgres/held_bumps.py): one statement a
        scope, all in one transaction with no WAL flush wait (a usage count lost in a server crash is
        harmless). Reads of the scopes go on meanwhile. A caller cancelled meanwhile does not cancel
        the flush (its in-flight layer must be cleared by its own end). Usage counts only: a failure
        is logged and the scopes' indexes read afresh, never raised."""
        flush = asyncio.ensure_future(self._flush(server, scope_keys))
        self._flushes.add(flush)
        flush.add_done_callback(self._flushes.discard)
        await asyncio.shield(flush)

    async def _flush(self, server: ServerPool, scope_keys: Sequence[str]) -> None:
        bumps = self.indexes.bumps
        async with bumps.flushing:
            taken = {key: held for key in sorted(scope_keys) if (held := bumps.start(key)) is not None}
            if not taken:
                return
            try:
                await self._commit_bumps(await server.ready(), taken)
            except Exception as error:
                async with self.indexes.locked(taken):
                    for key in taken:
                        bumps.finish(key)
                        self.indexes.drop(key)  # it may hold bumps the database does not
                log.warning(
                    "memory.store.bumps_lost",
                    store="postgres",
                    scopes=len(taken),
                    records=sum(len(held.uses) for held in taken.values()),
                    error=error_kind(error),
                )

    async def _commit_bumps(
        self, pool: AsyncConnectionPool[Connection], taken: dict[str, PendingBumps]
    ) -> None:
        """One transaction on the scopes' usage rows, never long behind a writer's (`lock_timeout`:
        the bumps are lost). Another replica's flush of the same rows waits for it: the seqs are sorted,
        so a plan that walks them locks in seq order, and one that hashes them in the table's order;
        two flushes planned differently can deadlock, which the server breaks (those bumps are lost).
        The scopes' read locks are taken before the COMMIT and held until the rows are read back, so
        no catch-up reads them between (it would lay the in-flight layer over rows holding it, and
        count a later change as read). A reader holding those locks waits for no row lock
        (`_SET_VECTOR_SKIP_LOCKED`), so this wait ends."""
        async with pool.connection() as conn, contextlib.AsyncExitStack() as read_locks:
            rows: dict[str, builtins.list[TupleRow]] = {}
            async with conn.transaction():
                await conn.execute(_NO_COMMIT_WAIT)
                await conn.execute(_FLUSH_LOCK_WAIT)
                for key, held in taken.items():
                    cursor = await conn.execute(WRITE_BUMPS, _bump_columns(key, held))
                    rows[key] = await cursor.fetchall()
                await read_locks.enter_async_context(self.indexes.locked(taken))
            failed = []
            for key in taken:  # committed: the layer ends as its rows go in
                self.indexes.bumps.finish(key)
                try:
                    self.indexes.read_back(key, rows[key])
                except Exception:
                    failed.append(key)
            for key in failed:
                self.indexes.drop(key)

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


def _settle(vector: asyncio.Future[Matrix | None]) -> None:
    """A read that failed before it awaited its query vector: the embedding cancelled, or its error
    retrieved (no "exception was never retrieved" at exit)."""
    if not vector.done():
        vector.cancel()
    elif not vector.cancelled():
        vector.exception()


def _bump_columns(scope_key: str, bumps: PendingBumps) -> tuple[object, ...]:
    """`WRITE_BUMPS`' parameters, in seq order: the records' seqs, their uses, their last uses, the scope."""
    rows = sorted(
        (seq, count, used_at)
        for used_at, count, record_id in bumps.rows()
        if (seq := own_seq(scope_key, record_id)) is not None
    )
    seqs, uses, times = zip(*rows, strict=True) if rows else ((), (), ())
    return (list(seqs), list(uses), list(times), scope_key)
