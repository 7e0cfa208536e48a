"""What this process holds of its open scopes: each one's scope index, kept in step with the database,
its usage bumps not yet written (memory.stores.usage_bumps.py), and the rows the spec ranking's reads
decoded.

All are touched only under the scope's lock. The index follows the database by the change counter
every change but a usage bump moves (`sql.stamp`), by `PRAGMA data_version` (another connection
committed) and by `total_changes` (this one did). The decoded rows are let go whenever the change
counter moves (a forget or an erase moves it): after each operation of this process (`caught_up`)
and at the next read after another process's.
"""

from __future__ import annotations

import builtins
import functools
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from memory.ranking.embedder import Embedder
from memory.ranking.lexical import forget_cached_texts, record_stems
from memory.ranking.scope_index import ScopeIndex
from memory.ranking.vectors import from_blob
from memory.stores.sqlite.sql import (
    COLUMN_COUNT,
    R_COLUMNS,
    change_generation,
    chunks,
    placeholders,
    row_record,
    snapshot,
    transaction,
)
from memory.stores.usage_bumps import PendingBumps
from memory.types import (
    MemoryRecord,
)

log = structlog.get_logger("memory")

# Rows a scope keeps decoded for the spec ranking's reads (the others read the scope index): every
# active row of a scope at the default cap.
DECODED_ROWS = 512


@dataclass
class SyncedIndex:
    """A scope's index and the state of the database it reflects (touched only under the scope lock)."""

    index: ScopeIndex
    generation: int
    data_version: int = -1
    total_changes: int = -1
    usage_stale: bool = False  # a write of this process changed usage counts (a dedup)

    def current(self, data_version: int, total_changes: int) -> bool:
        return not self.usage_stale and (data_version, total_changes) == (
            self.data_version,
            self.total_changes,
        )


@dataclass(frozen=True)
class DecodedRows:
    """A scope's rows decoded for the spec ranking's reads, as of one change generation: a read
    meets the same candidate rows again and again, and an unchanged row (every column equal, so a
    bump is a different key) decodes to the same record."""

    generation: int
    decode: functools._lru_cache_wrapper[MemoryRecord]  # row_record, memoized


class OpenScopes:
    """The open scopes' indexes, pending bumps and decoded rows (each scope's entries touched only under
    its lock)."""

    def __init__(self, embedder: Embedder | None) -> None:
        self._embedder = embedder
        self.indexes: dict[str, SyncedIndex] = {}
        self.bumps: dict[str, PendingBumps] = {}
        self._decoded: dict[str, DecodedRows] = {}

    def decoder(
        self, connection: sqlite3.Connection, scope_key: str
    ) -> Callable[[tuple[Any, ...]], MemoryRecord]:
        """What decodes the scope's rows for a spec read, holding them while the scope's change
        generation stands; the caller holds the scope lock, inside the read's snapshot."""
        generation = change_generation(connection)
        self._let_go(scope_key, generation)
        held = self._decoded.get(scope_key)
        if held is None:
            held = DecodedRows(generation, functools.lru_cache(maxsize=DECODED_ROWS)(row_record))
            self._decoded[scope_key] = held
        return held.decode

    def caught_up(self, connection: sqlite3.Connection, scope_key: str) -> None:
        """What an operation of this process changed reaches what the process holds of the scope now:
        an erased record's text does not wait in memory for the scope's next read. The caller holds
        the scope lock."""
        if scope_key in self.indexes:
            self.synced_index(connection, scope_key)
        if scope_key in self._decoded:
            self._let_go(scope_key, change_generation(connection))

    def closed(self, scope_key: str) -> None:
        """The scope's connection is closed: nothing of it is held any longer (but its pending bumps,
        which the caller writes)."""
        self.indexes.pop(scope_key, None)
        self._let_go(scope_key, None)

    def clear(self) -> None:
        """Every scope's connection is closed."""
        self.indexes.clear()
        for scope_key in builtins.list(self._decoded):
            self._let_go(scope_key, None)

    def _let_go(self, scope_key: str, generation: int | None) -> None:
        """The scope's decoded rows let go unless they are of `generation` (None: in any case)."""
        held = self._decoded.get(scope_key)
        if held is not None and held.generation != generation:
            del self._decoded[scope_key]
            held.decode.cache_clear()

    def has_bumps(self, scope_key: str) -> bool:
        return scope_key in self.bumps

    def usage_changed(self, scope_key: str) -> None:
        """A write of this process changed usage counts (a dedup): no stamp marks it."""
        synced = self.indexes.get(scope_key)
        if synced is not None:
            synced.usage_stale = True

    def bump_later(self, scope_key: str, records: Sequence[MemoryRecord], used_at: float) -> bool:
        """Record a retrieve's bumps; True when the scope's pending bumps are due to be written."""
        now = time.monotonic()
        pending = self.bumps.setdefault(scope_key, PendingBumps(since=now))
        pending.add([record.id for record in records], used_at)
        return pending.due(time.monotonic())

    def overlay(self, scope_key: str, records: builtins.list[MemoryRecord]) -> builtins.list[MemoryRecord]:
        """What an immediate bump would have left in the rows."""
        pending = self.bumps.get(scope_key)
        return records if pending is None else [pending.overlay(record) for record in records]

    def write_bumps(self, connection: sqlite3.Connection, scope_key: str) -> None:
        """The scope's pending bumps in one transaction; the caller holds the scope lock."""
        pending = self.bumps.pop(scope_key, None)
        if pending is None:
            return
        synced = self.indexes.get(scope_key)
        in_step = synced is not None and synced.total_changes == connection.total_changes
        try:
            with transaction(connection):
                # The later use wins: another process sharing the file may have written a newer one.
                connection.executemany(
                    "UPDATE records SET last_used_at = MAX(COALESCE(last_used_at, ?1), ?1),"
                    " use_count = use_count + ?2 WHERE id = ?3",
                    pending.rows(),
                )
            if synced is not None and in_step:  # the index held these bumps already
                synced.total_changes = connection.total_changes
        except sqlite3.Error as error:  # usage counts only: the records themselves are untouched
            if synced is not None:
                synced.usage_stale = True
            log.warning(
                "memory.store.bumps_lost",
                scope_key=scope_key,
                records=len(pending.uses),
                error=type(error).__name__,
            )

    def synced_index(self, connection: sqlite3.Connection, scope_key: str) -> ScopeIndex:
        """The scope's index as of now; the caller holds the scope lock.

        Unchanged since the last look (no commit by another connection — `PRAGMA data_version` — and
        none by this one — `total_changes`), it is used as it is: no other SQL. Otherwise the records
        changed since its generation are read again (`stamp` marks each changed row), and after another
        connection's commit the active set itself is reconciled (`_reconcile_active`): a writer that
        stamps nothing — a process of an earlier release during a rolling upgrade — still cannot leave a
        forgotten record in the index.
        """
        synced = self.indexes.get(scope_key)
        data_version = int(connection.execute("PRAGMA data_version").fetchone()[0])
        if synced is not None and synced.current(data_version, connection.total_changes):
            return synced.index
        with snapshot(connection):
            generation = change_generation(connection)
            if synced is None:
                synced = SyncedIndex(self._load_index(connection, scope_key, None, ScopeIndex()), generation)
                self.indexes[scope_key] = synced
            else:
                if generation != synced.generation:
                    self._load_index(connection, scope_key, synced.generation, synced.index)
                if synced.usage_stale or data_version != synced.data_version:
                    self._reconcile_active(connection, scope_key, synced.index)
        synced.generation = generation
        synced.data_version = data_version
        synced.total_changes = connection.total_changes
        synced.usage_stale = False
        return synced.index

    def _load_index(
        self,
        connection: sqlite3.Connection,
        scope_key: str,
        since: int | None,
        index: ScopeIndex,
        *,
        seqs: Sequence[int] = (),
    ) -> ScopeIndex:
        """Every active record into a new index (`since` None), the rows changed after generation
        `since`, or the rows `seqs` names, into an existing one: an active row is (re)indexed, any
        other leaves it."""
        # A full load scans the active rows; a catch-up reads the changed ones by `records_changed`.
        if seqs:
            where, params = f"r.seq IN ({placeholders(len(seqs))})", tuple(seqs)
        elif since is None:
            where, params = "r.status = 'active'", ()
        else:
            where, params = "r.changed > ?", (since,)
        rows = connection.execute(
            f"SELECT r.seq, {R_COLUMNS}, r.embedding, r.embedding_model, s.stems FROM records AS r "
            f"LEFT JOIN records_stems AS s ON s.rowid = r.seq WHERE {where}",
            params,
        ).fetchall()
        rows.sort(key=lambda row: int(row[0]))  # slots in seq order, as a full load leaves them
        model = None if self._embedder is None else self._embedder.name
        pending = self.bumps.get(scope_key)
        forgot = False  # a row forgotten, perhaps by another process: its words go from memory too
        for row in rows:
            seq = int(row[0])
            record = row_record(row[1 : 1 + COLUMN_COUNT])
            if record.status != "active":
                forgot = forgot or record.status == "forgotten"
                index.remove(seq)
                continue
            embedding, embedding_model, stems = row[1 + COLUMN_COUNT :]
            vector = from_blob(embedding) if embedding is not None and embedding_model == model else None
            found = frozenset(str(stems).split()) if stems is not None else record_stems(record)
            if pending is not None:
                record = pending.overlay(record)
            index.add(seq, record, found, vector)
        if forgot:
            forget_cached_texts()
        return index

    def _reconcile_active(self, connection: sqlite3.Connection, scope_key: str, index: ScopeIndex) -> None:
        """The index's records are exactly the database's active rows, with their usage counts as the
        database holds them and this process's pending bumps laid over (another connection bumped,
        forgot, superseded or inserted; or a dedup of this one bumped)."""
        pending = self.bumps.get(scope_key)
        rows = connection.execute(
            "SELECT seq, last_used_at, use_count FROM records WHERE status = 'active'"
        ).fetchall()
        active: set[int] = set()
        missing: builtins.list[int] = []
        for seq, last_used_at, use_count in rows:
            active.add(int(seq))
            record = index.record(int(seq))
            if record is None:
                missing.append(int(seq))
                continue
            fresh = replace(
                record,
                last_used_at=None if last_used_at is None else float(last_used_at),
                use_count=int(use_count),
            )
            if pending is not None:
                fresh = pending.overlay(fresh)
            if fresh != record:
                index.set_record(int(seq), fresh)
        for seq in index.seqs():
            if seq not in active:
                index.remove(seq)
        for chunk in chunks(missing):
            self._load_index(connection, scope_key, None, index, seqs=chunk)
