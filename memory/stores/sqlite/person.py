"""A person's erasure moves their own scope database to the pseudonym: no byte of their key stays in
its rows, its curation log, its `meta` or its file name.

The rows are rewritten in one transaction (their ids, scope, superseded ids and the threads that were
the person's alone; the curation log's scope, record ids and actors; `meta`'s scope key), any row
written since the scope's erasure erased with them; secure_delete zeroes the old cells and the WAL is
checkpointed away (`scrub_files`). Then the closed file takes the pseudonym's name.

Crash safety: a marker file (`<old name>.moving`) is made before the transaction and removed after the
rename. A crash before the commit leaves the scope as it was (the person's erasure reports the failure
and is run again); a crash after it leaves a file whose `meta` names the pseudonym under the old name,
which `settle_moves` (every store's open, every later erasure) checkpoints and renames. A file another
process still has open (its WAL is there after this one closes) is not renamed under it: the marker
stays and the next settle finishes the move.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sqlite3
from pathlib import Path

import structlog

from memory.rules.person import PersonRename
from memory.stores.sqlite.erasure import erase_rows, scrub_files
from memory.stores.sqlite.schema import database_filename
from memory.stores.sqlite.sql import stamp, transaction

log = structlog.get_logger("memory")

MOVING = ".moving"


def renamed_id(column: str) -> str:
    """SQL for `column` with the person's record-id prefix swapped for the pseudonym's (NULL and any
    other id as they were); its parameters come from `renamed_id_params`."""
    return f"CASE WHEN substr({column}, 1, ?) = ? THEN ? || substr({column}, ?) ELSE {column} END"


def renamed_id_params(rename: PersonRename) -> tuple[object, ...]:
    prefix = rename.record_prefix
    return (len(prefix), prefix, rename.pseudonym_record_prefix, len(prefix) + 1)


# Another process's connection, checked out before the move's marker was made, may still write after the
# move commits: its row (the person's key, their new words) would live on under the pseudonym, out of
# reach of their key. The moved file refuses every row and curation entry not of the scope its `meta`
# names.
_REFUSE_OTHER_SCOPES = tuple(
    f"""CREATE TRIGGER IF NOT EXISTS {table}_of_the_moved_scope_only BEFORE INSERT ON {table}
    WHEN NEW.scope_key IS NOT (SELECT value FROM meta WHERE key = 'scope_key')
    BEGIN SELECT RAISE(ABORT, 'this scope moved to a pseudonym'); END"""
    for table in ("records", "curation_log")
)


def move_rows(connection: sqlite3.Connection, rename: PersonRename, now: float) -> int:
    """One transaction: the scope's rows, curation log and identity take the pseudonym (a row written
    since the scope was erased is erased first), then the WAL is checkpointed away. How many curation
    entries were renamed."""
    ids = renamed_id_params(rename)
    with transaction(connection):
        erase_rows(connection, "1 = 1", (), "user_request", now)
        threads = connection.execute("SELECT seq, source_thread_key FROM records").fetchall()
        connection.executemany(
            "UPDATE records SET source_thread_key = ? WHERE seq = ?",
            [(new, seq) for seq, key in threads if (new := rename.owned_thread(str(key))) != key],
        )
        connection.execute(
            f"UPDATE records SET id = {renamed_id('id')}, supersedes = {renamed_id('supersedes')},"
            " scope_key = ?",
            (*ids, *ids, rename.pseudonym_key),
        )
        stamp(connection, [int(seq) for seq, _ in threads])
        entries = connection.execute(
            f"UPDATE curation_log SET record_id = {renamed_id('record_id')},"
            f" related_id = {renamed_id('related_id')}, scope_key = ?,"
            " actor = CASE WHEN actor = ? THEN ? ELSE actor END",
            (*ids, *ids, rename.pseudonym_key, rename.person_key, rename.pseudonym_key),
        ).rowcount
        connection.execute("UPDATE meta SET value = ? WHERE key = 'scope_key'", (rename.pseudonym_key,))
        for statement in _REFUSE_OTHER_SCOPES:
            connection.execute(statement)
    scrub_files(connection)
    return int(entries)


def mark_move(path: Path) -> Path:
    """The marker that a move of `path` has begun (durable before the move's transaction)."""
    marker = marker_of(path)
    marker.touch()
    _sync_dir(path.parent)
    return marker


def marker_of(path: Path) -> Path:
    return path.with_name(path.name + MOVING)


def finish_move(path: Path, marker: Path, *, unmoved_too: bool = True) -> bool:
    """A closed database whose `meta` names another scope takes that scope's file name; the marker
    goes (of a file not moved, only when `unmoved_too`: at an open, where it is a crash's, not a move
    under way in another process). False (the marker stays) when another process still has the
    file open."""
    key = _checkpointed_key(path) if path.exists() else None
    if key is not None and path.name != database_filename(key):
        if Path(f"{path}-wal").exists():  # another process's connection: never rename under it
            marker.touch()
            log.warning("memory.store.move_deferred")
            return False
        os.rename(path, path.with_name(database_filename(key)))
    elif not unmoved_too:
        return False
    marker.unlink(missing_ok=True)
    _sync_dir(path.parent)
    return True


def settle_moves(data_dir: Path) -> int:
    """Every move a crash (or another process's open file) left unfinished, finished; how many."""
    settled = 0
    markers: builtins.list[Path] = sorted(data_dir.glob("*" + MOVING)) if data_dir.is_dir() else []
    for marker in markers:
        settled += finish_move(marker.with_name(marker.name.removesuffix(MOVING)), marker)
    return settled


def _checkpointed_key(path: Path) -> str | None:
    """The scope `meta` names, the WAL copied into the file and truncated first (a move committed
    just before a crash may still be there); closing the last connection removes the WAL."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        scrub_files(connection)
        row = connection.execute("SELECT value FROM meta WHERE key = 'scope_key'").fetchone()
    return None if row is None else str(row[0])


def _sync_dir(directory: Path) -> None:
    """A rename, a new or a removed marker made durable (the directory's entry, not just the inode)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
