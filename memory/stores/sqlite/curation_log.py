"""A scope's curation log: who approved, edited, rejected, merged or forgot which record, when. In the
scope's own file, appended inside the transaction of the change it records; kept, like the read
audit, for the audit's retention (older entries are dropped on the next append and never read)."""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Sequence

from memory.stores.sql_common import curation_entry
from memory.stores.sqlite.erasure import scrub_files
from memory.stores.sqlite.sql import NO_CUTOFF, chunks, placeholders, transaction
from memory.types import CurationEntry

_COLUMNS = "record_id, scope_key, action, actor, at, related_id"


def append(connection: sqlite3.Connection, entries: Sequence[CurationEntry], cutoff: float | None) -> None:
    """Inside the caller's transaction: the entries, and those past the retention dropped."""
    if not entries:
        return
    if cutoff is not None:
        connection.execute("DELETE FROM curation_log WHERE at < ?", (cutoff,))
    connection.executemany(
        f"INSERT INTO curation_log ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        [(e.record_id, e.scope_key, e.action, e.actor, e.at, e.related_id) for e in entries],
    )


def rename_actor(connection: sqlite3.Connection, person_key: str, pseudonym_key: str) -> int:
    """The person's entries name the pseudonym instead, and the old name leaves the WAL; how many."""
    with transaction(connection):
        renamed = connection.execute(
            "UPDATE curation_log SET actor = ? WHERE actor = ?", (pseudonym_key, person_key)
        ).rowcount
    if renamed:
        scrub_files(connection)
    return int(renamed)


def naming(
    connection: sqlite3.Connection, record_id: str, limit: int, cutoff: float | None
) -> builtins.list[CurationEntry]:
    """Entries naming the record as their record or their related one, newest first."""
    rows = connection.execute(
        f"SELECT {_COLUMNS} FROM curation_log WHERE (record_id = ? OR related_id = ?) AND at >= ? "
        "ORDER BY at DESC, entry_id DESC LIMIT ?",
        (record_id, record_id, NO_CUTOFF if cutoff is None else cutoff, limit),
    ).fetchall()
    return [curation_entry(row) for row in rows]


def of_records(
    connection: sqlite3.Connection, record_ids: Sequence[str], cutoff: float | None
) -> builtins.list[CurationEntry]:
    """Entries whose record is one of these, oldest first."""
    found: builtins.list[tuple[int, CurationEntry]] = []
    for chunk in chunks(record_ids):
        rows = connection.execute(
            f"SELECT entry_id, {_COLUMNS} FROM curation_log "
            f"WHERE record_id IN ({placeholders(len(chunk))}) AND at >= ?",
            (*chunk, NO_CUTOFF if cutoff is None else cutoff),
        ).fetchall()
        found.extend((int(row[0]), curation_entry(row[1:])) for row in rows)
    found.sort(key=lambda item: (item[1].at, item[0]))
    return [item for _, item in found]
