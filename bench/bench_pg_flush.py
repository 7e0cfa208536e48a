"""Where a PostgreSQL retrieve's tail goes: the held-back usage bumps' flush, timed beside the reads.

    .venv/bin/python bench/bench_pg_flush.py                  # 10,000 records, 300 reads ($DATABASE_URL)
    .venv/bin/python bench/bench_pg_flush.py --records 500

Fills one scope as `bench_store.py` does (and ANALYZEs), warms it with 30 reads, then times 300
chat-message retrieves back to back. Each flush's transaction (`_commit_bumps`: the UPDATE, the COMMIT
and the read-back) and its read-back on the event loop are timed by wrapping them, and each read is
counted as overlapping a flush or not. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_store

from memory.ranking.embedder import DEFAULT_EMBEDDER, load_embedder
from memory.stores.postgres import index, retrieve


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] * 1000


class FlushWatch:
    """Times every flush transaction and read-back, and says whether one is running."""

    def __init__(self) -> None:
        self.running = 0
        self.commits: list[float] = []
        self.rows: list[int] = []
        self.read_backs: list[float] = []

    def install(self) -> None:
        commit: Callable[..., Any] = retrieve.Retriever._commit_bumps
        read_back: Callable[..., Any] = index.ScopeIndexes.read_back
        watch = self

        async def timed_commit(self: Any, pool: Any, taken: dict[str, Any]) -> None:
            watch.running += 1
            start = time.perf_counter()
            try:
                await commit(self, pool, taken)
            finally:
                watch.commits.append(time.perf_counter() - start)
                watch.rows.append(sum(len(held.uses) for held in taken.values()))
                watch.running -= 1

        def timed_read_back(self: Any, scope_key: str, rows: Any) -> None:
            start = time.perf_counter()
            read_back(self, scope_key, rows)
            watch.read_backs.append(time.perf_counter() - start)

        retrieve.Retriever._commit_bumps = timed_commit  # type: ignore[method-assign]
        index.ScopeIndexes.read_back = timed_read_back  # type: ignore[method-assign,assignment]


async def run(records: int, reads: int) -> None:
    watch = FlushWatch()
    watch.install()
    bench_store.EMBEDDER[0] = load_embedder(DEFAULT_EMBEDDER)
    with tempfile.TemporaryDirectory() as workdir:
        async with bench_store.postgres_backend(Path(workdir), 10_000, bench_store.Clock()) as backend:
            corpus = bench_store.Corpus()
            await bench_store.fill(backend.store, bench_store.SCOPE, corpus, records)
            await backend.settle()
            for _ in range(30):
                await backend.store.retrieve(bench_store.SCOPE, corpus.query(), limit=bench_store.LIMIT)
            for kept in (watch.commits, watch.rows, watch.read_backs):
                kept.clear()
            beside: list[float] = []
            alone: list[float] = []
            for _ in range(reads):
                query = corpus.query()
                during = watch.running
                start = time.perf_counter()
                await backend.store.retrieve(bench_store.SCOPE, query, limit=bench_store.LIMIT)
                took = time.perf_counter() - start
                (beside if during or watch.running else alone).append(took)
    every = beside + alone
    p50, p95 = percentile(every, 0.5), percentile(every, 0.95)
    print(f"{records:,} records, {reads} reads: p50 {p50:.2f} ms, p95 {p95:.2f}")
    for name, samples in (("beside a flush", beside), ("no flush running", alone)):
        if samples:
            p50, p95 = percentile(samples, 0.5), percentile(samples, 0.95)
            print(f"  {name}: {len(samples)} reads, p50 {p50:.2f} ms, p95 {p95:.2f}")
    if watch.commits:
        rows = statistics.median(watch.rows)
        print(
            f"  flushes: {len(watch.commits)}, p50 {percentile(watch.commits, 0.5):.1f} ms for"
            f" {rows:.0f} rows; read-back on the loop p50 {percentile(watch.read_backs, 0.5):.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(run(args.records, args.reads))


if __name__ == "__main__":
    main()
