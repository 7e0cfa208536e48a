"""The dispatcher's memory steps for one run: the read that builds the block, its durable audit, and
the scopes a post-run step writes under. Every step is advisory: a failure costs the run its block or
its audit line, never its answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from app.audience import reader_for
from app.incoming import IncomingMessage
from config.settings import Settings
from memory.context import MemoryRead, read_memory
from memory.rules.scope import RequestScopes, list_scope_keys, request_scope_keys
from memory.stores.contract import MemoryStore
from memory.types import ReadAudit
from ops.metrics import Metrics
from ops.tracing import span

log = structlog.get_logger("dispatch")


async def read_for_run(
    store: MemoryStore,
    settings: Settings,
    message: IncomingMessage,
    query: str,
    repo: Awaitable[str | None],
    at: float,
    metrics: Metrics | None = None,
) -> MemoryRead | None:
    """The run's memory block, dated against the run's time `at`; a read that fails leaves the run
    without one, and a store that takes longer than `memory.timeout` adds nothing to it. `metrics`
    (the bot's /metrics) counts the read and its records, or its failure."""
    organization = settings.organization
    assert organization is not None
    with span("memory.read") as read_span:
        try:
            read = await read_memory(
                store,
                query,
                reader=reader_for(message),
                organization=organization,
                user_id=message.user_id,
                channel_id=message.channel_id,
                repo=repo,
                limit=settings.memory.limit,
                max_tokens=settings.memory.max_tokens,
                clock=lambda: at,
                store_wait=settings.memory.timeout,
            )
        except Exception as error:
            log.warning("memory.read_failed", error=type(error).__name__)
            read_span.set_attribute("error.type", type(error).__name__)
            if metrics is not None:
                metrics.memory_read_failures.inc()
            return None
        if metrics is not None:
            metrics.memory_reads.inc()
            metrics.memory_records_read.inc(len(read.records))
        read_span.set_attributes(
            {"memory.scopes": len(list_scope_keys(read.scopes)), "memory.records": len(read.records)}
        )
        return read


async def audit_read(
    store: MemoryStore,
    run_id: str,
    message: IncomingMessage,
    read: MemoryRead,
    clock: Callable[[], float],
) -> None:
    """The durable read audit: which records this run read (ids and ranks, never text)."""
    entry = ReadAudit(
        run_id=run_id,
        thread_key=message.thread_key,
        asker=message.user_id,
        scope_keys=tuple(list_scope_keys(read.scopes)),
        records=tuple((record.id, rank) for rank, record in enumerate(read.records, start=1)),
        at=clock(),
    )
    try:
        await store.record_read(entry)
    except Exception as error:
        log.warning("memory.audit_failed", run_id=run_id, error=type(error).__name__)


def run_scopes(
    settings: Settings, message: IncomingMessage, read: MemoryRead | None, repo: str | None
) -> RequestScopes | None:
    """The read's scopes; with memory off, the ones the message would have read (None without an org)."""
    if read is not None:
        return read.scopes
    if not settings.organization:
        return None
    try:
        return request_scope_keys(
            settings.organization, user_id=message.user_id, channel_id=message.channel_id, repo=repo
        )
    except ValueError:
        return None
