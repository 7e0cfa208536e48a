"""The PostgreSQL store's schema and migrations: one path, re-applied by every replica on open under
a schema lock, safe over live data. A later column is added with ALTER TABLE … ADD COLUMN IF NOT EXISTS;
each such statement runs only when its column, table or index is missing (ddl.py), so an open on a
current schema takes no table lock that a write could deadlock with. The open of a release that does
change the schema waits for no table lock longer than `_LOCK_WAIT`: it gives way to the writes and
tries again."""

from __future__ import annotations

import asyncio
from typing import Final

import structlog
from psycopg import IsolationLevel, errors

from memory.ranking.lexical import stems_of
from memory.rules.restate import meaning_key
from memory.rules.visibility import legacy_origin
from memory.stores.postgres import ddl, partitions
from memory.stores.postgres.changes import make_trigger
from memory.stores.postgres.rows import MAX_LEXEME, Connection, one
from memory.stores.postgres.sql import _LOCK_NAMESPACE
from memory.stores.postgres.word_stats import unsample_words
from memory.stores.sql_common import SLASH_MARKER, SLASH_THREADS, log_relabelled, slash_relabels

log = structlog.get_logger("memory")

_SCHEMA_LOCK: Final = 0

# The one migration path: re-applied on every open, safe over live data. A later column is added here
# with ALTER TABLE … ADD COLUMN IF NOT EXISTS.
_SCHEMA: Final[tuple[str, ...]] = (
    """
    CREATE TABLE IF NOT EXISTS memory_records (
        scope_key text NOT NULL,
        seq bigint NOT NULL,
        id text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('fact', 'summary')),
        text text NOT NULL,
        norm text NOT NULL,
        keywords text[] NOT NULL DEFAULT '{}',
        tokens text[] NOT NULL DEFAULT '{}',
        source_thread_key text NOT NULL,
        source_run_id text,
        created_at double precision NOT NULL,
        last_used_at double precision,
        use_count integer NOT NULL DEFAULT 0,
        confidence double precision,
        supersedes text,
        status text NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted')),
        tsv tsvector GENERATED ALWAYS AS (array_to_tsvector(tokens)) STORED,
        PRIMARY KEY (scope_key, seq)
    ) PARTITION BY HASH (scope_key)
    """,
    # Write-time dedup. md5: a norm can be longer than a btree entry may be.
    "CREATE INDEX IF NOT EXISTS memory_records_status_norm ON memory_records (scope_key, status, md5(norm))",
    # list's newest-first page and the active COUNT(*).
    "CREATE INDEX IF NOT EXISTS memory_records_active_seq ON memory_records (scope_key, status, seq DESC)",
    # Status-prefixed scans by use: the eviction fetch.
    "CREATE INDEX IF NOT EXISTS memory_records_active_used"
    " ON memory_records (scope_key, status, last_used_at DESC, created_at DESC)",
    # The FTS index holds exactly the active rows: a soft delete leaves it by the status flip.
    "CREATE INDEX IF NOT EXISTS memory_records_fts ON memory_records USING gin (tsv) WHERE status = 'active'",
    # Ranking v2: the engine's stems (NULL until stemmed: `_backfill_stems` fills older rows),
    # their full-text column and index, and each scope's document frequency per stem, kept in the
    # transaction of every change (the term '' counts the scope's active records).
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS stems text[]",
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS stems_tsv tsvector"
    " GENERATED ALWAYS AS (array_to_tsvector(COALESCE(stems, '{}'))) STORED",
    "CREATE INDEX IF NOT EXISTS memory_records_stems"
    " ON memory_records USING gin (stems_tsv) WHERE status = 'active'",
    """
    CREATE TABLE IF NOT EXISTS memory_term_df (
        scope_key text NOT NULL,
        term text NOT NULL,
        df integer NOT NULL,
        PRIMARY KEY (scope_key, term)
    )
    """,
    "CREATE TABLE IF NOT EXISTS memory_meta (key text PRIMARY KEY, value text NOT NULL)",
    # Erasure: why and when a row's text was scrubbed.
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS erased_reason text",
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS erased_at double precision",
    "CREATE INDEX IF NOT EXISTS memory_records_run ON memory_records (source_run_id)",
    "CREATE INDEX IF NOT EXISTS memory_records_created ON memory_records (scope_key, created_at)",
    # Which messages each run was distilled from, and the scopes that run could write.
    """
    CREATE TABLE IF NOT EXISTS memory_run_sources (
        message text NOT NULL,
        run_id text NOT NULL,
        scope_key text NOT NULL,
        linked_at double precision NOT NULL,
        PRIMARY KEY (message, run_id, scope_key)
    )
    """,
    # The read audit: ids and ranks only, never text.
    """
    CREATE TABLE IF NOT EXISTS memory_read_audit (
        audit_id bigserial PRIMARY KEY,
        run_id text NOT NULL,
        thread_key text NOT NULL,
        asker text,
        scope_keys text[] NOT NULL,
        record_ids text[] NOT NULL,
        ranks integer[] NOT NULL,
        at double precision NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS memory_read_audit_run ON memory_read_audit (run_id)",
    "CREATE INDEX IF NOT EXISTS memory_read_audit_thread ON memory_read_audit (thread_key, at DESC)",
    "CREATE INDEX IF NOT EXISTS memory_read_audit_asker ON memory_read_audit (asker, at DESC)",
    "CREATE INDEX IF NOT EXISTS memory_read_audit_at ON memory_read_audit (at)",
    "CREATE INDEX IF NOT EXISTS memory_read_audit_records ON memory_read_audit USING gin (record_ids)",
    # The origin label: added nullable, labelled by `_migrate_origin`, then made NOT NULL.
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS origin text",
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS origin_conversation text",
    # The embedder's vector (float32 bytes; pgvector is not assumed) and the model that made it.
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS embedding bytea",
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS embedding_model text",
    # When each record's source conversation happened: older rows take their `created_at`, once
    # (`_migrate_observed`); a row an older replica writes later reads its `created_at` too.
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS observed_at double precision",
)

_ORIGIN_NULLABLE: Final = """
    SELECT is_nullable = 'YES' FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'memory_records' AND column_name = 'origin'
"""

_UNLABELLED_SCOPES: Final = "SELECT DISTINCT scope_key FROM memory_records WHERE origin IS NULL"

_LABEL_SCOPE: Final = (
    "UPDATE memory_records SET origin = %s, origin_conversation = %s WHERE scope_key = %s AND origin IS NULL"
)

_ORIGIN_REQUIRED: Final = (
    "ALTER TABLE memory_records ALTER COLUMN origin SET DEFAULT 'unknown'",
    "ALTER TABLE memory_records ALTER COLUMN origin SET NOT NULL",
)

_UNSTEMMED_ROWS: Final = (
    "SELECT scope_key, seq, text, keywords FROM memory_records WHERE stems IS NULL LIMIT 500"
)

_SET_STEMS: Final = "UPDATE memory_records SET stems = %s WHERE scope_key = %s AND seq = %s"

_TERM_DF_BUILT: Final = "SELECT value FROM memory_meta WHERE key = 'term_df'"

_REBUILD_TERM_DF: Final = (
    "DELETE FROM memory_term_df WHERE term <> '#vectors'",
    """
    INSERT INTO memory_term_df (scope_key, term, df)
    SELECT scope_key, term, COUNT(*) FROM memory_records, unnest(array_append(stems, '')) AS term
    WHERE status = 'active' AND stems IS NOT NULL GROUP BY scope_key, term
    """,
    "INSERT INTO memory_meta (key, value) VALUES ('term_df', '1') ON CONFLICT (key) DO NOTHING",
)

_OBSERVED_MIGRATED: Final = "SELECT value FROM memory_meta WHERE key = 'observed_at'"

_MIGRATE_OBSERVED: Final = (
    "UPDATE memory_records SET observed_at = created_at WHERE observed_at IS NULL",
    "INSERT INTO memory_meta (key, value) VALUES ('observed_at', '1') ON CONFLICT (key) DO NOTHING",
)

# The marker that the stored `norm` is the dedup key the engine uses now (`meaning_key`).
_NORM_MARKER: Final = ("norm_key", "meaning")

_META_VALUE: Final = "SELECT value FROM memory_meta WHERE key = %s"

_STORED_NORMS: Final = "SELECT scope_key, seq, text, norm FROM memory_records WHERE erased_at IS NULL"

_SET_NORM: Final = "UPDATE memory_records SET norm = %s WHERE scope_key = %s AND seq = %s"

_SET_META: Final = (
    "INSERT INTO memory_meta (key, value) VALUES (%s, %s)"
    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)

_LOCK_SCHEMA: Final = f"SELECT pg_advisory_xact_lock({_LOCK_NAMESPACE}, {_SCHEMA_LOCK})"


async def configure(conn: Connection) -> None:
    # The advisory lock is taken by the batch's first statement; READ COMMITTED gives every later
    # statement a fresh snapshot, so the batch sees what the previous lock holder committed.
    await conn.set_isolation_level(IsolationLevel.READ_COMMITTED)


# While it changes the schema, a replica waits this long at most for a table's lock, then lets go of what
# it holds and tries again: a write waiting on it while it waits on that write would be a deadlock, and
# PostgreSQL would end one of the two, maybe the write. Shorter than the server's deadlock_timeout (1 s
# by default), so the opening replica is the one that gives way.
_LOCK_WAIT: Final = "SET LOCAL lock_timeout = '200ms'"
_SCHEMA_TRIES: Final = 8
_FIRST_PAUSE_SECONDS: Final = 0.1  # doubled after each try, at most `_LONGEST_PAUSE_SECONDS`
_LONGEST_PAUSE_SECONDS: Final = 2.0


async def apply_schema(conn: Connection) -> None:
    """CREATE … IF NOT EXISTS under a lock, so replicas starting together do not race each other; tried
    again (`_SCHEMA_TRIES` times in all) when it gave way to the writes for a table's lock."""
    for attempt in range(1, _SCHEMA_TRIES + 1):
        try:
            await _apply_schema_once(conn)
            return
        except (errors.LockNotAvailable, errors.DeadlockDetected):
            if attempt == _SCHEMA_TRIES:
                raise
            log.info("memory.store.schema_waited", store="postgres", attempt=attempt)
            await asyncio.sleep(min(_FIRST_PAUSE_SECONDS * 2 ** (attempt - 1), _LONGEST_PAUSE_SECONDS))


async def _apply_schema_once(conn: Connection) -> None:
    async with conn.transaction():
        await conn.execute(_LOCK_SCHEMA)
        await conn.execute(_LOCK_WAIT)  # after the schema lock: another replica's open may hold that long
        for statement in _SCHEMA:
            await ddl.apply(conn, statement)
        await partitions.make(conn)
        await make_trigger(conn)  # the change feed replicas' scope indexes follow (changes.py)
        await _migrate_origin(conn)
        await _migrate_observed(conn)
        await _migrate_norm(conn)
        await _relabel_slash_notes(conn)
        stemmed = await _backfill_stems(conn)
        cursor = await conn.execute(_TERM_DF_BUILT)
        if stemmed or await cursor.fetchone() is None:
            for statement in _REBUILD_TERM_DF:
                await conn.execute(statement)
            log.info("memory.store.term_df_rebuilt", store="postgres", stemmed=stemmed)
        await _migrate_curation(conn)
        if await unsample_words(conn):
            log.info("memory.store.word_statistics_off", store="postgres")


async def _migrate_observed(conn: Connection) -> None:
    """Rows written before records were dated take their `created_at`, once (a marker in
    `memory_meta`, so later opens never scan the table for it)."""
    cursor = await conn.execute(_OBSERVED_MIGRATED)
    if await cursor.fetchone() is not None:
        return
    cursor = await conn.execute(_MIGRATE_OBSERVED[0])
    dated = max(cursor.rowcount, 0)
    await conn.execute(_MIGRATE_OBSERVED[1])
    if dated:
        log.info("memory.store.observed_migrated", store="postgres", records=dated)


async def _migrate_norm(conn: Connection) -> None:
    """The stored dedup key recomputed once with `meaning_key` (a marker in `memory_meta`): rows
    written under the older, stricter key would otherwise never meet the restatements that should
    fold into them. Two old rows that now share a key both stay; a new restatement folds into the
    earlier."""
    if await _marked(conn, _NORM_MARKER):
        return
    cursor = await conn.execute(_STORED_NORMS)
    keyed = [
        (meaning_key(str(text)), norm, scope_key, seq)
        for scope_key, seq, text, norm in await cursor.fetchall()
    ]
    changed = [(new, scope_key, seq) for new, old, scope_key, seq in keyed if new != old]
    if changed:
        async with conn.cursor() as batch:
            await batch.executemany(_SET_NORM, changed)
        log.info("memory.store.norm_migrated", store="postgres", records=len(changed))
    await conn.execute(_SET_META, _NORM_MARKER)


async def _marked(conn: Connection, marker: tuple[str, str]) -> bool:
    """Whether `memory_meta` holds the marker (key, value): its migration is done."""
    key, value = marker
    cursor = await conn.execute(_META_VALUE, (key,))
    found = await cursor.fetchone()
    return found is not None and found[0] == value


_SLASH_LABELS: Final = "SELECT DISTINCT scope_key, origin FROM memory_records WHERE source_thread_key LIKE %s"

_RELABEL: Final = (
    "UPDATE memory_records SET origin = %s WHERE scope_key = %s AND origin = %s AND source_thread_key LIKE %s"
)


async def _relabel_slash_notes(conn: Connection) -> None:
    """Notes saved with the `/memory` slash command in a channel before such a note for the typist's
    own scope was labelled `dm` carry the channel's label: relabelled as `typed_alone` labels them
    now, once (a marker in `memory_meta`; the first open scans the table for them)."""
    if await _marked(conn, SLASH_MARKER):
        return
    cursor = await conn.execute(_SLASH_LABELS, (SLASH_THREADS,))
    found = [(str(scope_key), str(label)) for scope_key, label in await cursor.fetchall()]
    relabelled = 0
    for new, scope_key, old in slash_relabels(found):
        cursor = await conn.execute(_RELABEL, (new, scope_key, old, SLASH_THREADS))
        relabelled += max(cursor.rowcount, 0)
    await conn.execute(_SET_META, SLASH_MARKER)
    log_relabelled("postgres", relabelled)


async def _backfill_stems(conn: Connection) -> int:
    """Stems for rows written before ranking v2 (or by an older replica): the engine's own, in batches."""
    done = 0
    while True:
        cursor = await conn.execute(_UNSTEMMED_ROWS)
        rows = await cursor.fetchall()
        if not rows:
            return done
        async with conn.cursor() as batch:
            await batch.executemany(
                _SET_STEMS,
                [
                    (sorted(s for s in stems_of(text, keywords) if len(s) <= MAX_LEXEME), scope_key, seq)
                    for scope_key, seq, text, keywords in rows
                ],
            )
        done += len(rows)


async def _migrate_origin(conn: Connection) -> None:
    """Rows written before the origin label get their scope's conservative label (`legacy_origin`),
    once: after that the column is NOT NULL and this is one catalogue lookup."""
    cursor = await conn.execute(_ORIGIN_NULLABLE)
    if not one(await cursor.fetchone()):
        return
    cursor = await conn.execute(_UNLABELLED_SCOPES)
    scopes = [str(row[0]) for row in await cursor.fetchall()]
    labelled = 0
    for scope_key in scopes:
        origin, conversation = legacy_origin(scope_key)
        cursor = await conn.execute(_LABEL_SCOPE, (origin, conversation, scope_key))
        labelled += max(cursor.rowcount, 0)
    for statement in _ORIGIN_REQUIRED:
        await conn.execute(statement)
    if labelled:
        log.info("memory.store.origin_migrated", store="postgres", scopes=len(scopes), records=labelled)


# Curation: the `pending` status, the curation log (who approved, edited, rejected, merged
# what; never text), and the lookups the review queue and a record's history make.
_CURATION_SCHEMA: Final[tuple[str, ...]] = (
    """
    CREATE TABLE IF NOT EXISTS memory_curation_log (
        entry_id bigserial PRIMARY KEY,
        record_id text NOT NULL,
        scope_key text NOT NULL,
        action text NOT NULL,
        actor text NOT NULL,
        at double precision NOT NULL,
        related_id text
    )
    """,
    "CREATE INDEX IF NOT EXISTS memory_curation_log_record ON memory_curation_log (scope_key, record_id)",
    # Entries past the audit's retention are dropped by the next action that logs.
    "CREATE INDEX IF NOT EXISTS memory_curation_log_at ON memory_curation_log (at)",
    "CREATE INDEX IF NOT EXISTS memory_curation_log_related"
    " ON memory_curation_log (scope_key, related_id) WHERE related_id IS NOT NULL",
    # A record's chain of versions, walked both ways along `supersedes`.
    "CREATE INDEX IF NOT EXISTS memory_records_supersedes"
    " ON memory_records (scope_key, supersedes) WHERE supersedes IS NOT NULL",
    # The review queue's expiry, across every scope.
    "CREATE INDEX IF NOT EXISTS memory_records_pending"
    " ON memory_records (created_at) WHERE status = 'pending'",
    # The erased rows only, by the transaction that last wrote them: what compaction.py has yet to
    # rewrite is one lookup.
    "CREATE INDEX IF NOT EXISTS memory_records_erased"
    " ON memory_records (changed_xid) WHERE erased_at IS NOT NULL",
)

_STATUS_CHECK: Final = """
    SELECT pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid = 'memory_records'::regclass AND conname = 'memory_records_status_check'
"""

_ADMIT_PENDING: Final = (
    "ALTER TABLE memory_records DROP CONSTRAINT IF EXISTS memory_records_status_check",
    "ALTER TABLE memory_records ADD CONSTRAINT memory_records_status_check"
    " CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted', 'pending'))",
)


async def _migrate_curation(conn: Connection) -> None:
    """The curation log and its indexes, and the status check widened to admit `pending`, once: the
    check is replaced only while its definition lacks it (a later open is one catalogue lookup)."""
    for statement in _CURATION_SCHEMA:
        await ddl.apply(conn, statement)
    cursor = await conn.execute(_STATUS_CHECK)
    found = await cursor.fetchone()
    if found is None or "pending" not in str(found[0]):
        for statement in _ADMIT_PENDING:
            await conn.execute(statement)
        log.info("memory.store.curation_migrated", store="postgres")
