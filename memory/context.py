"""The read path: every scope of the request in one pool, one budget, one advisory block."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from memory.ranking.fusion import merge_score, time_window
from memory.rules.scope import (
    RequestScopes,
    derive_scope_key,
    list_scope_keys,
    request_scope_keys,
    scope_kind,
)
from memory.rules.scorer import budget_memory_block
from memory.rules.visibility import Reader, may_show
from memory.stores.contract import MemoryStore
from memory.types import MemoryRecord, Ranked
from ops.tracing import span

log = structlog.get_logger("memory")

DEFAULT_BLOCK_RECORDS = 8
DEFAULT_BLOCK_TOKENS = 800

RepoSource = Awaitable[str | None] | str | None
_Found = dict[str, list[Ranked]]


@dataclass(frozen=True, slots=True)
class MemoryRead:
    """The block (None when nothing matched) and the scopes that were read to build it."""

    block: str | None
    scopes: RequestScopes
    scope_keys: tuple[str, ...]  # `scopes` as keys, widest first: what was read, in the block's order
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
    limit: int = DEFAULT_BLOCK_RECORDS,
    max_tokens: int = DEFAULT_BLOCK_TOKENS,
    clock: Callable[[], float] = time.time,
    store_wait: float | None = None,
) -> MemoryRead:
    """The request's scopes from who asked and where, then `read_scopes`; when the repo is still
    resolving, org, channel and user go at once and the repo follows in a second hop.

    A hop whose store takes longer than `store_wait` seconds reads as nothing, as a failing one does
    (only the store's call is given up: the repo's resolution, which the run awaits too, is waited for
    as long as it takes).
    """
    try:
        scopes = request_scope_keys(organization, user_id=user_id, channel_id=channel_id)
    except ValueError:
        if inspect.iscoroutine(repo):
            repo.close()  # never awaited now: close it rather than leave a warning behind
        raise
    if isinstance(repo, str | None):  # known already: every scope in one hop
        scopes = await scopes_with_repo(scopes, repo)
        return await read_scopes(
            store,
            query,
            reader=reader,
            scopes=scopes,
            limit=limit,
            max_tokens=max_tokens,
            clock=clock,
            store_wait=store_wait,
        )
    return await read_scopes(
        store,
        query,
        reader=reader,
        scopes=scopes,
        later=scopes_with_repo(scopes, repo),
        limit=limit,
        max_tokens=max_tokens,
        clock=clock,
        store_wait=store_wait,
    )


async def read_scopes(
    store: MemoryStore,
    query: str,
    *,
    reader: Reader,
    scopes: RequestScopes,
    later: Awaitable[RequestScopes] | None = None,
    limit: int = DEFAULT_BLOCK_RECORDS,
    max_tokens: int = DEFAULT_BLOCK_TOKENS,
    clock: Callable[[], float] = time.time,
    store_wait: float | None = None,
) -> MemoryRead:
    """Every scope of `scopes` in one hop to the store (`retrieve_many`: one query embedding). `later`
    is the same scopes once the repo resolved: the scopes it adds follow in a second hop while the
    first is under way (without `later`, `scopes` is all there is).

    Each hop is a `memory.retrieve` span started from the caller's context (the caller's
    `memory.read`), naming the kinds of scope it read. The pool is merged by each record's relevance
    (as its store ranked it) with its recency, since each store ranked only its own scopes and the
    usage bump of this very read changes what is recent.

    Only records the reply's `reader` may see (memory/rules/visibility.py) enter the pool: what the read
    rule refuses never takes a slot of the limit or the budget.

    A hop whose store takes longer than `store_wait` seconds reads as nothing, as a failing one does.
    """
    keys = list_scope_keys(scopes)
    found: dict[str, list[Ranked]] = {}
    if later is None:
        found = await _retrieve_many(store, keys, query, limit, store_wait)
        order = keys
    else:
        first = asyncio.create_task(_retrieve_many(store, keys, query, limit, store_wait))
        try:
            scopes = await later
            order = list_scope_keys(scopes)
            added = [key for key in order if key not in keys]
            if added:
                found.update(await _retrieve_many(store, added, query, limit, store_wait))
            found.update(await first)
        finally:  # a cancelled read leaves no retrieve running behind it
            first.cancel()
    pool = [item for key in order for item in found.get(key, []) if may_show(item.record, reader)]
    if not pool:
        return MemoryRead(block=None, scopes=scopes, scope_keys=tuple(order))
    now = clock()
    window = time_window(query, now)  # the run's time: the same window the stores ranked with
    ranked = sorted(pool, key=lambda item: -merge_score(item, now, window))  # stable: org first on ties
    block = budget_memory_block([item.record for item in ranked], order, limit, max_tokens, today=now)
    return MemoryRead(block=block.text, scopes=scopes, scope_keys=tuple(order), records=block.records)


async def scopes_with_repo(scopes: RequestScopes, repo: RepoSource) -> RequestScopes:
    """The request's scopes once its repo resolved: `scopes` with the repo's scope, or as they are when
    the repo resolves to nothing, fails or is no valid name (a warning, never an error)."""
    return _with_repo(scopes, await _resolve_repo(repo))


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


def _with_repo(scopes: RequestScopes, repo_key: str | None) -> RequestScopes:
    if repo_key is None:
        return scopes
    return RequestScopes(org=scopes.org, repo=repo_key, channel=scopes.channel, user=scopes.user)


async def _retrieve_many(
    store: MemoryStore, scope_keys: list[str], query: str, limit: int, store_wait: float | None
) -> dict[str, list[Ranked]]:
    """Retrieval is advisory: a failing store, or one slower than `store_wait` seconds, reads as
    nothing, with one warning."""
    kinds = [scope_kind(key) for key in scope_keys]
    with span("memory.retrieve", {"memory.scope_kinds": ",".join(kinds)}) as retrieve_span:
        try:
            found = await _within(store_wait, store.retrieve_many(scope_keys, query, limit))
        except Exception as error:
            log.warning("memory.retrieve_failed", scope_keys=scope_keys, error=type(error).__name__)
            retrieve_span.set_attribute("error.type", type(error).__name__)
            return {}
        retrieve_span.set_attribute("memory.records", sum(len(ranked) for ranked in found.values()))
        return found


async def _within(seconds: float | None, retrieve: Awaitable[_Found]) -> _Found:
    """`retrieve`'s result, or TimeoutError after `seconds` (None: no limit). The retrieve is then
    cancelled but not waited for: a store whose server went silent (a link lost without a word) may
    take longer to let go of its query than the run may wait for memory. (The task costs about 15 µs
    a hop, so without a limit the retrieve is awaited as it is.)"""
    if seconds is None:
        return await retrieve
    task = asyncio.ensure_future(retrieve)
    done: set[asyncio.Future[_Found]] = set()
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    finally:  # timed out, or the read itself cancelled
        if not done:
            task.cancel()
            task.add_done_callback(_settled)
    if not done:
        raise TimeoutError(f"the store took longer than {seconds:g} s")
    return task.result()


def _settled(task: asyncio.Future[_Found]) -> None:
    """Take a cancelled retrieve's outcome, so an error it ended with is no 'never retrieved' warning."""
    if not task.cancelled():
        task.exception()
