"""Latency of a durable memory store: retrieve, a 5-candidate write, and a four-scope context read.

    .venv/bin/python bench/bench_store.py                       # sqlite, 500 / 5,000 / 10,000 records
    .venv/bin/python bench/bench_store.py --sizes 500 --iterations 100
    .venv/bin/python bench/bench_store.py --store postgres      # the same, on PostgreSQL ($DATABASE_URL)
    .venv/bin/python bench/bench_store.py --embedder none       # lexical only (default: minilm)
    .venv/bin/python bench/bench_store.py --sizes 500 --encoder-threads 1   # the forward pass on one thread
    .venv/bin/python bench/bench_store.py --sizes 500 --four-scope-sizes 500,5000,10000

The four-scope read (`memory_context_block` over org + repo + channel + user) is timed in the same run
as one scope's retrieve over the same store, so their ratio is not skewed by the machine's load.

Every figure is measured through the store's public async API on a running event loop, so it includes
the hop to the store's worker thread. Record and query text come from a seeded Zipf-like vocabulary
with stopwords, so common tokens match many rows as in real use. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.ranking.embedder import (
    DEFAULT_EMBEDDER,
    EMBEDDER_NAMES,
    Embedder,
    load_embedder,
    minilm_embedder,
)
from memory.ranking.encoder import intra_op_threads
from memory.ranking.fusion import RANKING_MODES, Ranking
from memory.rules.visibility import Reader
from memory.stores.contract import MemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MAX_SCOPE_CAP, MemoryCandidate
from ops.log_setup import configure_logging
from tests.memory.reads import memory_context_block

SCOPE = "org:bench"
FOUR_SCOPE_SIZE = 500
LIMIT = 8
STOPWORDS = ("the", "a", "to", "of", "and", "in", "we", "is", "for", "on", "with", "it", "use", "do")


class Clock:
    """A monotonic fake clock: each tick is one second later, so recency spreads over the fill."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


# The embedder every store of the run is built with (`--embedder`; the plain install's default).
EMBEDDER: list[Embedder | None] = [None]
RANKING: list[Ranking] = [Ranking()]


@dataclass(frozen=True)
class Backend:
    """A store under test, and what its database does after a bulk load before it is timed."""

    store: MemoryStore
    settle: Callable[[], Awaitable[None]]


async def _nothing() -> None:
    return None


@contextlib.asynccontextmanager
async def sqlite_backend(workdir: Path, cap: int, clock: Clock) -> AsyncIterator[Backend]:
    store = SqliteMemoryStore(
        workdir / "memory", cap=cap, clock=clock, ranking=RANKING[0], embedder=EMBEDDER[0]
    )
    try:
        yield Backend(store, _nothing)
    finally:
        await store.aclose()


@contextlib.asynccontextmanager
async def postgres_backend(workdir: Path, cap: int, clock: Clock) -> AsyncIterator[Backend]:
    """PostgresMemoryStore in a throwaway schema of $DATABASE_URL (default: the local test server).

    After the bulk load the schema is ANALYZEd, as autovacuum does on a default server within a
    minute of that many new rows: without statistics the planner guesses one row per scope and may
    read the dedup lookup off another index (a server run with autovacuum off needs the same). Then
    a CHECKPOINT writes the load's pages out, so the server's next timed checkpoint (every five
    minutes by default) does not land in the timed reads of one size and not another's. On a server
    with autovacuum off the system catalogs are VACUUMed first, as autovacuum would: every schema made
    and dropped (each test and each bench run makes one) leaves dead catalog rows, and with thousands
    of them every new relation's lookups slow down, so figures drift from one run to the next."""
    import uuid

    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from memory.stores.postgres.store import PostgresMemoryStore

    base = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/test"
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as admin:
        cursor = await admin.execute("SHOW autovacuum")
        if (await cursor.fetchone()) == ("off",):
            await admin.execute(f"VACUUM {', '.join(CATALOGS)}")
        await admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            dsn = make_conninfo(base, options=f"-csearch_path={schema}")
            store = await PostgresMemoryStore.connect(
                dsn, cap=cap, clock=clock, ranking=RANKING[0], embedder=EMBEDDER[0]
            )

            async def analyze() -> None:
                for table in ("memory_records", "memory_usage", "memory_term_df"):
                    name = sql.Identifier(schema, table)
                    await admin.execute(sql.SQL("ANALYZE {}").format(name))
                try:
                    await admin.execute("CHECKPOINT")
                except psycopg.errors.InsufficientPrivilege:
                    print("bench_store: no CHECKPOINT (needs pg_checkpoint or superuser)", file=sys.stderr)

            try:
                yield Backend(store, analyze)
            finally:
                await store.aclose()
        finally:
            await admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


# The catalogs a schema's tables, columns, indexes and constraints live in.
CATALOGS = tuple(
    f"pg_catalog.{name}"
    for name in (
        "pg_attribute",
        "pg_depend",
        "pg_class",
        "pg_index",
        "pg_type",
        "pg_constraint",
        "pg_attrdef",
    )
)


BACKENDS: dict[str, Callable[[Path, int, Clock], contextlib.AbstractAsyncContextManager[Backend]]] = {
    "sqlite": sqlite_backend,
    "postgres": postgres_backend,
}


class Corpus:
    """Seeded pseudo-English: a Zipf-weighted vocabulary plus stopwords."""

    def __init__(self, seed: int = 7, vocabulary: int = 3000) -> None:
        self.rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        words: set[str] = set()
        while len(words) < vocabulary:
            words.add("".join(self.rng.choice(letters) for _ in range(self.rng.randint(4, 10))))
        self.words = sorted(words)
        self.weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(self.words))]

    def phrase(self, low: int, high: int) -> str:
        count = self.rng.randint(low, high)
        content = self.rng.choices(self.words, weights=self.weights, k=count)
        out: list[str] = []
        for word in content:
            out.append(word)
            if self.rng.random() < 0.5:
                out.append(self.rng.choice(STOPWORDS))
        return " ".join(out)

    def candidate(self) -> MemoryCandidate:
        keywords = tuple(self.rng.choices(self.words, weights=self.weights, k=3))
        return MemoryCandidate(
            kind="fact",
            text=self.phrase(8, 20),
            source_thread_key="slack:C1:1700000000.000100",
            keywords=keywords,
            source_run_id="run-bench",
            confidence=0.8,
            origin="public",  # readable by the public-channel reader the block is built for
            origin_conversation="slack:C1",
        )

    def query(self) -> str:
        """A chat message: content words and stopwords, so most rows share some token with it."""
        return self.phrase(4, 10)

    def keyword_query(self) -> str:
        """Three content words, no stopwords: a selective MATCH."""
        return " ".join(self.rng.choices(self.words, weights=self.weights, k=3))


@dataclass(frozen=True)
class Row:
    what: str
    records: int
    cap: int
    samples: Sequence[float]

    def cells(self) -> str:
        ordered = sorted(self.samples)
        p50 = statistics.median(ordered) * 1000
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000
        return f"| {self.what} | {self.records:,} | {self.cap:,} | {len(ordered)} | {p50:.2f} | {p95:.2f} |"


async def fill(store: MemoryStore, scope: str, corpus: Corpus, count: int) -> None:
    remaining = count
    while remaining > 0:
        size = min(50, remaining)
        await store.write(scope, [corpus.candidate() for _ in range(size)])
        remaining -= size


async def timed(samples: list[float], call: Callable[[], Awaitable[object]]) -> None:
    start = time.perf_counter()
    await call()
    samples.append(time.perf_counter() - start)


async def bench_scope(
    backend: str, workdir: Path, size: int, cap: int, iterations: int, *, reads: bool
) -> list[Row]:
    corpus = Corpus(seed=size)
    clock = Clock()
    rows: list[Row] = []
    async with BACKENDS[backend](workdir, cap, clock) as under_test:
        store = under_test.store
        await fill(store, SCOPE, corpus, size)
        await under_test.settle()
        for _ in range(20):  # warm caches and the connection
            await store.retrieve(SCOPE, corpus.query(), LIMIT)
        if reads:
            for name, make_query in (
                ("chat-message query", corpus.query),
                ("3-keyword query", corpus.keyword_query),
            ):
                samples: list[float] = []
                for _ in range(iterations):
                    call = functools.partial(store.retrieve, SCOPE, make_query(), LIMIT)
                    await timed(samples, call)
                rows.append(Row(f"retrieve, limit {LIMIT}, {name}", size, cap, samples))
        write: list[float] = []
        for _ in range(iterations):
            batch = [corpus.candidate() for _ in range(5)]
            await timed(write, functools.partial(store.write, SCOPE, batch))
        what = "write, 5 candidates" + (" (at the cap: evicts 5)" if size >= cap else " (under the cap)")
        rows.append(Row(what, size, cap, write))
    return rows


async def bench_four_scopes(backend: str, workdir: Path, iterations: int, size: int) -> list[Row]:
    """The four-scope read and, in the same run over the same store, one scope's retrieve."""
    corpus = Corpus(seed=4)
    clock = Clock()
    scopes = ("org:acme", "repo:acme/api", "channel:slack:C1", "user:slack:U1")
    async with BACKENDS[backend](workdir, MAX_SCOPE_CAP, clock) as under_test:
        store = under_test.store
        for scope in scopes:
            await fill(store, scope, corpus, size)
        await under_test.settle()
        single: list[float] = []
        samples: list[float] = []
        for index in range(iterations + 20):
            query = corpus.query()
            start = time.perf_counter()
            await store.retrieve(scopes[0], query, LIMIT)
            if index >= 20:
                single.append(time.perf_counter() - start)
            query = corpus.query()
            start = time.perf_counter()
            await memory_context_block(
                store,
                query,
                reader=Reader("public", "slack:U1", "slack:C1"),
                organization="acme",
                user_id="slack:U1",
                channel_id="slack:C1",
                repo="acme/api",
                clock=clock,
            )
            if index >= 20:
                samples.append(time.perf_counter() - start)
    return [
        Row("same run: one scope's retrieve, limit 8, chat-message query", size, MAX_SCOPE_CAP, single),
        Row("memory_context_block, 4 scopes, chat-message query", size, MAX_SCOPE_CAP, samples),
    ]


async def run(
    backend: str, sizes: Sequence[int], iterations: int, four_scope_sizes: Sequence[int]
) -> list[Row]:
    rows: list[Row] = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
            rows.extend(await bench_scope(backend, Path(tmp), size, MAX_SCOPE_CAP, iterations, reads=True))
        if size < MAX_SCOPE_CAP:  # the steady state of a full scope: every write evicts
            with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
                rows.extend(await bench_scope(backend, Path(tmp), size, size, iterations, reads=False))
    for size in four_scope_sizes:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
            rows.extend(await bench_four_scopes(backend, Path(tmp), iterations, size))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=sorted(BACKENDS), default="sqlite")
    parser.add_argument("--sizes", default="500,5000,10000", help="comma-separated active record counts")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument(
        "--four-scope-sizes", default=str(FOUR_SCOPE_SIZE), help="records per scope for the four-scope read"
    )
    parser.add_argument("--embedder", choices=EMBEDDER_NAMES, default=DEFAULT_EMBEDDER)
    parser.add_argument("--ranking", choices=RANKING_MODES, default="v2")
    parser.add_argument(
        "--encoder-threads", type=int, help="minilm's intra-op threads (default: the encoder's own choice)"
    )
    args = parser.parse_args(argv)
    configure_logging("warning")  # the store's events on stderr, warnings only: stdout is the table
    sizes = [int(value) for value in args.sizes.split(",") if value]
    four_scope_sizes = [int(value) for value in args.four_scope_sizes.split(",") if value]
    encoder = ""
    if args.embedder == "minilm":
        EMBEDDER[0] = minilm_embedder(args.encoder_threads)
        encoder = f" ({args.encoder_threads or intra_op_threads()} intra-op threads)"
    else:
        EMBEDDER[0] = load_embedder(args.embedder)
    RANKING[0] = Ranking(mode=args.ranking)
    rows = asyncio.run(run(args.store, sizes, args.iterations, four_scope_sizes))
    print(
        f"store: {args.store}; ranking: {args.ranking}; embedder: {args.embedder}{encoder}; "
        f"Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; "
        f"{platform.machine()}; cpus: {os.cpu_count()}; "
        f"load average at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    print()
    print("| operation | active records (per scope) | cap | samples | p50 ms | p95 ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(row.cells())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
