"""The read path's block alone, for the tests and benches that only look at the text."""

from __future__ import annotations

import time
from collections.abc import Callable

from memory.context import DEFAULT_BLOCK_RECORDS, DEFAULT_BLOCK_TOKENS, RepoSource, read_memory
from memory.rules.visibility import Reader
from memory.stores.contract import MemoryStore


async def memory_context_block(
    store: MemoryStore,
    query: str,
    *,
    reader: Reader,
    organization: str,
    user_id: str | None = None,
    channel_id: str | None = None,
    repo: RepoSource = None,
    limit: int = DEFAULT_BLOCK_RECORDS,
    max_tokens: int = DEFAULT_BLOCK_TOKENS,
    clock: Callable[[], float] = time.time,
) -> str | None:
    """The Background memory block for one request, or None when nothing matched."""
    read = await read_memory(
        store,
        query,
        reader=reader,
        organization=organization,
        user_id=user_id,
        channel_id=channel_id,
        repo=repo,
        limit=limit,
        max_tokens=max_tokens,
        clock=clock,
    )
    return read.block
