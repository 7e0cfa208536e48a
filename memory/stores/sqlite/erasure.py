"""Erasure: an erased record's text leaves the row, the FTS and stem indexes, and the file.

What an erased row keeps: identity, scope, origin, provenance, dates, status, reason. Every other
column — text, norm, keywords, and whatever later columns hold (stems, term counts, a vector) — is
scrubbed (`memory.stores.sql_common.scrub_assignments`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import structlog

from memory.stores.sql_common import scrub_assignments
from memory.stores.sqlite.sql import DOCUMENTS, chunks, delete_fts, placeholders, transaction
from memory.types import (
    EraseReason,
)

log = structlog.get_logger("memory")


def _scrub_assignments(connection: sqlite3.Connection) -> str:
    columns = connection.execute("PRAGMA table_info(records)").fetchall()
    return scrub_assignments(
        (str(name), not notnull, None if default is None else str(default))
        for _, name, _type, notnull, default, _pk in columns
    )


def erase_rows(
    connection: sqlite3.Connection, where: str, params: Sequence[object], reason: EraseReason, now: float
) -> int:
    """Inside a transaction: scrub every not-yet-erased row matching `where`; an active or pending one
    becomes `forgotten` (invisible to retrieval, list, review and dedup). Returns how many rows were
    erased."""
    seqs = [
        int(row[0])
        for row in connection.execute(
            f"SELECT seq FROM records WHERE erased_at IS NULL AND ({where})", tuple(params)
        ).fetchall()
    ]
    if not seqs:
        return 0
    scrub = _scrub_assignments(connection)
    for chunk in chunks(seqs):
        connection.execute(
            f"UPDATE records SET {scrub}, erased_reason = ?, erased_at = ?, "
            "status = CASE WHEN status IN ('active', 'pending') THEN 'forgotten' ELSE status END "
            f"WHERE seq IN ({placeholders(len(chunk))})",
            (reason, now, *chunk),
        )
    delete_fts(connection, seqs)
    # A stem no active record holds any more leaves the document frequencies, and FTS5 keeps a deleted
    # row's terms in its old segments until they merge: merge both indexes now.
    connection.execute("DELETE FROM term_df WHERE df <= 0 AND term != ?", (DOCUMENTS,))
    connection.execute("INSERT INTO records_fts (records_fts) VALUES ('optimize')")
    connection.execute("INSERT INTO records_stems (records_stems) VALUES ('optimize')")
    return len(seqs)


def erase(
    connection: sqlite3.Connection, where: str, params: Sequence[object], reason: EraseReason, now: float
) -> int:
    with transaction(connection):
        erased = erase_rows(connection, where, params, reason, now)
    if erased:
        scrub_files(connection)
    return erased


def erase_expired(connection: sqlite3.Connection, cutoff: float, now: float) -> int:
    return erase(connection, "created_at < ?", (cutoff,), "expired", now)


def scrub_files(connection: sqlite3.Connection) -> None:
    """Copy the WAL into the main file and truncate it: the pre-erase page images in the WAL are gone,
    and secure_delete already zeroed the freed space they are copied over."""
    busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:  # another process holds a read snapshot: the next erase or checkpoint finishes the job
        log.warning("memory.store.checkpoint_incomplete")
