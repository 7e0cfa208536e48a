"""The SQL every part of the SQLite store shares: the record columns and how a row decodes, the two
transaction shapes, the FTS and stem text of a record, and the bookkeeping every change to a row does
(the change stamp, the stem counts, leaving the FTS tables).

FTS: the FTS5 table indexes the engine's own tokens (`[a-z0-9]+`, space-joined), never the raw text,
so the prefilter and the engine agree on what a token is — a non-ASCII record is found by exactly the
ASCII tokens the engine sees in it. Its rowid is the record's `seq`.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from memory.ranking.embedder import Matrix
from memory.ranking.lexical import stems_of
from memory.ranking.vectors import to_blob
from memory.rules.engine import (
    match_tokens,
)
from memory.rules.scorer import tokenize
from memory.stores.sql_common import record_of
from memory.types import (
    MemoryRecord,
)

T = TypeVar("T")

# Stay far below SQLite's bound-variable limit when an id list is long (eviction after a cap change).
_ID_CHUNK = 500

# The term_df row that counts the active records themselves (no stem is empty).
DOCUMENTS = ""

NO_CUTOFF = float("-inf")

COLUMNS = (
    "id, scope_key, kind, text, keywords, source_thread_key, source_run_id, "
    "created_at, last_used_at, use_count, confidence, supersedes, status, origin, origin_conversation, "
    "observed_at"
)

COLUMN_COUNT = len(COLUMNS.split(","))

R_COLUMNS = ", ".join(f"r.{name.strip()}" for name in COLUMNS.split(","))

BUSY_TIMEOUT_SECONDS = 5.0


def fts_match_query(query: str) -> str | None:
    """Quoted tokens OR-joined: user text never reaches the FTS5 parser as syntax. None: no tokens."""
    return fts_match_terms(match_tokens(query))


def fts_match_terms(terms: Sequence[str]) -> str | None:
    """Terms (`[a-z0-9]+` tokens or their stems) quoted and OR-joined; None when there are none."""
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


@contextmanager
def snapshot(connection: sqlite3.Connection) -> Iterator[None]:
    """A read transaction (BEGIN DEFERRED): several SELECTs see one state, no write lock taken."""
    connection.execute("BEGIN")
    try:
        yield
    finally:
        connection.execute("COMMIT")


@contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any error: a batch lands whole or not at all."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def configure(connection: sqlite3.Connection) -> None:
    """What every connection of ours sets before its schema: the busy wait, zeroed free pages, WAL."""
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    # Freed cells and pages are zeroed, so an erased record leaves nothing in the file (per connection).
    connection.execute("PRAGMA secure_delete = ON")
    enable_wal(connection)
    # WAL + NORMAL: a commit survives a process crash (SIGKILL); only an OS crash may lose the last ones.
    connection.execute("PRAGMA synchronous = NORMAL")


def enable_wal(connection: sqlite3.Connection) -> None:
    """Switch to WAL (persistent in the file). The switch does not wait on SQLite's busy handler, so
    a database another connection is creating right now is retried until the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
            continue
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"could not switch the database to WAL (got {mode})")
        return


def chunks(values: Sequence[T]) -> Iterator[builtins.list[T]]:
    for start in range(0, len(values), _ID_CHUNK):
        yield builtins.list(values[start : start + _ID_CHUNK])


def placeholders(count: int) -> str:
    return ", ".join("?" * count)


def fts_text(text: str) -> str:
    return " ".join(tokenize(text))


def fts_keywords(keywords: Iterable[str]) -> str:
    return " ".join(token for keyword in keywords for token in tokenize(keyword))


def stems_text(text: str, keywords: Iterable[str]) -> str:
    """What the stem index holds for a record: its distinct stems, space-joined (the engine's own)."""
    return " ".join(sorted(stems_of(text, keywords)))


def load_keywords(raw: str) -> tuple[str, ...]:
    if raw == "[]":
        return ()
    value = json.loads(raw)
    if not isinstance(value, builtins.list):
        return ()
    return tuple(str(item) for item in value)


def change_generation(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT generation FROM changes WHERE id = 1").fetchone()
    return 0 if row is None else int(row[0])


def stamp(connection: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Inside a transaction: move the change generation on and stamp the rows with it. Every change to
    a record but its usage counts calls this (insert, leaving the active set, a new vector, a relabel),
    so another process's scope index finds what changed (`SqliteMemoryStore._synced_index`)."""
    if not seqs:
        return
    connection.execute("UPDATE changes SET generation = generation + 1 WHERE id = 1")
    for chunk in chunks(seqs):
        connection.execute(
            "UPDATE records SET changed = (SELECT generation FROM changes WHERE id = 1) "
            f"WHERE seq IN ({placeholders(len(chunk))})",
            chunk,
        )


def count_terms(connection: sqlite3.Connection, stems: Iterable[str], delta: int) -> None:
    """Add `delta` to each stem's document frequency (a record's distinct stems, plus the record count)."""
    connection.executemany(
        "INSERT INTO term_df (term, df) VALUES (?, ?) ON CONFLICT (term) DO UPDATE SET df = df + excluded.df",
        [(stem, delta) for stem in (DOCUMENTS, *stems)],
    )


def delete_fts(connection: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Every soft delete (supersede, forget, evict) takes the row out of the FTS tables, and
    stamps it changed."""
    stamp(connection, seqs)
    for chunk in chunks(seqs):
        connection.execute(f"DELETE FROM records_fts WHERE rowid IN ({placeholders(len(chunk))})", chunk)
        marks = placeholders(len(chunk))
        gone = connection.execute(
            f"SELECT stems FROM records_stems WHERE rowid IN ({marks})", chunk
        ).fetchall()
        for (stems,) in gone:
            count_terms(connection, set(str(stems).split()), -1)
        connection.execute(f"DELETE FROM records_stems WHERE rowid IN ({marks})", chunk)


def store_vector(connection: sqlite3.Connection, seq: int, vector: Matrix, model: str) -> None:
    """Only into a row still active and not erased: the vector was made outside the transaction, and
    another process may have erased the row meanwhile (its vector must not come back)."""
    stored = connection.execute(
        "UPDATE records SET embedding = ?, embedding_model = ? "
        "WHERE seq = ? AND status = 'active' AND erased_at IS NULL RETURNING seq",
        (to_blob(vector), model, seq),
    ).fetchall()
    stamp(connection, [int(row[0]) for row in stored])


def unexpired(records: builtins.list[MemoryRecord], cutoff: float | None) -> builtins.list[MemoryRecord]:
    return records if cutoff is None else [r for r in records if r.created_at >= cutoff]


def row_record(row: Sequence[Any]) -> MemoryRecord:
    """A row selected as `COLUMNS` as the record it holds."""
    (record_id, scope_key, kind, text, keywords, *rest) = row
    return record_of(record_id, scope_key, kind, text, load_keywords(str(keywords)), *rest)
