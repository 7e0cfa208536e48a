"""The encoder's intra-op threads, A/B in one process: retrieves alternated between two stores over one
filled scope, one embedding queries on one thread and one on two (or any two counts).

    .venv/bin/python bench/bench_encoder_threads.py                      # 1 vs 2 threads, 500 records
    .venv/bin/python bench/bench_encoder_threads.py --threads 1,2 --rounds 300

Both stores read the same SQLite directory with the same model (so the same stored vectors; each
sees the other's usage flushes as another connection's commits, both alike), each
through its public async API on the running event loop, as bench/bench_store.py times a retrieve. Each
round asks each store a new query of the same kind, the stores' order alternating round by round, so
a machine whose load drifts weighs on both alike. Per variant: p50 / p95 wall ms and process CPU ms a
retrieve (the CPU of the whole process while that variant ran: the helper thread's share included).
Then the event loop's lag while each variant embeds a write's batches on the store's worker thread.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import LIMIT, SCOPE, Corpus, fill

from memory.ranking.embedder import Embedder, minilm_embedder
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MAX_SCOPE_CAP

BATCHES = 6  # write batches a variant embeds while the loop's lag is sampled
# Real-looking Slack messages for a row of their own (bench_store's queries are random letter strings,
# which WordPiece cuts into several pieces each: a median 36 pieces, where these have 11-23, a median
# 17): every opener with every body, so no query repeats and none is served from the embedder's cache.
OPENERS = (
    "hey team,",
    "quick question:",
    "morning all!",
    "sorry to bug you again but",
    "fyi",
    "heads up:",
    "does anyone remember",
    "ok so",
    "before standup,",
    "not urgent, but",
    "can someone check",
    "following up on yesterday:",
    "random thought:",
    "hmm,",
    "lol ok",
    "wait,",
    "thanks! also",
    "one more thing:",
    "@here",
    "re the outage,",
)
BODIES = (
    "when is the next release going out?",
    "who owns the billing service these days?",
    "the staging deploy failed again, same disk error as last week",
    "what was the decision on moving standup to 10am?",
    "is the api rate limit still 100 requests a minute per token?",
    "can we bump the postgres connection pool before friday's launch?",
    "where do we keep the runbook for rotating the slack signing secret?",
    "did legal ever sign off on the new data retention policy?",
    "i think the flaky test is the one that sleeps for two seconds",
    "which region is the eu customer data stored in?",
    "what's the wifi password for the berlin office",
    "remind me why we pinned numpy to the old version",
    "is anyone else seeing timeouts from the search endpoint?",
    "the design review for the onboarding flow is moved to thursday",
    "how do i get access to the production dashboards?",
    "we agreed to ship the mobile fix behind a feature flag, right?",
    "who's on call this weekend",
    "can you send me the link to the q3 roadmap doc",
    "what did the customer say about the invoice export bug?",
    "let's not merge anything big until the freeze is over",
)


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] * 1000


async def retrieves(
    stores: dict[int, SqliteMemoryStore], queries: dict[str, Callable[[], str]], rounds: int
) -> None:
    for kind, make_query in queries.items():
        wall: dict[int, list[float]] = {threads: [] for threads in stores}
        cpu = dict.fromkeys(stores, 0.0)
        order = list(stores)
        for index in range(rounds):
            for threads in order[index % 2 :] + order[: index % 2]:
                query = make_query()
                started, used = time.perf_counter(), time.process_time()
                await stores[threads].retrieve(SCOPE, query, LIMIT)
                wall[threads].append(time.perf_counter() - started)
                cpu[threads] += time.process_time() - used
        for threads in stores:
            print(
                f"| retrieve, {kind} | {threads} | {rounds} | {percentile(wall[threads], 0.5):.2f} | "
                f"{percentile(wall[threads], 0.95):.2f} | {cpu[threads] / rounds * 1000:.2f} |"
            )


async def loop_lag(store: SqliteMemoryStore, corpus: Corpus) -> tuple[list[float], float]:
    """The event loop's lateness on 1 ms sleeps while the store embeds and writes `BATCHES` batches of
    50 candidates, and the wall seconds they took."""
    lags: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - started - 0.001)

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    for _ in range(BATCHES):
        await store.write("org:lag", [corpus.candidate() for _ in range(50)])
    took = time.perf_counter() - started
    done.set()
    await ticker
    return lags, took


async def run(counts: Sequence[int], size: int, rounds: int) -> None:
    embedders: dict[int, Embedder] = {threads: minilm_embedder(threads) for threads in counts}
    corpus = Corpus(seed=size)
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        stores = {
            threads: SqliteMemoryStore(Path(tmp) / "memory", cap=MAX_SCOPE_CAP, embedder=embedder)
            for threads, embedder in embedders.items()
        }
        try:
            await fill(stores[counts[0]], SCOPE, corpus, size)
            for store in stores.values():  # warm each store's index, connection and session
                for _ in range(20):
                    await store.retrieve(SCOPE, corpus.query(), LIMIT)
            print(f"{size:,} records; load average before: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
            print()
            print("| operation | intra-op threads | samples | p50 ms | p95 ms | process CPU ms a retrieve |")
            print("| --- | ---: | ---: | ---: | ---: | ---: |")
            english = iter([f"{opener} {body}" for opener in OPENERS for body in BODIES][::-1])
            queries = {
                "chat-message query": corpus.query,
                "3-keyword query": corpus.keyword_query,
                "English chat message": lambda: next(english),
            }
            await retrieves(stores, queries, rounds)
            print()
            print(
                "| event loop while a write embeds 50 candidates | intra-op threads | ticks | lag p50 ms "
                "| lag p99 ms | lag max ms | wall s a batch |"
            )
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            for threads in list(counts) + list(counts):
                lags, took = await loop_lag(stores[threads], corpus)
                print(
                    f"| {BATCHES} batches | {threads} | {len(lags)} | {percentile(lags, 0.5):.2f} | "
                    f"{percentile(lags, 0.99):.2f} | {max(lags) * 1000:.2f} | {took / BATCHES:.3f} |"
                )
        finally:
            for store in stores.values():
                await store.aclose()
    print()
    print(f"load average at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="two intra-op thread counts to alternate")
    parser.add_argument("--size", type=int, default=500, help="active records in the scope")
    parser.add_argument("--rounds", type=int, default=150, help="retrieves of each kind per variant (≤ 200)")
    args = parser.parse_args(argv)
    counts = [int(value) for value in args.threads.split(",")]
    if not 1 <= args.rounds <= len(OPENERS) * len(BODIES) // 2:
        parser.error(
            f"--rounds: 1 to {len(OPENERS) * len(BODIES) // 2} (unique English messages), got {args.rounds}"
        )
    if len(counts) != 2 or len(set(counts)) != 2 or min(counts) < 1:
        parser.error(f"--threads: two different counts of at least 1, got {args.threads!r}")
    asyncio.run(run(counts, args.size, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
