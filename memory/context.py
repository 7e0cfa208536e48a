"""The read path: every scope of the request in one pool, one budget, one advisory block."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from memory.scope import RequestScopes, derive_scope_key, list_scope_keys, request_scope_keys, scope_kind
from memory.scorer import budget_memory_block, query_tokens, score_record
from memory.types import MemoryRecord, MemoryStore
from memory.visibility import Reader, may_show
from ops.tracing import span

log = structlog.get_logger("memory")

DEFAULT_LIMIT = 8
DEFAULT_MAX_TOKENS = 800

RepoSource = Awaitable[str | None] | str | None


@dataclass(frozen=True, slots=True)
class MemoryRead:
    """The block (None when nothing matched) and the scopes that were read to build it."""

    block: str | None
    scopes: RequestScopes
    records: tuple[MemoryRecord, ...] = ()


async def read_memory(
    store: MemoryStore,
    query: str,
    *,
    reader: Reader,
    organization: str,
    user_id: str | None = None,
    channel_id: str | None = None,
    repo: RepoSource = None,
    limit: int = DEFAULT_LIMIT,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    clock: Callable[[], float] = time.time,
) -> MemoryRead:
    """Org, channel and user are fetched at once, in parallel; the repo joins when it resolves.

    Each scope's retrieve is a `memory.retrieve` span started from the caller's context, so every
    scope has the same parent (the caller's `memory.read`).

    Only records the reply's `reader` may see (memory/visibility.py) enter the pool: what the read rule
    refuses never takes a slot of the limit or the budget.
    """
    try:
        scopes = request_scope_keys(organization, user_id=user_id, channel_id=channel_id)
    except ValueError:
        if inspect.iscoroutine(repo):
            repo.close()  # never awaited now: close it rather than leave a warning behind
        raise
    fetches = {
        key: asyncio.create_task(_retrieve(store, key, query, limit)) for key in list_scope_keys(scopes)
    }
    try:
        repo_key = await _resolve_repo(repo)
        if repo_key is not None:
            scopes = RequestScopes(org=scopes.org, repo=repo_key, channel=scopes.channel, user=scopes.user)
            fetches[repo_key] = asyncio.create_task(_retrieve(store, repo_key, query, limit))
        found = {key: await task for key, task in fetches.items()}
    finally:  # a cancelled read leaves no retrieve running behind it
        for task in fetches.values():
            task.cancel()
    order = list_scope_keys(scopes)
    pool = [record for key in order for record in found.get(key, []) if may_show(record, reader)]
    if not pool:
        return MemoryRead(block=None, scopes=scopes)
    now = clock()
    wanted = query_tokens(query)
    ranked = sorted(pool, key=lambda record: -score_record(record, wanted, now))
    block = budget_memory_block(ranked, order, limit, max_tokens)
    return MemoryRead(block=block.text, scopes=scopes, records=block.records)


async def memory_context_block(
    store: MemoryStore,
    query: str,
    *,
    reader: Reader,
    organization: str,
    user_id: str | None = None,
    channel_id: str | None = None,
    repo: RepoSource = None,
    limit: int = DEFAULT_LIMIT,
    max_tokens: int = DEFAULT_MAX_TOKENS,
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


async def _resolve_repo(repo: RepoSource) -> str | None:
    """A repo that resolves to nothing, or fails, just means no repo scope."""
    try:
        name = await repo if not isinstance(repo, str | None) else repo
    except Exception as error:  # the read never fails for the repo
        log.warning("memory.repo_unresolved", error=type(error).__name__)
        return None
    if not name:
        return None
    try:
        return derive_scope_key("repo", name)
    except ValueError:
        log.warning("memory.repo_invalid")
        return None


async def _retrieve(store: MemoryStore, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
    """Retrieval is advisory: a failing store reads as nothing, with one warning."""
    with span("memory.retrieve", {"memory.scope_kind": scope_kind(scope_key)}) as retrieve_span:
        try:
            records = await store.retrieve(scope_key, query, limit)
        except Exception as error:
            log.warning("memory.retrieve_failed", scope_key=scope_key, error=type(error).__name__)
            retrieve_span.set_attribute("error.type", type(error).__name__)
            return []
        retrieve_span.set_attribute("memory.records", len(records))
        return records
