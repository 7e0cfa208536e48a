"""A read's wall time and the CPU it costs the process: one scope's retrieve and the four-scope read.

    .venv/bin/python bench/bench_read_cpu.py                         # minilm (the default), 100 reads
    .venv/bin/python bench/bench_read_cpu.py --embedder wordllama --reads 200

On a shared machine the wall time says how busy the machine was; the process's CPU time per call (every
thread of this otherwise idle process: the loop's and the store's worker's) says what the read costs,
and is what a quiet machine's wall time comes close to. SQLite, 500 records in each of org, repo,
channel and user (bench/bench_store.py's corpus), the embedder's tuned ranking, a new chat-message
question each call, so the question is embedded every time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_store as corpus_of

from memory.ranking.embedder import (
    DEFAULT_EMBEDDER,
    EMBEDDER_NAMES,
    load_embedder,
    tuned_feedback,
    tuned_weight,
)
from memory.ranking.fusion import Ranking
from memory.rules.visibility import Reader
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.memory.reads import memory_context_block

SCOPES = ("org:acme", "repo:acme/api", "channel:slack:C1", "user:slack:U1")


def ms(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] * 1000


async def measure(embedder_name: str, reads: int) -> dict[str, list[float]]:
    embedder = load_embedder(embedder_name)
    ranking = Ranking(semantic_weight=tuned_weight(embedder), feedback=tuned_feedback(embedder))
    corpus = corpus_of.Corpus(seed=4)
    clock = corpus_of.Clock()
    found: dict[str, list[float]] = {key: [] for key in ("retrieve", "four-scope")}
    cpu: dict[str, list[float]] = {key: [] for key in found}
    with tempfile.TemporaryDirectory() as workdir:
        store = SqliteMemoryStore(Path(workdir), cap=10_000, clock=clock, ranking=ranking, embedder=embedder)
        try:
            for scope in SCOPES:
                await corpus_of.fill(store, scope, corpus, 500)
            for _ in range(10):
                await store.retrieve(SCOPES[0], corpus.query(), 8)
            for _ in range(reads):
                for key in found:
                    query = corpus.query()
                    wall, used = time.perf_counter(), time.process_time()
                    if key == "retrieve":
                        await store.retrieve(SCOPES[0], query, 8)
                    else:
                        await memory_context_block(
                            store, query, reader=Reader("public", "slack:U1", "slack:C1"),
                            organization="acme", user_id="slack:U1", channel_id="slack:C1",
                            repo="acme/api", clock=clock,
                        )  # fmt: skip
                    found[key].append(time.perf_counter() - wall)
                    cpu[key].append(time.process_time() - used)
        finally:
            await store.aclose()
    return {f"{key} wall": found[key] for key in found} | {f"{key} CPU": cpu[key] for key in cpu}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--embedder", choices=EMBEDDER_NAMES, default=DEFAULT_EMBEDDER)
    parser.add_argument("--reads", type=int, default=100)
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(args.embedder, args.reads))
    print(f"embedder: {args.embedder}; 500 records a scope; {args.reads} reads of each kind")
    print("| figure | p50 ms | p95 ms |\n| --- | ---: | ---: |")
    for name, samples in figures.items():
        print(f"| {name} | {ms(samples, 0.5):.2f} | {ms(samples, 0.95):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
