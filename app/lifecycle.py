"""Graceful shutdown: on SIGTERM/SIGINT stop taking messages, wait for what is in flight, then exit.

What is "in flight": every active dispatch (which holds its slot until its post-run steps ran) and every
pending background task registered as a waiter (reflection, a surface's own event tasks). The wait is
bounded by a deadline (settings.shutdown_deadline_seconds, 15 minutes by default); a second signal
while draining stops waiting at once.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import structlog

log = structlog.get_logger("lifecycle")

DEFAULT_DEADLINE_SECONDS = 900.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)

Waiter = Callable[[], Awaitable[object]]


class Drainable(Protocol):
    """The dispatcher's side: stop taking messages, then report idle."""

    @property
    def active_run_count(self) -> int: ...

    def close(self) -> None: ...

    async def wait_idle(self) -> None: ...


class Lifecycle:
    def __init__(
        self,
        dispatcher: Drainable,
        *,
        deadline_seconds: float = DEFAULT_DEADLINE_SECONDS,
        waiters: Sequence[Waiter] = (),
        on_stop: Sequence[Callable[[], object]] = (),
    ) -> None:
        self._dispatcher = dispatcher
        self._deadline = deadline_seconds
        self._waiters = list(waiters)
        self._on_stop = list(on_stop)
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        self._installed: list[signal.Signals] = []

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def add_waiter(self, waiter: Waiter) -> None:
        """Something else the drain must wait for, after the dispatcher is idle (e.g. reflections)."""
        self._waiters.append(waiter)

    def add_on_stop(self, callback: Callable[[], object]) -> None:
        """Called once when the stop is requested (e.g. a surface disconnecting from its event source)."""
        self._on_stop.append(callback)

    def install_signal_handlers(self) -> None:
        """Route SIGTERM/SIGINT to `request_stop` (call from inside the running event loop)."""
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self.request_stop, sig.name)
            self._installed.append(sig)

    def remove_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            loop.remove_signal_handler(sig)
        self._installed.clear()

    def request_stop(self, reason: str = "requested") -> None:
        if self._stop.is_set():
            log.warning("lifecycle.forced", reason=reason)
            self._force.set()
            return
        log.info("lifecycle.stopping", reason=reason, active_runs=self._dispatcher.active_run_count)
        self._stop.set()
        self._dispatcher.close()
        for callback in self._on_stop:
            try:
                callback()
            except Exception as error:
                log.warning("lifecycle.on_stop_failed", error=type(error).__name__)

    async def wait_for_stop(self) -> None:
        await self._stop.wait()

    async def drain(self) -> bool:
        """Wait for active runs, then the waiters; True when all finished before the deadline."""
        self._dispatcher.close()
        started = time.monotonic()
        work = asyncio.ensure_future(self._wait_all())
        forced = asyncio.ensure_future(self._force.wait())
        try:
            done, _ = await asyncio.wait(
                {work, forced}, timeout=self._deadline, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            forced.cancel()
        finished = work in done
        if not finished:
            work.cancel()
            log.warning(
                "lifecycle.drain_incomplete",
                reason="forced" if self._force.is_set() else "deadline",
                active_runs=self._dispatcher.active_run_count,
                deadline_seconds=self._deadline,
            )
        else:
            log.info("lifecycle.drained", seconds=round(time.monotonic() - started, 3))
        await asyncio.gather(work, forced, return_exceptions=True)
        return finished

    async def settle(self) -> None:
        """Wait for what `drain` waits for (active runs, then the waiters, e.g. reflections) without
        stopping: messages keep being taken."""
        await self._wait_all()

    async def _wait_all(self) -> None:
        await self._dispatcher.wait_idle()
        for waiter in self._waiters:
            await waiter()
