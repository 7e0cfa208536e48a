"""The dispatcher's memory steps for one run: the read that builds the block and its durable audit.
Every step is advisory: a failure costs the run its block or its audit line, never its answer."""

from __future__ import annotations

from collections.abc import Callable

import structlog

from app.run_context import RunContext
from config.settings import Settings
from memory.context import MemoryRead, read_scopes
from memory.rules.scope import RequestScopes
from memory.stores.contract import MemoryStore
from memory.types import ReadAudit
from ops.metrics import Metrics
from ops.tracing import span

log = structlog.get_logger("dispatch")


async def read_for_run(
    store: MemoryStore,
    settings: Settings,
    context: RunContext,
    query: str,
    at: float,
    metrics: Metrics | None = None,
) -> MemoryRead | None:
    """The run's memory block, dated against the run's time `at`; a read that fails leaves the run
    without one, and a store that takes longer than `memory.timeout` adds nothing to it. `metrics`
    (the bot's /metrics) counts the read and its records, or its failure."""
    with span("memory.read") as read_span:
        try:
            if context.request.scopes is None:
                raise ValueError("the request reaches no scope (no valid organization or ids)")
            read = await read_scopes(
                store,
                query,
                reader=context.reader,
                scopes=context.request.scopes,
                later=_scopes_of(context),
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
        read_span.set_attributes({"memory.scopes": len(read.scope_keys), "memory.records": len(read.records)})
        return read


async def _scopes_of(context: RunContext) -> RequestScopes:
    scopes = await context.scopes
    assert scopes is not None  # the request's scopes were, so the bound ones are
    return scopes


async def audit_read(
    store: MemoryStore,
    run_id: str,
    context: RunContext,
    read: MemoryRead,
    clock: Callable[[], float],
) -> None:
    """The durable read audit: which records this run read (ids and ranks, never text)."""
    entry = ReadAudit(
        run_id=run_id,
        thread_key=context.message.thread_key,
        asker=context.message.user_id,
        scope_keys=read.scope_keys,
        records=tuple((record.id, rank) for rank, record in enumerate(read.records, start=1)),
        at=clock(),
    )
    try:
        await store.record_read(entry)
    except Exception as error:
        log.warning("memory.audit_failed", run_id=run_id, error=type(error).__name__)
