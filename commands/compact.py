"""`switchboard memory compact`: the store's tables rewritten at once, so that no erased word stays
readable in the database's files (PostgreSQL; the store also does it by itself within
`memory.compact_after_seconds` of an erasure). Says what it rewrote and how long each table was locked
against the bot's reads and writes."""

from __future__ import annotations

from typing import TextIO

from memory.stores.contract import MemoryStore
from memory.types import CompactionReport, MemoryStoreError

COMPACT_USAGE = (
    "memory compact — rewrite the PostgreSQL memory tables now, so no erased word stays in the database's "
    "files (each table is locked while it is rewritten)"
)


async def run_compact(store: MemoryStore, *, out: TextIO, err: TextIO) -> int:
    """0 when the tables were rewritten, 1 when this store has nothing to compact here or failed."""
    compacting = store.compaction()
    if compacting is None:
        print(
            "switchboard memory compact: the configured store has nothing to compact here (SQLite rewrites "
            "its files at each erasure; behind the memory service, run it on the service's host)",
            file=err,
        )
        return 1
    try:
        report = await compacting.compact()
    except MemoryStoreError as error:
        print(f"⚠️ switchboard memory compact: {error}", file=err)
        return 1
    print(describe(report), file=out)
    return 0


def describe(report: CompactionReport) -> str:
    lines = ["🧹 Rewrote the memory tables (heap, indexes and TOAST of each):"]
    for table in report.tables:
        lines.append(
            f"  {table.table}: {_size(table.bytes_before)} → {_size(table.bytes_after)},"
            f" locked {table.locked_seconds:.3f} s"
        )
    longest = max((t.locked_seconds for t in report.tables), default=0.0)
    total = sum(t.locked_seconds for t in report.tables)
    lines.append(f"Each table was locked on its own: {longest:.3f} s at most, {total:.3f} s in all.")
    if report.waited_seconds >= 0.1:
        lines.append(f"Waited {report.waited_seconds:.1f} s for another replica's compaction to end.")
    if report.checkpointed:
        lines.append("The new pages are written out (CHECKPOINT).")
    else:
        lines.append(
            "CHECKPOINT is not permitted to this role (it needs pg_checkpoint): the server's next "
            "checkpoint writes the new pages out (checkpoint_timeout, 5 min by default)."
        )
    return "\n".join(lines)


def _size(count: int) -> str:
    return f"{count / 1024:.0f} kB" if count < 1024 * 1024 else f"{count / 1024 / 1024:.1f} MB"
