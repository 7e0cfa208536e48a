"""The ledger: which messages each run was distilled from (to erase by source) and the read audit
(ids and ranks only, never text). One more database in the data directory, never a scope's."""

from __future__ import annotations

import builtins
import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from memory.rules.person import PersonRename
from memory.stores.sql_common import AuditKey, audit_key, source_rows
from memory.stores.sqlite.erasure import scrub_files
from memory.stores.sqlite.person import renamed_id, renamed_id_params
from memory.stores.sqlite.schema import open_database
from memory.stores.sqlite.sql import chunks, configure, placeholders, transaction
from memory.types import (
    AuditQuery,
    ReadAudit,
    SourceLink,
)

T = TypeVar("T")

LEDGER_FILENAME = "_ledger.sqlite3"  # never a scope's name: those never start with "_"

_LEDGER_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS run_sources (
        message TEXT NOT NULL,
        run_id TEXT NOT NULL,
        scope_key TEXT NOT NULL,
        linked_at REAL NOT NULL,
        PRIMARY KEY (message, run_id, scope_key)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS read_audit (
        audit_id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        thread_key TEXT NOT NULL,
        asker TEXT,
        scope_keys TEXT NOT NULL,
        at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS read_audit_records (
        audit_id INTEGER NOT NULL REFERENCES read_audit (audit_id) ON DELETE CASCADE,
        record_id TEXT NOT NULL,
        rank INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS read_audit_run ON read_audit (run_id)",
    "CREATE INDEX IF NOT EXISTS read_audit_thread ON read_audit (thread_key, at DESC)",
    "CREATE INDEX IF NOT EXISTS read_audit_asker ON read_audit (asker, at DESC)",
    "CREATE INDEX IF NOT EXISTS read_audit_at ON read_audit (at)",
    "CREATE INDEX IF NOT EXISTS read_audit_records_id ON read_audit_records (record_id)",
    "CREATE INDEX IF NOT EXISTS read_audit_records_audit ON read_audit_records (audit_id)",
    # A person's erasure under way (memory/stores/sqlite/person.py): the pseudonym it drew, so a run
    # again after a failure or a crash renames what is left to the same one. Deleted when it ends.
    """CREATE TABLE IF NOT EXISTS erasures (
        person_key TEXT PRIMARY KEY,
        pseudonym TEXT NOT NULL
    ) WITHOUT ROWID""",
)

# The audit rows an audit query asks for, by the key it asks by.
_AUDIT_WHERE: dict[AuditKey, str] = {
    "record": "audit_id IN (SELECT audit_id FROM read_audit_records WHERE record_id = ?)",
    "run": "run_id = ?",
    "user": "asker = ?",
    "thread": "thread_key = ?",
}


def _prepare_ledger(connection: sqlite3.Connection) -> None:
    configure(connection)
    connection.execute("PRAGMA foreign_keys = ON")
    with transaction(connection):
        for statement in _LEDGER_SCHEMA:
            connection.execute(statement)


def link_sources(connection: sqlite3.Connection, link: SourceLink, now: float) -> None:
    with transaction(connection):
        connection.executemany(
            "INSERT OR IGNORE INTO run_sources (message, run_id, scope_key, linked_at) VALUES (?, ?, ?, ?)",
            source_rows(link, now),
        )


def linked_runs(connection: sqlite3.Connection, messages: Sequence[str]) -> dict[str, builtins.list[str]]:
    runs: dict[str, builtins.list[str]] = {}
    for chunk in chunks(messages):
        for run_id, scope_key in connection.execute(
            "SELECT DISTINCT run_id, scope_key FROM run_sources "
            f"WHERE message IN ({placeholders(len(chunk))}) ORDER BY scope_key, run_id",
            chunk,
        ):
            found = runs.setdefault(str(scope_key), [])
            if str(run_id) not in found:
                found.append(str(run_id))
    return runs


def record_read(connection: sqlite3.Connection, entry: ReadAudit, cutoff: float) -> None:
    with transaction(connection):
        connection.execute("DELETE FROM read_audit WHERE at < ?", (cutoff,))
        audit_id = connection.execute(
            "INSERT INTO read_audit (run_id, thread_key, asker, scope_keys, at) VALUES (?, ?, ?, ?, ?) "
            "RETURNING audit_id",
            (
                entry.run_id,
                entry.thread_key,
                entry.asker,
                json.dumps(builtins.list(entry.scope_keys)),
                entry.at,
            ),
        ).fetchone()[0]
        connection.executemany(
            "INSERT INTO read_audit_records (audit_id, record_id, rank) VALUES (?, ?, ?)",
            [(audit_id, record_id, rank) for record_id, rank in entry.records],
        )


def read_audit(connection: sqlite3.Connection, query: AuditQuery, cutoff: float) -> builtins.list[ReadAudit]:
    key, value = audit_key(query)
    where = _AUDIT_WHERE[key]
    rows = connection.execute(
        f"SELECT audit_id, run_id, thread_key, asker, scope_keys, at FROM read_audit WHERE {where} "
        "AND at >= ? ORDER BY at DESC, audit_id DESC LIMIT ?",
        (value, cutoff, query.limit),
    ).fetchall()
    entries: builtins.list[ReadAudit] = []
    for audit_id, run_id, thread_key, asker, scope_keys, at in rows:
        records = connection.execute(
            "SELECT record_id, rank FROM read_audit_records WHERE audit_id = ? ORDER BY rank, record_id",
            (audit_id,),
        ).fetchall()
        entries.append(
            ReadAudit(
                run_id=str(run_id),
                thread_key=str(thread_key),
                asker=None if asker is None else str(asker),
                scope_keys=tuple(str(key) for key in json.loads(str(scope_keys))),
                records=tuple((str(record_id), int(rank)) for record_id, rank in records),
                at=float(at),
            )
        )
    return entries


_ASKED_BY = "SELECT audit_id, thread_key FROM read_audit WHERE asker = ?"
_READ_SCOPE = "SELECT audit_id, scope_keys FROM read_audit WHERE instr(scope_keys, ?) > 0"
_READ_RECORD = "SELECT audit_id FROM read_audit_records WHERE substr(record_id, 1, ?) = ?"
_RENAME_RECORDS = (
    f"UPDATE read_audit_records SET record_id = {renamed_id('record_id')} WHERE substr(record_id, 1, ?) = ?"
)


def rename_person(connection: sqlite3.Connection, rename: PersonRename) -> int:
    """The person's read-audit entries take the pseudonym (asker, the threads that were theirs alone,
    scopes read, their records' ids) and
    their scope's source links go (they found only records now erased); how many entries changed."""
    prefix = rename.record_prefix
    with transaction(connection):
        asked = connection.execute(_ASKED_BY, (rename.user_id,)).fetchall()
        touched = {int(audit_id) for audit_id, _ in asked}
        connection.executemany(
            "UPDATE read_audit SET thread_key = ? WHERE audit_id = ?",
            [
                (renamed, audit_id)
                for audit_id, thread_key in asked
                if (renamed := rename.thread(str(thread_key), rename.user_id)) != thread_key
            ],
        )
        connection.execute(
            "UPDATE read_audit SET asker = ? WHERE asker = ?", (rename.pseudonym, rename.user_id)
        )
        for audit_id, scope_keys in connection.execute(
            _READ_SCOPE, (json.dumps(rename.person_key),)
        ).fetchall():
            renamed = json.dumps([rename.key(str(key)) for key in json.loads(str(scope_keys))])
            if renamed != scope_keys:
                connection.execute(
                    "UPDATE read_audit SET scope_keys = ? WHERE audit_id = ?", (renamed, audit_id)
                )
                touched.add(int(audit_id))
        touched.update(int(row[0]) for row in connection.execute(_READ_RECORD, (len(prefix), prefix)))
        connection.execute(_RENAME_RECORDS, (*renamed_id_params(rename), len(prefix), prefix))
        connection.execute("DELETE FROM run_sources WHERE scope_key = ?", (rename.person_key,))
    scrub_files(connection)  # the old values leave the WAL too
    return len(touched)


def begin_erasure(connection: sqlite3.Connection, rename: PersonRename) -> PersonRename:
    """The person's erasure noted with its pseudonym, or the one an unfinished erasure of them drew."""
    with transaction(connection):
        connection.execute(
            "INSERT OR IGNORE INTO erasures (person_key, pseudonym) VALUES (?, ?)",
            (rename.person_key, rename.pseudonym),
        )
        row = connection.execute(
            "SELECT pseudonym FROM erasures WHERE person_key = ?", (rename.person_key,)
        ).fetchone()
    return PersonRename(rename.person_key, str(row[0]))


def end_erasure(connection: sqlite3.Connection, person_key: str) -> None:
    """The note gone, and with it the last byte of the person's key in the ledger (secure_delete)."""
    with transaction(connection):
        connection.execute("DELETE FROM erasures WHERE person_key = ?", (person_key,))
    scrub_files(connection)


class Ledger:
    """The ledger's one connection, opened on first use and used by one worker thread at a time."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    @property
    def path(self) -> Path:
        return self._data_dir / LEDGER_FILENAME

    def exists(self) -> bool:
        return self.path.exists()

    def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the ledger's connection (a worker thread: it blocks on the ledger's lock)."""
        with self._lock:
            if self._connection is None:
                self._data_dir.mkdir(parents=True, exist_ok=True)
                self._connection = open_database(self.path, _prepare_ledger)
            return work(self._connection)

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
