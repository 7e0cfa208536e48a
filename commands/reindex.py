"""`switchboard memory reindex`: vectors for records written before the embedder (or under another one).

Each scope is done in small batches, one transaction each, so an interrupted run loses at most one batch
and a rerun resumes where it stopped. Until a record has its vector it ranks lexically; retrieval also
fills the vectors of the records it meets, so this command only hurries that along.
"""

from __future__ import annotations

from typing import TextIO

from commands.render import unreadable_scopes_line
from memory.stores.contract import MemoryStore


async def run_reindex(store: MemoryStore, *, out: TextIO, err: TextIO) -> int:
    """0 when every scope is done, 1 when this store has no vectors to build here or holds scopes it
    cannot read (named on `err`)."""
    maintenance = store.maintenance()
    if maintenance is None:
        print(
            "switchboard memory reindex: the configured store keeps no vectors here "
            "(behind the memory service, run it on the service's host)",
            file=err,
        )
        return 1
    total = 0
    for scope_key in await maintenance.scope_keys():
        total += await maintenance.reindex(scope_key, progress=lambda key, done, of: _bar(err, key, done, of))
    print(f"reindexed {total} record(s)", file=out)
    skipped = unreadable_scopes_line("reindex", await maintenance.unreadable_scopes())
    if skipped is not None:
        print(skipped, file=err)
        return 1
    return 0


def _bar(err: TextIO, scope_key: str, done: int, total: int) -> None:
    width = 30
    filled = width if total == 0 else round(width * done / total)
    end = "\n" if done >= total else ""
    print(
        f"\r{scope_key} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
        end=end,
        file=err,
        flush=True,
    )
