"""The open scope databases: an LRU of connections (at most `max_open` once idle) and one lock a scope.

A scope's connection is only touched while holding its scope lock, so everything on one scope is
serialized (a single writer per scope) while different scopes proceed in parallel on the store's worker
threads; other processes over the same directory are serialized by SQLite's own write lock
(`BEGIN IMMEDIATE`, busy timeout). `_lock` guards only the two maps.
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from memory.stores.sqlite.index import OpenScopes
from memory.stores.sqlite.person import finish_move, marker_of
from memory.stores.sqlite.schema import database_filename, open_database, prepare_scope

# (scope_key, sql) for every statement SQLite runs on a scope's connection: lets tests count real SQL.
StatementHook = Callable[[str, str], None]
T = TypeVar("T")


class ScopeConnections:
    """Each scope's connection, opened on first use; the least recently used closed beyond `max_open`."""

    def __init__(
        self, data_dir: Path, max_open: int, scopes: OpenScopes, on_statement: StatementHook | None
    ) -> None:
        self._data_dir = data_dir
        self._max_open = max_open
        self._scopes = scopes
        self._on_statement = on_statement
        self._lock = threading.Lock()
        self._connections: OrderedDict[str, sqlite3.Connection] = OrderedDict()
        self._scope_locks: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()

    def path(self, scope_key: str) -> Path:
        return self._data_dir / database_filename(scope_key)

    def open_count(self) -> int:
        with self._lock:
            return len(self._connections)

    def scope_lock(self, scope_key: str) -> threading.Lock:
        with self._lock:
            return self._scope_lock_locked(scope_key)

    def _scope_lock_locked(self, scope_key: str) -> threading.Lock:
        lock = self._scope_locks.get(scope_key)
        if lock is None:
            lock = threading.Lock()
            self._scope_locks[scope_key] = lock
        return lock

    def run(
        self, scope_key: str, work: Callable[[sqlite3.Connection], T], missing: T, create: bool, flush: bool
    ) -> T:
        """`work` on the scope's connection holding its lock (a worker thread); `missing` when there is
        no database and `create` is False. The scope's pending bumps are written first unless `flush`
        is False (a retrieve lays them over what it reads instead)."""
        with self.scope_lock(scope_key):
            connection = self.checkout(scope_key, create)
            if connection is None:
                return missing
            if flush:
                self._scopes.write_bumps(connection, scope_key)
            result = work(connection)
            if flush:
                self._scopes.caught_up(connection, scope_key)
            return result

    def retire(self, scope_key: str, work: Callable[[sqlite3.Connection], T], missing: T) -> T:
        """`work` on the scope's connection holding its lock (`missing`: no database), its pending
        bumps written first; then the connection is closed and forgotten with the scope's index, so
        the file can take another name (memory/stores/sqlite/person.py)."""
        with self.scope_lock(scope_key):
            connection = self.checkout(scope_key, create=False)
            if connection is None:
                return missing
            try:
                self._scopes.write_bumps(connection, scope_key)
                return work(connection)
            finally:
                self._let_go(scope_key)

    def _let_go(self, scope_key: str) -> None:
        """The scope's connection closed (its pending bumps written) and forgotten with its index;
        the caller holds the scope's lock."""
        with self._lock:
            connection = self._connections.pop(scope_key, None)
            self._scopes.closed(scope_key)
        if connection is not None:
            self._scopes.write_bumps(connection, scope_key)
            connection.close()

    def checkout(self, scope_key: str, create: bool) -> sqlite3.Connection | None:
        """The scope's connection, opened on first use (None: no database and `create` False — reads
        never create files); the caller holds the scope lock. A file a person's erasure is moving
        (in this process or another) is let go first, and the move finished when it can be."""
        path = self.path(scope_key)
        if marker_of(path).exists():
            self._let_go(scope_key)
            finish_move(path, marker_of(path), unmoved_too=False)
        with self._lock:
            connection = self._connections.get(scope_key)
            if connection is not None:
                self._connections.move_to_end(scope_key)
                return connection
        if not create and not path.exists():
            return None
        self._data_dir.mkdir(parents=True, exist_ok=True)
        connection = open_database(path, lambda opened: prepare_scope(opened, scope_key))
        if self._on_statement is not None:
            hook = self._on_statement
            connection.set_trace_callback(lambda sql: hook(scope_key, sql))
        with self._lock:
            self._connections[scope_key] = connection
            surplus = self._take_surplus_locked(scope_key)
        for key, lock, oldest in surplus:
            self._scopes.write_bumps(oldest, key)
            oldest.close()
            lock.release()
        return connection

    def _take_surplus_locked(
        self, keep: str
    ) -> builtins.list[tuple[str, threading.Lock, sqlite3.Connection]]:
        """Least recently used connections beyond `max_open` that no thread is using right now;
        each is returned with its scope lock held, to be closed outside the map lock."""
        surplus: builtins.list[tuple[str, threading.Lock, sqlite3.Connection]] = []
        excess = len(self._connections) - self._max_open
        for key in builtins.list(self._connections):
            if excess <= 0:
                break
            if key == keep:
                continue
            lock = self._scope_lock_locked(key)
            if lock.acquire(blocking=False):  # busy scopes stay open until a later checkout
                surplus.append((key, lock, self._connections.pop(key)))
                self._scopes.closed(key)
                excess -= 1
        return surplus

    def close_all(self) -> None:
        """Every connection closed, its pending bumps written first (the store's pool has stopped)."""
        with self._lock:
            connections = builtins.list(self._connections.items())
            self._connections.clear()
            self._scopes.clear()
        for scope_key, connection in connections:
            self._scopes.write_bumps(connection, scope_key)
            connection.close()
