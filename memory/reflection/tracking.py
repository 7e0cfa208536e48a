"""Fire and forget, but never lost: reflections run as tracked tasks a shutdown drains."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import structlog

from memory.reflection.distill import ReflectionOutcome, reflect
from memory.reflection.prompt import Extract
from memory.reflection.run import ReflectionRun
from memory.rules.write_gate import WriteGate
from memory.stores.contract import MemoryStore

log = structlog.get_logger("memory")


class ReflectionTracker:
    """The reflections still in flight, so a shutdown can wait for them and no run's learning is lost
    to a restart. One per process."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def pending_reflection_count(self) -> int:
        return len(self._tasks)

    def track(self, task: asyncio.Task[Any]) -> None:
        """Count `task` until it settles, whichever way."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, deadline: float | None = None) -> int:
        """Wait up to `deadline` seconds (None: as long as it takes) for every pending reflection.

        Reflections scheduled while draining are waited for too. Returns how many are still pending.
        """
        loop = asyncio.get_running_loop()
        end = None if deadline is None else loop.time() + deadline
        while self._tasks:
            remaining = None if end is None else end - loop.time()
            if remaining is not None and remaining <= 0:
                break
            await asyncio.wait(set(self._tasks), timeout=remaining)
        return len(self._tasks)


def schedule_reflection(
    tracker: ReflectionTracker,
    run: ReflectionRun,
    *,
    store: MemoryStore,
    extract: Extract,
    model: str,
    gate: WriteGate,
    review_shared: bool = False,
) -> asyncio.Task[ReflectionOutcome | None]:
    """Start the reflection as a tracked task and return at once; a failure is one warning."""
    work = reflect(run, store=store, extract=extract, model=model, gate=gate, review_shared=review_shared)
    task = asyncio.create_task(
        _guarded(work, run),
        name=f"reflection:{run.run_id or run.thread_key}",
    )
    tracker.track(task)
    return task


async def _guarded(work: Awaitable[ReflectionOutcome], run: ReflectionRun) -> ReflectionOutcome | None:
    try:
        return await work
    except Exception as error:
        log.warning(
            "memory.reflection_failed",
            stage="reflect",
            error=type(error).__name__,
            run_id=run.run_id,
            thread_key=run.thread_key,
        )
        return None
