"""How long a compaction locks each PostgreSQL memory table: 10,000 records per scope × 20 scopes.

    .venv/bin/python bench/bench_pg_compact.py              # $DATABASE_URL, else the test server
    .venv/bin/python bench/bench_pg_compact.py --records 1000 --scopes 5 --runs 3

Fills the scopes through the store (as `bench_store.py` does: 50 records a write, no embedder unless
`--embedder`), ANALYZEs, forgets one record in each scope, then runs `store.compact()` — what
`switchboard memory compact` runs — `--runs` times, forgetting one more record per scope before each.
Prints each table's size and lock time per run, then the median of each table's lock time and of the
longest lock of a run (each table, or partition of the records' table, is locked on its own, one after
the other); `--forget-in N` forgets in the first N scopes only.
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


async def run(
    records: int, scopes: int, runs: int, embedder: bool, forget_in: Sequence[int] = ()
) -> dict[int, list[CompactionReport]]:
    """The reports of `runs` compactions for each count of scopes forgotten in (all of them when
    `forget_in` is empty), one fill for all."""
    bench_store.EMBEDDER[0] = load_embedder(DEFAULT_EMBEDDER) if embedder else None
    keys = [f"channel:CBENCH{index:02d}" for index in range(scopes)]
    reports: dict[int, list[CompactionReport]] = {}
    clock = bench_store.Clock()
    forgotten = 0
    async with bench_store.postgres_backend(Path("."), max(DEFAULT_CAP, records), clock) as backend:
        store = backend.store
        await fill_all(store, keys, records)
        await backend.settle()
        for count in forget_in or (scopes,):
            for run_index in range(runs):
                forgotten += 1
                for key in keys[:count]:
                    await store.forget(key, f"mem:{key}:{forgotten}")
                report = await store.compact()  # type: ignore[attr-defined]
                reports.setdefault(count, []).append(report)
                for table in report.tables:
                    print(
                        f"{count} scopes, run {run_index + 1}: {table.table}"
                        f" {table.bytes_before / 1e6:.1f} MB"
                        f" → {table.bytes_after / 1e6:.1f} MB, locked {table.locked_seconds:.3f} s"
                    )
                print(f"run {run_index + 1}: checkpointed={report.checkpointed}", flush=True)
    return reports


def _table(name: str) -> str:
    """A partition of the records' table counts as that table (the partitions a run rewrites vary)."""
    return "memory_records (partitions)" if name.startswith("memory_records_p") else name


def summary(reports: Sequence[CompactionReport]) -> list[str]:
    tables = list(dict.fromkeys(_table(t.table) for r in reports for t in r.tables))
    lines = []
    for name in tables:
        parts = [[t for t in r.tables if _table(t.table) == name] for r in reports]
        lines.append(
            f"| {name} | {statistics.median(sum(t.bytes_after for t in p) for p in parts) / 1e6:.1f} MB |"
            f" {statistics.median(max((t.locked_seconds for t in p), default=0.0) for p in parts):.3f} s |"
            f" {statistics.median(len(p) for p in parts):g} rewritten |"
        )
    longest = statistics.median(max(t.locked_seconds for t in r.tables) for r in reports)
    total = statistics.median(sum(t.locked_seconds for t in r.tables) for r in reports)
    lines.append(
        f"longest single lock, median of {len(reports)} runs: {longest:.3f} s; all tables: {total:.3f} s"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="records per scope (default 10000)")
    parser.add_argument("--scopes", type=int, default=20, help="scopes (default 20)")
    parser.add_argument("--runs", type=int, default=3, help="compactions timed (default 3)")
    parser.add_argument(
        "--forget-in",
        default="",
        help="comma-separated counts of scopes to forget one record in before a run (default: all)",
    )
    parser.add_argument("--embedder", action="store_true", help="store the default embedder's vectors too")
    args = parser.parse_args(argv)
    counts = [int(count) for count in args.forget_in.split(",") if count]
    for count, reports in asyncio.run(
        run(args.records, args.scopes, args.runs, args.embedder, counts)
    ).items():
        print(f"forgetting one record in {count} of {args.scopes} scopes before each run:")
        print("\n".join(summary(reports)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
