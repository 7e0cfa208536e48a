"""The review queue's app side: the store it needs, and pending records expiring.

With `memory.review = "shared"` reflection's org, repo and channel writes wait as pending records
(memory/reflection/distill.py) until an admin approves them (commands/curate.py). A store that cannot
hold a record as pending is refused at start-up; a pending record nobody reviewed in
`memory.review_days` is erased, at start-up and then at most once an hour, as reflections run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from config.settings import ConfigError, Settings
from memory.stores.contract import MemoryStore

log = structlog.get_logger("memory")

DAY_SECONDS = 86_400.0
# How often a running bot sweeps expired pending records (start-up sweeps first).
SWEEP_INTERVAL_SECONDS = 3_600.0


def review_shared(settings: Settings) -> bool:
    """True when reflection's shared writes wait for an admin (memory on, review = shared)."""
    return settings.memory.enabled and settings.memory.review == "shared"


def check_review_store(settings: Settings, store: MemoryStore) -> None:
    """Refuse, in one line naming the setting, a review queue on a store that cannot keep one."""
    if review_shared(settings) and store.curation() is None:
        raise ConfigError(
            f"config error: memory.review = 'shared' needs a store that can hold records for review; "
            f"{type(store).__name__} cannot (set memory.review = 'off', or use the sqlite, postgres or "
            "in_process store or a memory service that can)"
        )


async def expire_pending(store: MemoryStore, review_days: float, *, now: float | None = None) -> int:
    """Erase the pending records older than `review_days`; a failure is one warning, never raised."""
    curating = store.curation()
    if curating is None:
        return 0
    cutoff = (time.time() if now is None else now) - review_days * DAY_SECONDS
    try:
        expired = await curating.expire_pending(cutoff)
    except Exception as error:
        log.warning("memory.pending_expiry_failed", error=type(error).__name__)
        return 0
    if expired:
        log.info("memory.pending_expired", expired=expired)
    return expired


class PendingSweep:
    """At most one expiry sweep per interval, started by whoever passes by (each reflection)."""

    def __init__(
        self,
        store: MemoryStore,
        review_days: float,
        *,
        clock: Callable[[], float] = time.time,
        interval: float = SWEEP_INTERVAL_SECONDS,
    ) -> None:
        self._store = store
        self._review_days = review_days
        self._clock = clock
        self._interval = interval
        self._last = clock()  # start-up has just swept

    def due(self) -> bool:
        """True (and the clock reset) when a sweep is due now."""
        now = self._clock()
        if now - self._last < self._interval:
            return False
        self._last = now
        return True

    async def sweep(self) -> int:
        return await expire_pending(self._store, self._review_days, now=self._clock())
