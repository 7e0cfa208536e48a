"""The work the Slack surface starts after an ack (answers, lookups, erasures), kept where shutdown
can wait for it: every listener acknowledges at once and hands its work to `BackgroundTasks.spawn`."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol


class Spawn(Protocol):
    """Start a background task that shutdown waits for (`BackgroundTasks.spawn`)."""

    def __call__(self, coro: Coroutine[Any, Any, None], name: str) -> None: ...


class BackgroundTasks:
    """The set of started tasks: `drain` waits for them, `cancel` ends them."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        return sum(1 for task in self._tasks if not task.done())

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, within: float | None = None) -> bool:
        """Wait for every started task; True when all finished within `within` seconds."""
        while self._tasks:
            pending = [task for task in self._tasks if not task.done()]
            if not pending:
                break
            _, still = await asyncio.wait(pending, timeout=within)
            if still:
                return False
        return True

    async def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
