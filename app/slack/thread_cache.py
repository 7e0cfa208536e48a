"""What the bot has already seen of each thread, so history rarely needs `conversations.replies`.

Since 2025 Slack rate-limits `conversations.history` / `.replies` hard for commercially distributed
apps outside the Marketplace. The bot receives every message of the conversations it is in as events,
and knows its own replies; a thread whose root it saw (or that it fetched once) is complete from then
on. Only a miss (never seen, evicted, after a restart) or a gap (a reply to a thread whose start it
never saw, an edit or deletion, more messages than it keeps) sends it back to Slack.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.slack.events import CONVERSATIONAL_SUBTYPES, thread_root

# A message as kept: what history_from_replies reads.
_FIELDS = ("ts", "thread_ts", "user", "bot_id", "text", "subtype")
_CHANGES = frozenset({"message_changed", "message_deleted"})


@dataclass
class _Thread:
    complete: bool
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    expires: float = 0.0


def _kept(message: Mapping[str, Any]) -> dict[str, Any]:
    return {name: message[name] for name in _FIELDS if message.get(name) is not None}


class ThreadCache:
    """Threads by key (at most `max_threads`, each for `ttl` seconds), each at most `max_messages`."""

    def __init__(
        self,
        *,
        max_threads: int = 5_000,
        max_messages: int = 500,
        ttl: float = 7 * 24 * 3600,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threads: OrderedDict[str, _Thread] = OrderedDict()
        self._max_threads = max_threads
        self._max_messages = max_messages
        self._ttl = ttl
        self._clock = clock

    def __len__(self) -> int:
        return len(self._threads)

    def observe(self, thread_key: str, event: Mapping[str, Any]) -> None:
        """A `message` event as it arrived (before any decision to answer it)."""
        subtype = event.get("subtype")
        if subtype in _CHANGES:  # an edit or deletion: what is kept may be stale
            self._threads.pop(thread_key, None)
            return
        if subtype not in CONVERSATIONAL_SUBTYPES and subtype != "bot_message":
            return
        ts = event.get("ts")
        if not isinstance(ts, str) or not ts:
            return
        thread = self._threads.get(thread_key)
        if thread is None:
            starts_thread = thread_root(event) == ts  # a root seen: nothing earlier is missing
            thread = self._touch(thread_key, _Thread(complete=starts_thread))
        self._add(thread, _kept(event), overwrite=False)

    def record_reply(self, thread_key: str, message: Mapping[str, Any]) -> None:
        """One of the bot's own replies, as posted (its event may arrive later, or with less text)."""
        thread = self._threads.get(thread_key)
        if thread is not None:
            self._add(thread, _kept(message), overwrite=True)

    def seed(self, thread_key: str, messages: Iterable[Mapping[str, Any]]) -> None:
        """A complete `conversations.replies` answer: the thread is whole from here on."""
        thread = self._touch(thread_key, _Thread(complete=True))
        for message in messages:
            self._add(thread, _kept(message), overwrite=True)

    def messages(self, thread_key: str) -> list[dict[str, Any]] | None:
        """The thread's messages when nothing is missing; None on a miss or a gap (fetch it)."""
        thread = self._threads.get(thread_key)
        if thread is None or thread.expires <= self._clock():
            self._threads.pop(thread_key, None)
            return None
        if not thread.complete:
            return None
        self._threads.move_to_end(thread_key)
        return list(thread.messages.values())

    def _touch(self, thread_key: str, thread: _Thread) -> _Thread:
        thread.expires = self._clock() + self._ttl
        self._threads[thread_key] = thread
        self._threads.move_to_end(thread_key)
        while len(self._threads) > self._max_threads:
            self._threads.popitem(last=False)
        return thread

    def _add(self, thread: _Thread, message: dict[str, Any], *, overwrite: bool) -> None:
        ts = message.get("ts")
        if not ts:
            return
        if ts in thread.messages and not overwrite:
            return
        thread.messages[ts] = message
        if len(thread.messages) > self._max_messages:  # more than is kept: the start is gone
            oldest = min(thread.messages, key=_ts_order)
            del thread.messages[oldest]
            thread.complete = False


def _ts_order(ts: str) -> tuple[int, int]:
    seconds, _, fraction = ts.partition(".")
    try:
        return int(seconds), int(fraction.ljust(6, "0")[:6])
    except ValueError:
        return (0, 0)
