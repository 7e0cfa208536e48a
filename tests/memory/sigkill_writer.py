"""A writer process for the SIGKILL durability tests: a stream of batches, one `ack <n>` line each.

    python -m tests.memory.sigkill_writer DATA_DIR BATCH_SIZE [--kill-at-insert N] [--batches M]

Batch n holds BATCH_SIZE facts "stream b<n> part <j>" (keyword "b<n>"); from batch 2 on, its first
fact supersedes the first record of batch n-1. So a half-applied batch shows as a batch with fewer
than BATCH_SIZE rows, or as a retired record whose successor never landed.

--kill-at-insert N: the process SIGKILLs itself when SQLite starts its N-th `INSERT INTO records`
statement — mid-transaction, deterministically. Without it, the parent kills the process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MAX_SCOPE_CAP, MemoryCandidate

SCOPE = "org:stream"


def batch(number: int, size: int) -> list[MemoryCandidate]:
    previous_first = (number - 2) * size + 1
    return [
        MemoryCandidate(
            kind="fact",
            text=f"stream b{number} part {part}",
            source_thread_key=f"cli:stream:{number}",
            keywords=(f"b{number}",),
            supersedes=f"mem:{SCOPE}:{previous_first}" if part == 0 and number > 1 else None,
        )
        for part in range(size)
    ]


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir")
    parser.add_argument("batch_size", type=int)
    parser.add_argument("--kill-at-insert", type=int, default=0)
    parser.add_argument("--batches", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    inserts = 0

    def on_statement(scope_key: str, sql: str) -> None:
        nonlocal inserts
        if sql.startswith("INSERT INTO records ("):
            inserts += 1
            if inserts == args.kill_at_insert:
                os.kill(os.getpid(), signal.SIGKILL)

    store = SqliteMemoryStore(args.data_dir, cap=MAX_SCOPE_CAP, on_statement=on_statement)
    print("ready", flush=True)
    for number in range(1, args.batches + 1):
        await store.write(SCOPE, batch(number, args.batch_size))
        print(f"ack {number}", flush=True)
    await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
