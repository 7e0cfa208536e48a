"""A person's erasure moves their own scope's rows to the pseudonym: no value of any table keeps their
key, and the compaction rewrites the files that held it.

In the transaction of the logs' renaming (ledger.rename_person): under the scope's lock, any row
written since the scope's erasure is erased, then every row of the scope takes the pseudonym (its id,
scope key, the id it supersedes, the thread when it was theirs alone), its curation log with it; the
scope's word counts, usage rows, tombstones and source links go (an erased scope counts no word, and
the tombstones' seqs were the scope's own). The UPDATE moves the rows to the pseudonym's partition,
leaving dead versions in the old one: it and the tables rows were deleted from are noted in
`memory_meta` (their names, never the key), and the next compaction rewrites them (compaction.py).

The rows and their tombstones are gone from the scope's key, so a replica's catch-up of it could not
tell: the move also stamps `PERSONS_MOVED` in `memory_meta` (a transaction id, no key), and every
replica lets go of the person scopes it indexed when it sees that stamp move (retrieve.py).
"""

from __future__ import annotations

from typing import Final

from psycopg_pool import AsyncConnectionPool

from memory.rules.person import PersonRename
from memory.stores.postgres.compaction import NOTE_PREFIX
from memory.stores.postgres.erasure import ScrubList, erase_rows
from memory.stores.postgres.index import PERSONS_MOVED
from memory.stores.postgres.rows import Connection
from memory.stores.postgres.sql import _LOCK_SCOPE


def _renamed_id(column: str) -> str:
    """SQL for `column` with the person's record-id prefix swapped for the pseudonym's."""
    return (
        f"CASE WHEN left({column}, length(%(prefix)s)) = %(prefix)s"
        f" THEN %(pseudonym_prefix)s || substr({column}, length(%(prefix)s) + 1) ELSE {column} END"
    )


_SOURCE_PARTITIONS: Final = (
    "SELECT DISTINCT tableoid::regclass::text FROM memory_records WHERE scope_key = %(key)s"
)
_THREADS: Final = "SELECT seq, source_thread_key FROM memory_records WHERE scope_key = %(key)s"
_OWN_THREADS: Final = """
    UPDATE memory_records AS m SET source_thread_key = t.thread
    FROM unnest(%(seqs)s::bigint[], %(threads)s::text[]) AS t (seq, thread)
    WHERE m.scope_key = %(key)s AND m.seq = t.seq
"""
_MOVE_ROWS: Final = f"""
    UPDATE memory_records SET scope_key = %(pseudonym_key)s, id = {_renamed_id("id")},
        supersedes = {_renamed_id("supersedes")}
    WHERE scope_key = %(key)s
"""
_MOVE_LOG: Final = f"""
    UPDATE memory_curation_log SET scope_key = %(pseudonym_key)s, record_id = {_renamed_id("record_id")},
        related_id = {_renamed_id("related_id")},
        actor = CASE WHEN actor = %(key)s THEN %(pseudonym_key)s ELSE actor END
    WHERE scope_key = %(key)s
"""
_LEFTOVER_TABLES: Final = ("memory_term_df", "memory_usage", "memory_deleted", "memory_run_sources")
_LEFTOVERS: Final = tuple(f"DELETE FROM {table} WHERE scope_key = %(key)s" for table in _LEFTOVER_TABLES)
# Valued with this transaction's id: the compaction drops the note once no snapshot can see the dead
# versions it left (compaction.py).
_NOTE: Final = (
    "INSERT INTO memory_meta (key, value) VALUES (%s, pg_current_xact_id()::text)"
    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)


def rename_params(rename: PersonRename) -> dict[str, object]:
    """The named parameters every statement of a person's renaming takes."""
    return {
        "user": rename.user_id,
        "pseudonym": rename.pseudonym,
        "key": rename.person_key,
        "pseudonym_key": rename.pseudonym_key,
        "prefix": rename.record_prefix,
        "pseudonym_prefix": rename.pseudonym_record_prefix,
    }


async def move_scope(conn: Connection, scrub: str, rename: PersonRename, now: float) -> int:
    """Inside the caller's transaction: the person's scope moved to the pseudonym; how many of its
    curation entries were renamed."""
    params = rename_params(rename)
    await conn.execute(_LOCK_SCOPE, (rename.person_key,))
    await erase_rows(conn, scrub, "scope_key = %s", (rename.person_key,), "user_request", now)
    cursor = await conn.execute(_SOURCE_PARTITIONS, params)
    dead = [str(row[0]) for row in await cursor.fetchall()]
    for table in (*dead, *_LEFTOVER_TABLES):
        await conn.execute(_NOTE, (NOTE_PREFIX + table,))
    # Key-free word to every replica that a person's scope left its key (with its tombstones): each
    # lets go of the person scopes it indexed (retrieve.py, `PERSONS_MOVED`).
    await conn.execute(_NOTE, (PERSONS_MOVED,))
    cursor = await conn.execute(_THREADS, params)
    own = [
        (int(seq), renamed)
        for seq, thread in await cursor.fetchall()
        if (renamed := rename.owned_thread(str(thread))) != thread
    ]
    if own:
        seqs, threads = zip(*own, strict=True)
        await conn.execute(_OWN_THREADS, {**params, "seqs": list(seqs), "threads": list(threads)})
    await conn.execute(_MOVE_ROWS, params)
    for statement in _LEFTOVERS:
        await conn.execute(statement, params)
    entries = await conn.execute(_MOVE_LOG, params)
    return max(entries.rowcount, 0)


# The read-audit entries naming a person (as asker, as a scope read, by one of their records' ids),
# renamed in place: the arrays keep their order, every other element as it was.
_RENAME_READS = """
    UPDATE memory_read_audit SET
        asker = CASE WHEN asker = %(user)s THEN %(pseudonym)s ELSE asker END,
        scope_keys = array_replace(scope_keys, %(key)s, %(pseudonym_key)s),
        record_ids = ARRAY(
            SELECT CASE WHEN left(r, length(%(prefix)s)) = %(prefix)s
                THEN %(pseudonym_prefix)s || substr(r, length(%(prefix)s) + 1) ELSE r END
            FROM unnest(record_ids) WITH ORDINALITY AS u(r, i) ORDER BY i
        )
    WHERE asker = %(user)s OR %(key)s = ANY(scope_keys)
        OR EXISTS (SELECT 1 FROM unnest(record_ids) AS r WHERE left(r, length(%(prefix)s)) = %(prefix)s)
"""


async def pseudonymize(
    pool: AsyncConnectionPool[Connection], scrub: ScrubList, rename: PersonRename, now: float
) -> int:
    """In one transaction: the person's scope moves to the pseudonym (`move_scope`), their curation
    entries in other scopes and their read-audit entries (with the threads that were theirs alone)
    take the pseudonym, their scope's source links go (they found only records now erased); how many
    log entries changed."""
    params = rename_params(rename)
    async with pool.connection() as conn, conn.transaction():
        moved = await move_scope(conn, await scrub.of(conn), rename, now)
        entries = await conn.execute(
            "UPDATE memory_curation_log SET actor = %(pseudonym_key)s WHERE actor = %(key)s", params
        )
        asked = await conn.execute(
            "SELECT audit_id, thread_key FROM memory_read_audit WHERE asker = %(user)s", params
        )
        own_threads = [
            (renamed, audit_id)
            for audit_id, thread_key in await asked.fetchall()
            if (renamed := rename.thread(str(thread_key), rename.user_id)) != thread_key
        ]
        async with conn.cursor() as cursor:
            await cursor.executemany(
                "UPDATE memory_read_audit SET thread_key = %s WHERE audit_id = %s", own_threads
            )
        reads = await conn.execute(_RENAME_READS, params)
        return moved + max(entries.rowcount, 0) + max(reads.rowcount, 0)
