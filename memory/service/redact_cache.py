"""Redaction on the way out, remembered: the service's retrieves return the same records again and again.

`redact_record` is pure over a record's text and keywords, and without a cache it runs on every record
of every reply (eight a /retrieve), the largest share of the service's own work per request. This cache keeps
each record's redacted text and keywords under its scope key and id, beside the text and keywords they
were made from, and answers only when the record the store just returned has exactly that text and
those keywords. So:

- it never serves a forgotten or erased record: an entry is only ever read back for a record the store
  has just returned, and only its redaction is taken from the cache, everything else from the store;
- it never crosses scopes: the scope key is part of the key;
- a changed text is a miss (recomputed), never a stale redaction;
- it is bounded by the characters it holds (LRU), and the service drops a scope's entries on every
  write, forget or erasure there (everything on an erasure it cannot place), so erased text does not
  stay in memory. A second service process over the same database does not tell this one; its entries
  then wait for the LRU, still unservable.

Touched from the event loop only; the misses are redacted on a worker thread (CPU work on stored text).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory.rules.redact import redact_record
from memory.types import MemoryRecord

# A million characters (each entry's text and keywords, and its redaction where that differs): some
# thousands of records at the sizes the bot writes, a few hundred at the 4,000-character maximum.
DEFAULT_MAX_CHARS = 1_000_000
ENTRY_OVERHEAD = 64  # what an entry costs besides its characters, in the same units


@dataclass(frozen=True, slots=True)
class _Entry:
    text: str
    keywords: tuple[str, ...]
    redacted_text: str
    redacted_keywords: tuple[str, ...]
    cost: int


class RedactionCache:
    """`redact_record` for the records a store returned, remembered per (scope key, record id)."""

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {max_chars!r}")
        self._max_chars = max_chars
        self._chars = 0
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._by_scope: dict[str, set[str]] = {}
        self._epoch = 0  # moves on every drop: a redaction begun before it is not stored after it

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def chars(self) -> int:
        """What the entries hold now (at most `max_chars`)."""
        return self._chars

    @property
    def epoch(self) -> int:
        """Take it before reading the store: `redact(…, since=epoch)` then stores nothing a drop came
        after (a forget that committed after the read but finished before the reply)."""
        return self._epoch

    async def redact(self, records: Sequence[MemoryRecord], since: int | None = None) -> list[MemoryRecord]:
        """Every record redacted, in order: from the cache where it has this exact text, else computed.
        What is computed is remembered only if nothing was dropped since `since` (default: now)."""
        out = [self._cached(record) for record in records]
        missing = [index for index, found in enumerate(out) if found is None]
        if missing:
            epoch = self._epoch if since is None else since
            made = await asyncio.to_thread(_redact_each, [records[index] for index in missing])
            for index, redacted in zip(missing, made, strict=True):
                out[index] = redacted
                if epoch == self._epoch:
                    self._store(records[index], redacted)
        return [record for record in out if record is not None]

    def forget(self, scope_key: str, record_id: str) -> None:
        self._epoch += 1
        self._drop((scope_key, record_id))

    def forget_scope(self, scope_key: str) -> None:
        self._epoch += 1
        for record_id in list(self._by_scope.get(scope_key, ())):
            self._drop((scope_key, record_id))

    def clear(self) -> None:
        self._epoch += 1
        self._entries.clear()
        self._by_scope.clear()
        self._chars = 0

    def _cached(self, record: MemoryRecord) -> MemoryRecord | None:
        key = (record.scope_key, record.id)
        entry = self._entries.get(key)
        if entry is None or entry.text != record.text or entry.keywords != record.keywords:
            return None
        self._entries.move_to_end(key)
        if entry.redacted_text is entry.text and entry.redacted_keywords is entry.keywords:
            return record  # nothing to redact (the usual case): the record itself, no copy
        return replace(record, text=entry.redacted_text, keywords=entry.redacted_keywords)

    def _store(self, record: MemoryRecord, redacted: MemoryRecord) -> None:
        cost = ENTRY_OVERHEAD + _chars(record.text, record.keywords)
        # Unchanged (the usual case): hold the one copy, count it once.
        text = record.text if redacted.text == record.text else redacted.text
        keywords = record.keywords if redacted.keywords == record.keywords else redacted.keywords
        if text is not record.text or keywords is not record.keywords:
            cost += _chars(text, keywords)
        if cost > self._max_chars:
            return
        key = (record.scope_key, record.id)
        self._drop(key)
        self._entries[key] = _Entry(record.text, record.keywords, text, keywords, cost)
        self._by_scope.setdefault(record.scope_key, set()).add(record.id)
        self._chars += cost
        while self._chars > self._max_chars:
            oldest = next(iter(self._entries))
            self._drop(oldest)

    def _drop(self, key: tuple[str, str]) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self._chars -= entry.cost
        scope_key, record_id = key
        ids = self._by_scope.get(scope_key)
        if ids is not None:
            ids.discard(record_id)
            if not ids:
                del self._by_scope[scope_key]


def _redact_each(records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    return [redact_record(record) for record in records]


def _chars(text: str, keywords: tuple[str, ...]) -> int:
    return len(text) + sum(len(keyword) for keyword in keywords)
