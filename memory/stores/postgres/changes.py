"""The change feed a replica's scope indexes follow: every row version is stamped, by a trigger, with
the id of the transaction that wrote it (`changed_xid`), whoever wrote it — this replica, another one,
an older release, a migration or an operator's UPDATE.

A replica that has read a scope's rows as of a snapshot whose oldest running transaction was `xmin`
has seen every change committed by a transaction older than `xmin`: any later change carries an id of
at least `xmin`. So its next catch-up reads the rows stamped `>= xmin` — leaving out the transactions it
has already read whole (`seen`), so a transaction held open elsewhere on the server does not make it
read the same rows again and again. A catch-up that would read more rows than `CATCH_UP_ROWS` reloads
the scope instead (in pages of `PAGE_ROWS`, so no one fetch decodes a whole scope on the event loop).

An active record's usage (last use, use count) lives in its own narrow row of `memory_usage`, stamped
the same way: a usage bump then rewrites three small index entries, not the record row and its dozen
indexes (full-text ones among them). A trigger on `memory_records` keeps the two in step in the
transaction of every change, whoever makes it: a row becoming active gets its usage row (from the
record's own columns), a row leaving active takes its usage back into those columns and loses the
usage row. So `memory_usage` holds exactly the active rows, and the eviction order is read off it.

The store never deletes a record row (a forget or an erasure rewrites it), but an operator may: the same
trigger leaves a stamped tombstone in `memory_deleted` for each row deleted (or moved to another scope or
seq), and a later insert of that seq takes it away, so a catch-up takes a deleted record out of every
replica's index as it takes out a forgotten one. Not covered: a TRUNCATE (no row trigger fires), and two
operator sessions deleting and re-inserting one seq at once (the insert's trigger runs before it waits
for the delete, so the tombstone may stay beside the new row); the replicas' indexes keep what they held
until reloaded.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final

from psycopg.rows import TupleRow

from memory.stores.postgres import ddl
from memory.stores.postgres.rows import Connection
from memory.stores.postgres.sql import _COLUMNS, _USAGE_JOIN

# Its own migration step (schema.apply_schema runs it after the main list): the stamp column, the
# usage table, the triggers that fill them, the catch-up's indexes, and the eviction order's index.
CHANGE_SCHEMA: Final[tuple[str, ...]] = (
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS changed_xid xid8",
    """
    CREATE TABLE IF NOT EXISTS memory_usage (
        scope_key text NOT NULL,
        seq bigint NOT NULL,
        used_at double precision,
        uses integer NOT NULL,
        created_at double precision NOT NULL,
        changed_xid xid8,
        PRIMARY KEY (scope_key, seq)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS memory_deleted (
        scope_key text NOT NULL,
        seq bigint NOT NULL,
        changed_xid xid8 NOT NULL,
        PRIMARY KEY (scope_key, seq)
    )
    """,
    # Stamps a usage row (and an older replica's trigger of the same name stamps a record row).
    """
    CREATE OR REPLACE FUNCTION memory_records_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.changed_xid := pg_current_xact_id();
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION memory_records_track() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    DECLARE
        kept memory_usage%ROWTYPE;
        moved boolean := (OLD.scope_key, OLD.seq) IS DISTINCT FROM (NEW.scope_key, NEW.seq);
    BEGIN
        -- A key left (a delete, or a row moved by hand) gets a tombstone; a key taken loses its own.
        -- OLD is NULL in an INSERT's trigger and NEW in a DELETE's.
        IF moved THEN
            IF OLD.seq IS NOT NULL THEN
                INSERT INTO memory_deleted (scope_key, seq, changed_xid)
                VALUES (OLD.scope_key, OLD.seq, pg_current_xact_id())
                ON CONFLICT (scope_key, seq) DO UPDATE SET changed_xid = EXCLUDED.changed_xid;
            END IF;
            IF NEW.seq IS NOT NULL THEN
                DELETE FROM memory_deleted WHERE scope_key = NEW.scope_key AND seq = NEW.seq;
            END IF;
        END IF;
        IF TG_OP = 'DELETE' THEN
            DELETE FROM memory_usage WHERE scope_key = OLD.scope_key AND seq = OLD.seq;
            RETURN OLD;
        END IF;
        NEW.changed_xid := pg_current_xact_id();
        IF TG_OP = 'UPDATE' AND (moved OR (OLD.status = 'active' AND NEW.status <> 'active')) THEN
            -- Leaving its key (moved by hand) or leaving active: no usage row stays at the old key, an
            -- orphan for the eviction order; an active record's usage goes back into its own columns,
            -- and follows it to a new key below while it stays active.
            DELETE FROM memory_usage WHERE scope_key = OLD.scope_key AND seq = OLD.seq RETURNING * INTO kept;
            IF FOUND AND OLD.status = 'active' THEN
                NEW.last_used_at := kept.used_at;
                NEW.use_count := kept.uses;
            END IF;
        END IF;
        IF NEW.status = 'active' AND (TG_OP = 'INSERT' OR OLD.status <> 'active' OR moved) THEN
            INSERT INTO memory_usage (scope_key, seq, used_at, uses, created_at)
            VALUES (NEW.scope_key, NEW.seq, NEW.last_used_at, NEW.use_count, NEW.created_at)
            ON CONFLICT (scope_key, seq) DO UPDATE
            SET used_at = EXCLUDED.used_at, uses = EXCLUDED.uses, created_at = EXCLUDED.created_at;
        ELSIF NEW.status <> 'active' AND (TG_OP = 'INSERT' OR moved) THEN
            -- A row taking a key that is not active: a stray usage row there (left while no trigger
            -- ran) is no record's.
            DELETE FROM memory_usage WHERE scope_key = NEW.scope_key AND seq = NEW.seq;
        END IF;
        RETURN NEW;
    END
    $$
    """,
    "CREATE INDEX IF NOT EXISTS memory_records_changed ON memory_records (scope_key, changed_xid)",
    "CREATE INDEX IF NOT EXISTS memory_usage_changed ON memory_usage (scope_key, changed_xid)",
    "CREATE INDEX IF NOT EXISTS memory_deleted_changed ON memory_deleted (scope_key, changed_xid)",
    # Least recently used first (`memory.rules.engine.eviction_key`), ties by seq: the excess is the
    # index's first rows, so a write over the cap never reads the whole active set.
    "CREATE INDEX IF NOT EXISTS memory_usage_eviction"
    " ON memory_usage (scope_key, (COALESCE(used_at, created_at)), created_at, seq)",
)

# Made only when missing: CREATE OR REPLACE TRIGGER would lock the table on every replica's start.
_HAS_TRIGGER: Final = "SELECT 1 FROM pg_trigger WHERE tgname = %s AND tgrelid = to_regclass(%s)"
_TRIGGERS: Final = (
    (
        "memory_records_track",
        "memory_records",
        "CREATE TRIGGER memory_records_track BEFORE INSERT OR UPDATE OR DELETE ON memory_records"
        " FOR EACH ROW EXECUTE FUNCTION memory_records_track()",
    ),
    (
        "memory_usage_stamp",
        "memory_usage",
        "CREATE TRIGGER memory_usage_stamp BEFORE INSERT OR UPDATE ON memory_usage"
        " FOR EACH ROW EXECUTE FUNCTION memory_records_stamp()",
    ),
)
# Made with the records' trigger (its lock waits out every writer, so none is missed): the usage rows
# of exactly the active rows, from their own columns — afresh, as rows kept while no trigger ran may
# be stale or orphaned.
_FILL_USAGE: Final = (
    "DELETE FROM memory_usage",
    """
    INSERT INTO memory_usage (scope_key, seq, used_at, uses, created_at)
    SELECT scope_key, seq, last_used_at, use_count, created_at FROM memory_records WHERE status = 'active'
    """,
)
# An older release's trigger, made again by an older replica starting during a rolling upgrade: it
# only stamps, so it is harmless, but dropped whenever found.
_STAMP_TRIGGER: Final = ("memory_records_stamp", "memory_records")
_DROP_STAMP_TRIGGER: Final = "DROP TRIGGER IF EXISTS memory_records_stamp ON memory_records"

# What a scope index needs of a row, after the record's own columns: the stamps of the record row and
# of its usage row (NULL: none, the row is not active).
_INDEX_COLUMNS: Final = f"{_COLUMNS}, stems, embedding, embedding_model, changed_xid, used_xid"
# The statement's own snapshot: every transaction older than its xmin had finished before it ran.
_XMIN: Final = "pg_snapshot_xmin(pg_current_snapshot())"

# The page's rows first (off the active seq index), then their usage rows by primary key: a join
# planned over the whole scope would read every usage row of it for each page.
_SELECT_ACTIVE_PAGE: Final = f"""
    SELECT {_INDEX_COLUMNS}, {_XMIN} FROM (
        SELECT * FROM memory_records
        WHERE scope_key = %s AND status = 'active' AND seq > %s ORDER BY seq LIMIT %s
    ) AS page {_USAGE_JOIN}
    ORDER BY seq
"""

# A row of the wanted scope stamped since its index's xmin by a transaction it has not read whole.
_CHANGED_SINCE: Final = (
    "scope_key = wanted.scope AND changed_xid >= wanted.since::xid8"
    " AND changed_xid <> ALL(wanted.seen::xid8[])"
)

# For each wanted scope, the seqs deleted since (their tombstones' seqs and stamps, NULL for none) and
# the rows whose record or usage changed since; the snapshot's xmin comes back even for a scope where
# no row did (the LEFT JOIN's one row of NULLs). One statement for every scope: one snapshot for both
# tables and all the scopes. The changed seqs are gathered first (`ARRAY(…)`), so the rows are read by
# primary key whatever the planner guesses of the stamps.
#
# It runs inside a function whose one plan is kept (`force_generic_plan`): planning the statement cost
# the server more than running it, and the planner's own choice (a generic plan's estimate counts a
# hundred rows for every unnest) was a fresh plan on every read. The function is STABLE, so it reads
# with the calling statement's snapshot. Its columns are the scope, the tombstones, the record row
# whole (`rec`, so a column added to the table needs no change here), its usage row's columns, and the
# xmin. The version in its name is its contract: CREATE OR REPLACE cannot change what a function takes
# or returns, so a release that needs another makes `_v2` beside it, and the replicas of both releases
# keep running through a rolling upgrade. Its parameters' names are no column's (a column wins a clash);
# `array_agg` is named in pg_catalog, as a same-named function of an exact type in a schema on the path
# would otherwise be chosen over the built-in. The result is gathered before it is returned, so a
# catch-up of thousands of rows is given the memory to stay off temporary files.
_CHANGED_FUNCTION: Final = f"""
    CREATE OR REPLACE FUNCTION memory_changed_since_v1(
        wanted_scopes text[], wanted_since text[], wanted_seen text[],
        deleted_limit integer, row_limit integer
    ) RETURNS TABLE (
        scope text, seqs bigint[], xids bigint[], rec memory_records,
        used_seq bigint, used_at double precision, uses integer, used_xid xid8, snapshot_xmin xid8
    ) LANGUAGE plpgsql STABLE
    SET plan_cache_mode = force_generic_plan
    SET work_mem = '32MB'
    SET search_path FROM CURRENT AS $$
    #variable_conflict use_column
    BEGIN
        RETURN QUERY
        SELECT wanted.scope, gone.seqs, gone.xids, m.rec, m.used_seq, m.used_at, m.uses, m.used_xid, {_XMIN}
        FROM unnest(wanted_scopes, wanted_since, wanted_seen) AS wanted (scope, since, seen)
        CROSS JOIN LATERAL (
            SELECT pg_catalog.array_agg(seq) AS seqs, pg_catalog.array_agg(changed_xid::text::bigint) AS xids
            FROM (
                SELECT seq, changed_xid FROM memory_deleted WHERE {_CHANGED_SINCE} LIMIT deleted_limit
            ) AS tombstones
        ) AS gone
        LEFT JOIN LATERAL (
            SELECT changed AS rec, used_seq, used_at, uses, used_xid
            FROM memory_records AS changed {_USAGE_JOIN}
            WHERE scope_key = wanted.scope AND seq = ANY(ARRAY(
                SELECT seq FROM memory_records WHERE {_CHANGED_SINCE}
                UNION
                SELECT seq FROM memory_usage WHERE {_CHANGED_SINCE}
            ))
            LIMIT row_limit
        ) AS m ON true;
    END
    $$
"""

# The function's rows as a scope index reads them: the record row's columns spread out again.
_SELECT_CHANGED: Final = f"""
    SELECT c.scope, c.seqs, c.xids, {_INDEX_COLUMNS}, c.snapshot_xmin
    FROM memory_changed_since_v1(
        %(scopes)s::text[], %(since)s::text[], %(seen)s::text[], %(deleted)s, %(n)s
    ) AS c
    LEFT JOIN LATERAL (SELECT (c.rec).*) AS r ON true
"""

# A scope's held-back usage bumps (memory/stores/usage_bumps.py) in one statement, by primary key; the
# later of two uses wins (another replica's may be newer). The usage rows come back as the bump left them.
WRITE_BUMPS: Final = """
    UPDATE memory_usage AS u
    SET used_at = GREATEST(u.used_at, b.used_at), uses = u.uses + b.uses
    FROM unnest(%s::bigint[], %s::int[], %s::float8[]) AS b (seq, uses, used_at)
    WHERE u.scope_key = %s AND u.seq = b.seq
    RETURNING u.seq, u.used_at, u.uses, u.changed_xid
"""

PAGE_ROWS: Final = 1000
CATCH_UP_ROWS: Final = 2000
# Past this many rows deleted since, a scope is read afresh: the catch-up repeats their seqs on each
# of its rows, so it keeps them few.
CATCH_UP_DELETED: Final = 64


async def make_trigger(conn: Connection) -> None:
    """Inside the schema transaction: the usage table, and the triggers, once (the usage rows of the
    rows already active filled when the records' trigger is made)."""
    for statement in (*CHANGE_SCHEMA, _CHANGED_FUNCTION):
        await ddl.apply(conn, statement)
    for name, table, create in _TRIGGERS:
        cursor = await conn.execute(_HAS_TRIGGER, (name, table))
        if await cursor.fetchone() is None:
            await conn.execute(create)
            if table == "memory_records":
                for statement in _FILL_USAGE:
                    await conn.execute(statement)
    cursor = await conn.execute(_HAS_TRIGGER, _STAMP_TRIGGER)
    if await cursor.fetchone() is not None:
        await conn.execute(_DROP_STAMP_TRIGGER)


@dataclass(frozen=True, slots=True)
class Changes:
    """Rows read for a scope index (each `_INDEX_COLUMNS`), and the snapshot's xmin they are as of.
    `full`: the scope's whole active set (load it afresh); else the rows changed since the index's,
    and the seqs deleted since with the transactions that deleted them (`deleted`)."""

    rows: builtins.list[TupleRow]
    xmin: int
    full: bool
    deleted: builtins.list[tuple[int, int]] = field(default_factory=list)


async def read_all(conn: Connection, scope_key: str) -> Changes:
    """The scope's active rows, a page per statement. The pages are different snapshots: the first
    one's xmin is what the whole read is as of, and a row changed between pages is read again by the
    next catch-up (its stamp is at least that xmin)."""
    rows: builtins.list[TupleRow] = []
    xmin: int | None = None
    after = 0
    while True:
        cursor = await conn.execute(_SELECT_ACTIVE_PAGE, (scope_key, after, PAGE_ROWS))
        page = await cursor.fetchall()
        if not page:
            break
        if xmin is None:
            xmin = int(page[0][-1])
        rows.extend(row[:-1] for row in page)
        after = int(page[-1][0])
        if len(page) < PAGE_ROWS:
            break
    if xmin is None:  # an empty scope: the xmin of a statement that reads no row
        cursor = await conn.execute(_SELECT_CHANGED, _changed_params([(scope_key, (0, ()))], rows=0))
        xmin = _xmin_of(await cursor.fetchall())
    return Changes(rows, xmin, full=True)


# Where a kept scope index stands: the xmin it is as of, and the transactions since then it read whole.
Since = tuple[int, Collection[int]]


async def read_many(conn: Connection, wanted: Sequence[tuple[str, Since | None]]) -> dict[str, Changes]:
    """Each scope's rows changed since where its index stands (one statement for all of them), or
    the whole scope when it has none or more than `CATCH_UP_ROWS` rows changed."""
    behind = [(key, since) for key, since in wanted if since is not None]
    found: dict[str, Changes] = {}
    if behind:
        cursor = await conn.execute(_SELECT_CHANGED, _changed_params(behind, rows=CATCH_UP_ROWS + 1))
        by_scope: dict[str, builtins.list[TupleRow]] = {}
        for row in await cursor.fetchall():
            by_scope.setdefault(row[0], []).append(row[1:])
        for key, rows in by_scope.items():
            seqs, xids = rows[0][0] or [], rows[0][1] or []  # the same on every row of the scope
            changed = [row[2:-1] for row in rows if row[2] is not None]
            if len(changed) <= CATCH_UP_ROWS and len(seqs) <= CATCH_UP_DELETED:
                deleted = [(int(seq), int(xid)) for seq, xid in zip(seqs, xids, strict=True)]
                found[key] = Changes(changed, _xmin_of(rows), full=False, deleted=deleted)
    for key, _ in wanted:
        if key not in found:
            found[key] = await read_all(conn, key)
    return {key: found[key] for key, _ in wanted}


def _changed_params(behind: Sequence[tuple[str, Since]], rows: int) -> dict[str, object]:
    """`_SELECT_CHANGED`'s parameters: per scope its key, its xmin, and the transactions it has read
    whole (as one xid8[] literal: PostgreSQL has no array of arrays of different lengths)."""
    return {
        "scopes": [key for key, _ in behind],
        "since": [str(xmin) for _, (xmin, _) in behind],
        "seen": ["{" + ",".join(str(xid) for xid in sorted(seen)) + "}" for _, (_, seen) in behind],
        "n": rows,
        "deleted": min(rows, CATCH_UP_DELETED + 1),
    }


def _xmin_of(found: builtins.list[TupleRow]) -> int:
    return int(found[0][-1])
