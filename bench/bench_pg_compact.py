"""How long a compaction locks each PostgreSQL memory table: 10,000 records per scope × 20 scopes.

    .venv/bin/python bench/bench_pg_compact.py              # $DATABASE_URL, else the test server
    .venv/bin/python bench/bench_pg_compact.py --records 1000 --scopes 5 --runs 3

Fills the scopes through the store (as `bench_store.py` does: 50 records a write, no embedder unless
`--embedder`), ANALYZEs, forgets one record in each scope, then runs `store.compact()` — what
`switchboard memory compact` runs — `--runs` times, forgetting one more record per scope before each.
Prints each table's size and lock time per run, then the median of each table's lock time and of the
longest lock of a run (each table is locked on its own, one after the other).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from memory.stores.contract import MemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_store

from memory.ranking.embedder import DEFAULT_EMBEDDER, load_embedder
from memory.types import CompactionReport

DEFAULT_CAP = 10_000


async def fill_all(store: MemoryStore, scopes: Sequence[str], records: int) -> None:
    started = time.perf_counter()
    for done, batch in enumerate(range(0, len(scopes), 4)):
        group = scopes[batch : batch + 4]  # four scopes' writes at once (each scope's are in turn)
        await asyncio.gather(
            *(bench_store.fill(store, s, bench_store.Corpus(seed=hash(s)), records) for s in group)
        )
        print(
            f"filled {min(len(scopes), (done + 1) * 4)}/{len(scopes)} scopes"
            f" ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )


async def run(records: int, scopes: int, runs: int, embedder: bool) -> list[CompactionReport]:
    bench_store.EMBEDDER[0] = load_embedder(DEFAULT_EMBEDDER) if embedder else None
    keys = [f"channel:CBENCH{index:02d}" for index in range(scopes)]
    reports: list[CompactionReport] = []
    clock = bench_store.Clock()
    async with bench_store.postgres_backend(Path("."), max(DEFAULT_CAP, records), clock) as backend:
        store = backend.store
        await fill_all(store, keys, records)
        await backend.settle()
        for run_index in range(runs):
            for key in keys:
                await store.forget(key, f"mem:{key}:{run_index + 1}")
            report = await store.compact()  # type: ignore[attr-defined]
            reports.append(report)
            for table in report.tables:
                print(
                    f"run {run_index + 1}: {table.table} {table.bytes_before / 1e6:.1f} MB"
                    f" → {table.bytes_after / 1e6:.1f} MB, locked {table.locked_seconds:.3f} s"
                )
            print(f"run {run_index + 1}: checkpointed={report.checkpointed}", flush=True)
    return reports


def summary(reports: Sequence[CompactionReport]) -> list[str]:
    tables = [t.table for t in reports[0].tables]
    lines = [
        f"| {name} | {reports[0].tables[i].bytes_after / 1e6:.1f} MB |"
        f" {statistics.median(r.tables[i].locked_seconds for r in reports):.3f} s |"
        for i, name in enumerate(tables)
    ]
    longest = statistics.median(max(t.locked_seconds for t in r.tables) for r in reports)
    total = statistics.median(sum(t.locked_seconds for t in r.tables) for r in reports)
    lines.append(
        f"longest single-table lock, median of {len(reports)} runs: {longest:.3f} s;"
        f" all tables: {total:.3f} s"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="records per scope (default 10000)")
    parser.add_argument("--scopes", type=int, default=20, help="scopes (default 20)")
    parser.add_argument("--runs", type=int, default=3, help="compactions timed (default 3)")
    parser.add_argument("--embedder", action="store_true", help="store the default embedder's vectors too")
    args = parser.parse_args(argv)
    reports = asyncio.run(run(args.records, args.scopes, args.runs, args.embedder))
    print("\n".join(summary(reports)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
