"""This replica's scope indexes (`memory.ranking.scope_index.ScopeIndex`), kept in step with the
database by the change feed (memory/stores/postgres/changes.py): a retrieve catches its scopes up in one
round trip — no row when nothing changed — and scores each whole scope in process, so its cost hardly
grows with the scope and it ranks exactly as the in-process and SQLite stores do.

Only active rows are ever indexed: a row of any other status (superseded, forgotten, evicted, pending)
leaves its scope's index the moment a catch-up reads it. A scope's entry is touched only under its
lock (`locked`), from the catch-up's read to the ranking, and while its held-back usage bumps are
written.

A retrieve's usage bumps are held back (memory/stores/postgres/held_bumps.py) and laid over the index at
once, and over every row a later catch-up reads until they are written: the index is always the
database's rows plus this replica's unwritten bumps, so it ranks as an immediate bump would leave it.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import threading
import zlib
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from psycopg.rows import TupleRow

from memory.ranking.fusion import Ranked
from memory.ranking.lexical import forget_cached_texts, record_stems
from memory.ranking.scope_index import Candidate, ScopeIndex
from memory.ranking.vectors import from_blob
from memory.stores.postgres.changes import Changes, Since
from memory.stores.postgres.held_bumps import HeldBumps
from memory.stores.postgres.rows import row_record
from memory.stores.postgres.sql import _COLUMN_COUNT
from memory.stores.sql_common import bumped
from memory.types import MemoryRecord

# Scopes whose index a replica keeps (least recently read dropped first), as the SQLite store keeps
# its open scopes; and the lock stripes every scope key hashes to.
SCOPES_KEPT: Final = 64
_STRIPES: Final = 64
# A scope's transactions read whole since its xmin: past this many, forgotten (only costs re-reads).
_SEEN_KEPT: Final = 1024
# The `memory_meta` key a person's erasure stamps (no key of theirs in it): a replica that sees it move
# lets go of every person's scope it indexed, since the moved scope's catch-up reads nothing. Looked at
# at most once a `PERSONS_MOVED_POLL_SECONDS` by a read of a person's indexed scope.
PERSONS_MOVED: Final = "persons_moved"
PERSONS_MOVED_POLL_SECONDS: Final = 1.0


@dataclass(slots=True)
class SyncedScope:
    """A scope's index, as of a snapshot whose xmin is `xmin`, and the transactions since then whose
    rows it holds already (`seen`)."""

    index: ScopeIndex
    xmin: int
    seen: set[int] = field(default_factory=set)


class ScopeIndexes:
    """The scope indexes of one store (one replica), least recently read dropped past `capacity`."""

    def __init__(self, embedder_name: str | None, capacity: int = SCOPES_KEPT) -> None:
        self._model = embedder_name
        self._capacity = capacity
        self._scopes: OrderedDict[str, SyncedScope] = OrderedDict()
        # The table itself is touched from the loop and from worker threads ranking other scopes.
        self._table = threading.Lock()
        self._locks = [asyncio.Lock() for _ in range(_STRIPES)]
        # The same stripes for the worker threads: a reader cancelled while its thread still ranks
        # releases its asyncio lock, and the next reader's thread must not touch the index meanwhile.
        self._thread_locks = [threading.Lock() for _ in range(_STRIPES)]
        # This replica's usage bumps not yet written, per scope (kept when a scope's index is dropped).
        self.bumps = HeldBumps()
        # The scopes whose locks are held, and by how many holders: never dropped past `capacity`
        # meanwhile, or a reader's catch-up (the rows changed since its index) would be applied to an
        # empty index and leave it holding those rows alone.
        self._pinned: Counter[str] = Counter()
        # Scopes to read afresh at their next read (`let_go_of_person_scopes`).
        self._stale: set[str] = set()

    def __contains__(self, scope_key: object) -> bool:
        with self._table:
            return scope_key in self._scopes

    def _get(self, scope_key: str) -> SyncedScope | None:
        with self._table:
            return self._scopes.get(scope_key)

    @contextlib.asynccontextmanager
    async def locked(self, scope_keys: Iterable[str]) -> AsyncIterator[None]:
        """The scopes' locks, taken in one order (no two readers deadlock) and released together; the
        scopes' indexes are kept while they are held."""
        keys = builtins.list(scope_keys)
        async with contextlib.AsyncExitStack() as stack:
            for stripe in _stripes(keys):
                await stack.enter_async_context(self._locks[stripe])
            with self._table:
                self._pinned.update(keys)
            try:
                yield
            finally:
                with self._table:
                    self._pinned -= Counter(keys)  # a count that reaches 0 leaves the counter

    @contextlib.contextmanager
    def held(self, scope_keys: Iterable[str]) -> Iterator[None]:
        """The scopes' thread locks, around every change to their indexes and every ranking of them."""
        with contextlib.ExitStack() as stack:
            for stripe in _stripes(scope_keys):
                stack.enter_context(self._thread_locks[stripe])
            yield

    def since(self, scope_key: str) -> Since | None:
        """Where the scope's index stands (None: no index kept, or one marked to be read afresh, now
        let go). The caller holds the scope's lock."""
        with self._table:
            if scope_key in self._stale:
                self._stale.discard(scope_key)
                self._scopes.pop(scope_key, None)
            synced = self._scopes.get(scope_key)
        return None if synced is None else (synced.xmin, frozenset(synced.seen))

    def apply(self, scope_key: str, changes: Changes) -> ScopeIndex:
        """The scope's index with the changes applied (on a worker thread: a full load decodes the
        whole scope). The caller holds the scope's lock."""
        synced = self._get(scope_key)
        try:
            if synced is None or changes.full:
                synced = SyncedScope(ScopeIndex(), changes.xmin)
                self._put(scope_key, synced.index, changes.rows)
            else:
                seen = self._take_deleted(synced.index, changes.deleted)
                seen |= self._put(scope_key, synced.index, changes.rows)
                synced.seen = {xid for xid in synced.seen | seen if xid >= changes.xmin}
                if len(synced.seen) > _SEEN_KEPT:
                    synced.seen.clear()
                synced.xmin = changes.xmin
        except BaseException:
            self.drop(scope_key)  # half applied: read afresh next time
            raise
        with self._table:
            self._scopes[scope_key] = synced
            self._scopes.move_to_end(scope_key)
            self._drop_past_capacity()
        return synced.index

    def hold(self, scope_key: str, picked: Sequence[Candidate], now: float) -> builtins.list[Ranked]:
        """A retrieve's usage bumps held back, and laid over the scope's index at once; the picked
        records as the bump leaves them (used `now`, once more: the one copy the index and the reader
        share, as a read copies every record it returns). The caller holds the scope's lock."""
        with self.held([scope_key]):
            self.bumps.add(scope_key, [c.record.id for c in picked], now)
            synced = self._get(scope_key)
            found = bumped([Ranked(c.record, c.relevance) for c in picked], now)
            if synced is not None:
                for c, item in zip(picked, found, strict=True):
                    synced.index.set_record(c.seq, item.record)  # a seq it no longer holds: nothing
            return found

    def read_back(self, scope_key: str, usage: Sequence[TupleRow]) -> None:
        """Usage rows this replica's own flush just wrote, as it returned them (seq, last use, use
        count, stamp): laid on the records the index holds, and that flush counted as read (it changed
        only these rows; any other transaction's change to them is in what it returned)."""
        with self.held([scope_key]):
            synced = self._get(scope_key)
            if synced is None:
                return
            for seq, used_at, uses, changed_xid in usage:
                held = synced.index.record(int(seq))
                # Mostly the index holds these already (the flight was laid over it): left as it is.
                if held is not None and (held.last_used_at, held.use_count) != (used_at, uses):
                    record = replace(held, last_used_at=used_at, use_count=int(uses))
                    synced.index.set_record(int(seq), self.bumps.overlay(scope_key, record))
                if int(changed_xid) >= synced.xmin:
                    synced.seen.add(int(changed_xid))

    def _drop_past_capacity(self) -> None:
        """The least recently read scopes past `capacity`, but never one whose lock is held (the
        caller holds `_table`)."""
        excess = len(self._scopes) - self._capacity
        if excess <= 0:
            return
        for key in [key for key in self._scopes if key not in self._pinned][:excess]:
            del self._scopes[key]

    def let_go_of_person_scopes(self) -> None:
        """Every person's scope indexed here is read afresh at its next read (a person's erasure
        elsewhere moved one away, and its catch-up would read nothing): marked now, let go under its own
        lock by `since`, so no reader holding it meanwhile sees its index vanish mid-read."""
        with self._table:
            self._stale.update(key for key in self._scopes if key.startswith("user:"))

    def drop(self, scope_key: str) -> None:
        with self._table:
            self._scopes.pop(scope_key, None)
            self._stale.discard(scope_key)

    @staticmethod
    def _take_deleted(index: ScopeIndex, deleted: Sequence[tuple[int, int]]) -> builtins.set[int]:
        """The deleted rows out of the index; the transactions that deleted them."""
        for seq, _ in deleted:
            index.remove(seq)
        return {xid for _, xid in deleted}

    def _put(self, scope_key: str, index: ScopeIndex, rows: Sequence[TupleRow]) -> builtins.set[int]:
        """Each row into the index (an active one (re)indexed with the unwritten bumps laid over it, any
        other removed), in seq order as a full load leaves them; the transactions that wrote them."""
        xids: builtins.set[int] = set()
        forgot = False  # a row forgotten, perhaps by another replica: its words go from memory too
        for row in sorted(rows, key=lambda found: int(found[0])):
            seq, record = row_record(row[:_COLUMN_COUNT])
            stems, embedding, model, *stamps = row[_COLUMN_COUNT:]  # the record's, its usage row's
            xids.update(int(xid) for xid in stamps if xid is not None)
            if record.status != "active":
                forgot = forgot or record.status == "forgotten"
                index.remove(seq)
                continue
            record = self.bumps.overlay(scope_key, record)
            has_vector = embedding is not None and model is not None and model == self._model
            held = index.record(seq)
            if held is not None and index.has_vector(seq) == has_vector and _same_but_usage(held, record):
                index.set_record(seq, record)  # a usage bump: no slot moves, nothing to re-add
                continue
            vector = from_blob(bytes(embedding)) if has_vector else None
            index.add(seq, record, frozenset(stems) if stems is not None else record_stems(record), vector)
        if forgot:
            forget_cached_texts()
        return xids


def _same_but_usage(held: MemoryRecord, record: MemoryRecord) -> bool:
    """The same record as the index holds but for its usage counts (same text: the same vector)."""
    return replace(held, last_used_at=record.last_used_at, use_count=record.use_count) == record


def _stripes(scope_keys: Iterable[str]) -> builtins.list[int]:
    return sorted({zlib.crc32(key.encode()) % _STRIPES for key in scope_keys})
