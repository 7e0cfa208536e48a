"""Bounded in-memory memories of the Slack adapter: seen events, claimed messages, bot threads, caches.

Each is an insertion-ordered dict with a time-to-live and a size cap, so a long-running process never
grows without bound and a retry that arrives within the TTL is still recognised.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    """Key → value for `ttl` seconds, at most `max_size` entries (the oldest go first)."""

    def __init__(self, *, ttl: float, max_size: int, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= 0 or max_size <= 0:
            raise ValueError("ttl and max_size must be positive")
        self._ttl = ttl
        self._max_size = max_size
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._items)

    def get(self, key: str) -> V | None:
        self._expire()
        item = self._items.get(key)
        return item[1] if item is not None else None

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def put(self, key: str, value: V) -> None:
        self._items.pop(key, None)
        self._items[key] = (self._clock() + self._ttl, value)
        while len(self._items) > self._max_size:
            self._items.popitem(last=False)

    def discard(self, key: str) -> None:
        self._items.pop(key, None)

    def _expire(self) -> None:
        now = self._clock()
        while self._items:
            key, (expires, _) = next(iter(self._items.items()))
            if expires > now:
                break
            del self._items[key]


class RecentKeys:
    """A set that remembers keys for `ttl` seconds; `claim` is the atomic check-and-add that makes a
    second delivery of the same event (or the same message under two event types) a no-op."""

    def __init__(self, *, ttl: float, max_size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._cache: TtlCache[bool] = TtlCache(ttl=ttl, max_size=max_size, clock=clock)

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: str) -> bool:
        return key in self._cache

    def claim(self, key: str) -> bool:
        """True the first time `key` is seen within the TTL, False on every repeat."""
        if key in self._cache:
            return False
        self._cache.put(key, True)
        return True

    def add(self, key: str) -> None:
        self._cache.put(key, True)

    def discard(self, key: str) -> None:
        self._cache.discard(key)
