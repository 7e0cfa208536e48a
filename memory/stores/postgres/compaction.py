"""Compaction: the memory tables written afresh, so that no erased word stays readable in the database's
files.

An erasure scrubs its rows with an UPDATE (erasure.py), and PostgreSQL keeps every row's older versions
in the table's heap until a vacuum; a plain VACUUM only marks their space free, and the bytes stay on the
page until a later row happens to be written over them. An index keeps the same: a GIN (full-text) index
keeps a word as a key once no row holds it, and a deleted term count leaves its key in the btree's page.
`VACUUM (FULL)` writes a table anew with its live row versions only, builds its indexes and its TOAST
anew, and truncates the old files when it commits; a CHECKPOINT then writes the new pages out (without
it they may wait in shared buffers until the server's own next checkpoint).

While it rewrites a table, VACUUM FULL holds its ACCESS EXCLUSIVE lock: every read and write of that
table waits. It waits at most `LOCK_WAIT` for the lock itself (every later statement would queue behind
it, stalling every replica behind some long transaction), then gives up and is tried again.

Which erasures are still to be compacted: an erased row (`erased_at` set) whose version was written by a
transaction at or after the mark kept in `memory_meta` — the oldest transaction any snapshot could still
see when the last compaction began (`_SNAPSHOT_XMIN`): every version an older transaction left was dead
to the rewrite. One replica compacts at a time: a session advisory lock, keyed by the schema.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Final

import psycopg
import structlog
from psycopg import sql

from memory.stores.postgres import partitions
from memory.stores.postgres.failures import error_kind, first_line
from memory.stores.postgres.rows import Connection, one
from memory.types import DEFAULT_COMPACT_AFTER_SECONDS, CompactionReport, RewrittenTable

log = structlog.get_logger("memory")

__all__ = ["DEFAULT_COMPACT_AFTER_SECONDS", "CompactionTarget", "Compactor", "compact_now"]

# Every table that holds a record's words (the records, their full-text and stem indexes, TOAST, the
# term counts) or a person's key (the curation log and the read audit, which a person's erasure rewrites).
TABLES: Final = ("memory_records", "memory_term_df", "memory_curation_log", "memory_read_audit")

# Apart from the scopes' locks (sql._LOCK_NAMESPACE), so a scope's write never waits on a compaction's lock.
_COMPACT_NAMESPACE: Final = 0x5B_43_4D_50  # "[CMP"
_LOCK_KEY: Final = f"{_COMPACT_NAMESPACE}, hashtext('compact:' || current_schema())"
_TRY_LOCK: Final = f"SELECT pg_try_advisory_lock({_LOCK_KEY})"
_WAIT_LOCK: Final = f"SELECT pg_advisory_lock({_LOCK_KEY})"
_UNLOCK: Final = f"SELECT pg_advisory_unlock({_LOCK_KEY})"

# Erased rows written since the mark are found by `memory_records_erased` (schema.py), and their
# partitions (partitions.py) by the rows' `tableoid`.
_MARK_KEY: Final = "compacted_xmin"
_SINCE_MARK: Final = f"""
    erased_at IS NOT NULL AND changed_xid >= COALESCE(
        (SELECT value::xid8 FROM memory_meta WHERE key = '{_MARK_KEY}'), '0'::xid8
    )
"""
# A relation some change left dead versions of a person's key in (a person's erasure moves their
# scope's rows to another partition and deletes their usage rows, tombstones and source links): named
# in `memory_meta` under this prefix with the id of the transaction that left them, rewritten by every
# compaction until one whose mark is past that id (no snapshot could still see them) drops the note.
NOTE_PREFIX: Final = "compact:"
_NOTED: Final = f"SELECT key FROM memory_meta WHERE key LIKE '{NOTE_PREFIX}%' ORDER BY key"
_DROP_NOTES: Final = "DELETE FROM memory_meta WHERE key = ANY(%s::text[]) AND value::xid8 < %s::xid8"
_ERASED_SINCE: Final = (
    f"SELECT EXISTS (SELECT 1 FROM memory_records WHERE {_SINCE_MARK})"
    f" OR EXISTS (SELECT 1 FROM memory_meta WHERE key LIKE '{NOTE_PREFIX}%')"
)
_PARTITIONS_ERASED_SINCE: Final = f"""
    SELECT c.relname FROM pg_class AS c
    WHERE c.oid IN (SELECT DISTINCT tableoid FROM memory_records WHERE {_SINCE_MARK}) ORDER BY c.relname
"""
# The mark: the oldest transaction whose view a rewrite now must keep. A row version some snapshot
# may still see survives VACUUM FULL, so that is the older of this snapshot's xmin (every transaction
# before it has ended) and the xmin any session, replication slot or prepared transaction holds (a
# long report, a pg_dump, a standby's feedback). Those are 32-bit xids: each is placed in the epoch
# that puts it at or below this snapshot's xmax. (A role without pg_read_all_stats sees no other
# role's sessions' xmin: then only its own sessions and the slots count.)
_SNAPSHOT_XMIN: Final = """
    WITH snap AS (
        SELECT pg_snapshot_xmin(s)::text::bigint AS own, pg_snapshot_xmax(s)::text::bigint AS top
        FROM pg_current_snapshot() AS s
    ), held AS (
        SELECT backend_xmin AS x FROM pg_stat_activity WHERE backend_xmin IS NOT NULL
        UNION ALL SELECT xmin FROM pg_replication_slots WHERE xmin IS NOT NULL
        UNION ALL SELECT transaction FROM pg_prepared_xacts
    ), placed AS (
        SELECT (top >> 32 << 32) + x::text::bigint AS full_xid, top FROM held, snap
    )
    SELECT LEAST(
        (SELECT own FROM snap),
        (SELECT min(CASE WHEN full_xid > top THEN full_xid - 4294967296 ELSE full_xid END) FROM placed)
    )::text
"""
_SET_MARK: Final = (
    f"INSERT INTO memory_meta (key, value) VALUES ('{_MARK_KEY}', %s)"
    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)
_SIZE: Final = "SELECT pg_total_relation_size(to_regclass(%s))"
LOCK_WAIT: Final = "SET lock_timeout = '2s'"
_TRIES: Final = 5  # per table, a second apart, while another transaction keeps the table in use


@dataclass(frozen=True, slots=True)
class CompactionTarget:
    """Where to compact: the store's DSN (its schema on the search path), and the name this work's
    connection shows in pg_stat_activity."""

    dsn: str
    application_name: str


async def _connect(target: CompactionTarget) -> Connection:
    # Its own connection: VACUUM runs outside any transaction block, and the session lock lives as
    # long as the connection (a replica that dies mid-way lets go of it).
    return await psycopg.AsyncConnection.connect(
        target.dsn, autocommit=True, application_name=f"{target.application_name}-compact"
    )


async def compact_now(target: CompactionTarget) -> CompactionReport:
    """Every table rewritten now, after waiting for another replica's compaction to end."""
    async with await _connect(target) as conn:
        started = time.monotonic()
        await conn.execute(_WAIT_LOCK)
        waited = time.monotonic() - started
        try:
            return await _rewrite(conn, waited)
        finally:
            await conn.execute(_UNLOCK)


async def compact_if_erased(target: CompactionTarget) -> CompactionReport | None:
    """The tables rewritten if some row was erased since the last compaction; None when there was
    none, or when another replica is compacting (it covers every erasure before it started; a
    later one is found by the next look)."""
    async with await _connect(target) as conn:
        cursor = await conn.execute(_TRY_LOCK)
        if not one(await cursor.fetchone()):
            return None
        try:
            cursor = await conn.execute(_ERASED_SINCE)
            if not one(await cursor.fetchone()):
                return None
            return await _rewrite(conn, 0.0)
        finally:
            await conn.execute(_UNLOCK)


async def _rewrite(conn: Connection, waited: float) -> CompactionReport:
    """Holding the compaction lock: the mark taken, each table rewritten (of `memory_records`, the
    partitions that hold an erasure since the last mark), the mark kept, the pages written out."""
    cursor = await conn.execute(_SNAPSHOT_XMIN)
    mark = str(one(await cursor.fetchone()))
    await conn.execute(LOCK_WAIT)
    cursor = await conn.execute(_NOTED)
    notes = [str(row[0]) for row in await cursor.fetchall()]
    tables = await _tables(conn)
    noted = [note.removeprefix(NOTE_PREFIX) for note in notes]
    rewritten = [await _rewrite_table(conn, table) for table in dict.fromkeys([*tables, *noted])]
    await conn.execute(_SET_MARK, (mark,))
    await conn.execute(_DROP_NOTES, (notes, mark))
    checkpointed = await _checkpoint(conn)
    report = CompactionReport(tuple(rewritten), waited, checkpointed)
    log.info(
        "memory.compacted",
        store="postgres",
        tables=len(rewritten),
        locked_seconds=round(sum(t.locked_seconds for t in rewritten), 3),
        longest_lock_seconds=round(max(t.locked_seconds for t in rewritten), 3),
        checkpointed=checkpointed,
    )
    return report


async def _tables(conn: Connection) -> list[str]:
    """What to rewrite: `TABLES`, with the records' table as the partitions that hold a row erased since
    the last mark. Looked up after the new mark is taken: every transaction older than that mark has
    ended, so this lookup sees each erasure that the new mark will count as compacted."""
    if not await partitions.is_partitioned(conn):
        return list(TABLES)
    cursor = await conn.execute(_PARTITIONS_ERASED_SINCE)
    erased = [str(row[0]) for row in await cursor.fetchall()]
    return [*erased, *(table for table in TABLES if table != partitions.TABLE)]


async def _rewrite_table(conn: Connection, table: str) -> RewrittenTable:
    cursor = await conn.execute(_SIZE, (table,))
    before = int(one(await cursor.fetchone()) or 0)
    for attempt in range(1, _TRIES + 1):
        started = time.monotonic()
        try:
            await conn.execute(sql.SQL("VACUUM (FULL) {}").format(sql.Identifier(table)))
        except psycopg.errors.LockNotAvailable:
            if attempt == _TRIES:
                raise
            log.info("memory.compact_waited", store="postgres", table=table, attempt=attempt)
            await asyncio.sleep(1.0)
            continue
        locked = time.monotonic() - started
        cursor = await conn.execute(_SIZE, (table,))
        return RewrittenTable(table, before, int(one(await cursor.fetchone()) or 0), locked)
    raise AssertionError("unreachable")  # pragma: no cover


async def _checkpoint(conn: Connection) -> bool:
    """CHECKPOINT needs a superuser or the pg_checkpoint role; without it the server's own next
    checkpoint (checkpoint_timeout, 5 min by default) writes the pages out."""
    try:
        await conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        log.info("memory.compact_unchecked", store="postgres", message="CHECKPOINT is not permitted")
        return False
    return True


class Compactor:
    """This replica's look for erasures to compact, every half of `after_seconds` (so an erasure by any
    replica, or by `switchboard memory forget` in another process, is compacted within `after_seconds`
    of it). Off the event loop's way (it only awaits the server); a failure is a warning, and the next
    look tries again."""

    def __init__(self, target: CompactionTarget, after_seconds: float) -> None:
        if not after_seconds > 0:
            raise ValueError(f"compact_after_seconds must be above 0, got {after_seconds!r}")
        self._target = target
        self._every = after_seconds / 2
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._every)
            try:
                await compact_if_erased(self._target)
            except Exception as error:  # never the bot's end: the next look tries again
                log.warning(
                    "memory.compact_failed",
                    store="postgres",
                    error=error_kind(error),
                    message=f"compaction failed, tried again later: {first_line(error)}",
                )
