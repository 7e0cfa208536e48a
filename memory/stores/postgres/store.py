"""The PostgreSQL memory store: one shared database for several bot and memory-service replicas.

Everything that is per-scope in the SQLite store (one database file per scope) is per-`scope_key` rows
here: every statement is filtered by `scope_key`, and a batch runs in one transaction under a per-scope
transaction-level advisory lock — the equivalent of the Durable Object's single writer. Ranking, dedup,
supersede and eviction are decided by `memory.engine` (invariant 2); this module only persists.

The full-text column is generated from the engine's own tokens of text and keywords (`tokens`, computed
with `memory.scorer.record_tokens`), so a record matches a query token in SQL exactly when the engine
would say it does — no PostgreSQL parser or dictionary stands between them.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final, cast

import psycopg
import structlog
from psycopg import AsyncConnection, IsolationLevel
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from memory.ranking.embedder import Embedder, Matrix
from memory.ranking.fusion import DEFAULT_RANKING, Ranked, Ranking, prefilter_terms, rank, stats_stems
from memory.ranking.lexical import TermStats, record_stems, stems_of
from memory.ranking.vectors import (
    GENERATION_TERM,
    REINDEX_BATCH,
    Progress,
    ScopeVectors,
    record_cosines,
    semantic_candidates,
    to_blob,
)
from memory.rules.engine import (
    ERASE_KEEPS,
    candidate_cap,
    match_tokens,
    matches_filter,
    mint_record,
    normalize_text,
    parse_record_id,
    plan_eviction,
    plan_write,
    prepare_batch,
    validate_cap,
)
from memory.rules.retention import NO_RETENTION, Retention
from memory.rules.scope import validate_scope_key
from memory.rules.scorer import record_tokens
from memory.rules.visibility import legacy_origin
from memory.types import (
    DEFAULT_SCOPE_CAP,
    MAX_LIMIT,
    ORIGINS,
    AuditQuery,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    MemoryStoreError,
    Origin,
    ReadAudit,
    RecordKind,
    RecordStatus,
    SourceLink,
    WriteResult,
)

log = structlog.get_logger("memory")

Clock = Callable[[], float]
Connection = AsyncConnection[TupleRow]

# Where the bot and the service take the DSN from: every start-up error names both.
DSN_SETTING: Final = "DATABASE_URL / --database-url"
DEFAULT_APPLICATION_NAME: Final = "switchboard-memory"
# First key of the two-key advisory lock, so our per-scope locks never meet another application's.
_LOCK_NAMESPACE: Final = 0x5B_4D_45_4D  # "[MEM"
_SCHEMA_LOCK: Final = 0
_MAX_SEQ: Final = 2**63 - 1
_TOKEN: Final = re.compile(r"[a-z0-9]+")
# PostgreSQL's longest lexeme: a longer token or stem (a 4,000-character run, which the wire accepts)
# cannot be in a tsvector or tsquery, so it is left out of both — no query can name one anyway.
_MAX_LEXEME: Final = 2047

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
    )
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
    # Ranking v2 (issue 15): the engine's stems (NULL until stemmed: `_backfill_stems` fills older rows),
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
    # Erasure (issue 17): why and when a row's text was scrubbed.
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
    # The origin label (issue 14): added nullable, labelled by `_migrate_origin`, then made NOT NULL.
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS origin text",
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS origin_conversation text",
    # The embedder's vector (float32 bytes; pgvector is not assumed) and the model that made it.
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS embedding bytea",
    "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS embedding_model text",
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

_COLUMNS: Final = (
    "seq, id, scope_key, kind, text, source_thread_key, created_at, keywords, source_run_id,"
    " last_used_at, use_count, confidence, supersedes, status, origin, origin_conversation"
)
# `status = 'active'` stays a literal everywhere so the planner can use the partial FTS index.
_SELECT_MATCHES: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %(scope)s AND status = 'active' AND tsv @@ %(q)s::tsquery
    ORDER BY ts_rank(tsv, %(q)s::tsquery, 1) DESC, seq DESC
    LIMIT %(n)s
"""
_SELECT_STEM_MATCHES: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %(scope)s AND status = 'active' AND stems_tsv @@ %(q)s::tsquery
    ORDER BY ts_rank(stems_tsv, %(q)s::tsquery, 1) DESC, seq DESC
    LIMIT %(n)s
"""
_SELECT_TERM_DF: Final = "SELECT term, df FROM memory_term_df WHERE scope_key = %s AND term = ANY(%s)"
# One row per stem of the record (and '' for the record itself): +1 on insert.
_ADD_TERMS: Final = """
    INSERT INTO memory_term_df (scope_key, term, df) SELECT %s, term, 1 FROM unnest(%s::text[]) AS term
    ON CONFLICT (scope_key, term) DO UPDATE SET df = memory_term_df.df + 1
"""
_NEXT_GENERATION: Final = """
    INSERT INTO memory_term_df (scope_key, term, df) VALUES (%s, %s, 1)
    ON CONFLICT (scope_key, term) DO UPDATE SET df = memory_term_df.df + 1
"""
_SELECT_VECTORS: Final = (
    "SELECT seq, embedding FROM memory_records WHERE scope_key = %s AND status = 'active'"
    " AND embedding_model = %s AND embedding IS NOT NULL"
)
_SELECT_BY_SEQS: Final = f"""
    SELECT {_COLUMNS} FROM memory_records WHERE scope_key = %s AND status = 'active' AND seq = ANY(%s)
"""
_SET_VECTOR: Final = (
    "UPDATE memory_records SET embedding = %s, embedding_model = %s WHERE scope_key = %s AND seq = %s"
)
_SCOPES: Final = "SELECT DISTINCT scope_key FROM memory_records WHERE status = 'active' ORDER BY scope_key"
_UNVECTORED_WHERE: Final = (
    "scope_key = %s AND status = 'active' AND (embedding IS NULL OR embedding_model IS DISTINCT FROM %s)"
)
_UNVECTORED: Final = f"SELECT seq, text FROM memory_records WHERE {_UNVECTORED_WHERE} ORDER BY seq LIMIT %s"
_COUNT_UNVECTORED: Final = f"SELECT COUNT(*) FROM memory_records WHERE {_UNVECTORED_WHERE}"
_UNCOUNT_TERMS: Final = "UPDATE memory_term_df SET df = df - %s WHERE scope_key = %s AND term = ANY(%s)"
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
_SELECT_LIST: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND status = 'active' AND created_at >= %s
    ORDER BY seq DESC LIMIT %s
"""
_SELECT_LIST_MATCHING: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND status = 'active' AND tsv @@ %s::tsquery AND created_at >= %s
    ORDER BY seq DESC LIMIT %s
"""
_SELECT_SAME_NORM: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND status = 'active' AND md5(norm) = md5(%s) AND norm = %s
    ORDER BY seq
"""
_SELECT_ONE_ACTIVE: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND seq = %s AND id = %s AND status = 'active'
"""
_SELECT_ACTIVE: Final = f"""
    SELECT {_COLUMNS} FROM memory_records WHERE scope_key = %s AND status = 'active' ORDER BY seq
"""
_LOCK_SCOPE: Final = f"SELECT pg_advisory_xact_lock({_LOCK_NAMESPACE}, hashtext(%s))"
_LOCK_SCHEMA: Final = f"SELECT pg_advisory_xact_lock({_LOCK_NAMESPACE}, {_SCHEMA_LOCK})"
_MAX_SEQ_OF_SCOPE: Final = "SELECT COALESCE(MAX(seq), 0) FROM memory_records WHERE scope_key = %s"
_COUNT_ACTIVE: Final = "SELECT COUNT(*) FROM memory_records WHERE scope_key = %s AND status = 'active'"
_BUMP_DEDUP: Final = "UPDATE memory_records SET use_count = use_count + 1 WHERE scope_key = %s AND seq = %s"
# The usage bump: ONE statement for the whole returned set (§17), by primary key.
_BUMP_USAGE: Final = (
    "UPDATE memory_records SET last_used_at = %s, use_count = use_count + 1"
    " WHERE scope_key = %s AND seq = ANY(%s)"
)
_NO_COMMIT_WAIT: Final = "SET LOCAL synchronous_commit = off"
_SUPERSEDE: Final = (
    "UPDATE memory_records SET status = 'superseded' WHERE scope_key = %s AND seq = %s AND status = 'active'"
    " RETURNING stems"
)
_EVICT: Final = (
    "UPDATE memory_records SET status = 'evicted' WHERE scope_key = %s AND seq = ANY(%s) RETURNING stems"
)
_INSERT: Final = """
    INSERT INTO memory_records (scope_key, seq, id, kind, text, norm, keywords, tokens, source_thread_key,
        source_run_id, created_at, last_used_at, use_count, confidence, supersedes, status, stems, origin,
        origin_conversation)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""

_NO_CUTOFF: Final = float("-inf")
_SELECT_BY_IDS: Final = f"""
    SELECT {_COLUMNS} FROM memory_records
    WHERE scope_key = %s AND id = ANY(%s) AND erased_at IS NULL ORDER BY seq
"""
_LINK_SOURCE: Final = """
    INSERT INTO memory_run_sources (message, run_id, scope_key, linked_at) VALUES (%s, %s, %s, %s)
    ON CONFLICT DO NOTHING
"""
_INSERT_AUDIT: Final = """
    INSERT INTO memory_read_audit (run_id, thread_key, asker, scope_keys, record_ids, ranks, at)
    VALUES (%s, %s, %s, %s, %s, %s, %s)
"""
# What an erased row keeps: identity, scope, origin, provenance, dates, status, reason. Every other
# column — text, norm, keywords, tokens, and whatever later columns hold (a vector) — is scrubbed.
_KEPT_COLUMNS = ERASE_KEEPS

# A row as selected: its seq (the key's second half) and the record.
_Row = tuple[int, MemoryRecord]


def match_query(query: str) -> str | None:
    """The OR of the query's match tokens as a tsquery literal, or None when it has no tokens.

    Every term is an `[a-z0-9]+` token in quotes, so user text never becomes tsquery syntax.
    """
    return tsquery_of(match_tokens(query))


def tsquery_of(terms: Sequence[str]) -> str | None:
    """Tokens or stems (each `[a-z0-9]+`, quoted) OR-joined as a tsquery literal; None when none."""
    quoted = [f"'{term}'" for term in terms if _TOKEN.fullmatch(term) and len(term) <= _MAX_LEXEME]
    return " | ".join(quoted) or None


class PostgresMemoryStore:
    """A `MemoryStore` on PostgreSQL (psycopg 3 async, one connection pool).

    The constructor only checks its arguments (a malformed DSN fails there); `await open()` — or the
    first operation — verifies the server, applies the schema and starts the pool. Call `open()` at
    start-up so an unreachable server is one clear line naming the setting, not a later surprise.
    """

    def __init__(
        self,
        dsn: str,
        cap: int = DEFAULT_SCOPE_CAP,
        *,
        clock: Clock = time.time,
        ranking: Ranking = DEFAULT_RANKING,
        embedder: Embedder | None = None,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,
        reconnect_timeout: float = 10.0,
        application_name: str | None = None,
        connection_class: type[Connection] = AsyncConnection,
        retention: Retention = NO_RETENTION,
    ) -> None:
        """`connection_class` makes every connection (a subclass may observe the statements run)."""
        if not 1 <= min_size <= max_size:
            raise ValueError(f"pool sizes must satisfy 1 <= min_size <= max_size, got {min_size}, {max_size}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        params = _dsn_params(dsn)  # ValueError naming the setting when malformed
        self._where = _describe(params)
        self._dsn = dsn
        self._cap = validate_cap(cap)
        self._clock = clock
        self._ranking = ranking
        self._embedder = embedder
        # Each scope's vectors as one matrix, re-read when the scope's generation moves (any replica).
        self._vector_cache: dict[str, ScopeVectors] = {}
        self._min_size = min_size
        self._max_size = max_size
        self._timeout = timeout
        self._reconnect_timeout = reconnect_timeout
        self._connection_class = connection_class
        # Explicit, else the DSN's own, else ours: what pg_stat_activity shows for this pool.
        self._application_name = (
            application_name or params.get("application_name") or DEFAULT_APPLICATION_NAME
        )
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._opening = asyncio.Lock()
        self._open_attempts = 0
        self._open_error: MemoryStoreError | None = None
        self._purge: asyncio.Task[None] | None = None
        self._closed = False
        self._retention = retention
        self._scrub: str | None = None  # the erase's SET list, from the live table's columns

    @classmethod
    async def connect(cls, dsn: str, cap: int = DEFAULT_SCOPE_CAP, **options: Any) -> PostgresMemoryStore:
        """A store that is open and ready, or a `MemoryStoreError` naming the DSN setting."""
        store = cls(dsn, cap, **options)
        await store.open()
        return store

    @property
    def cap(self) -> int:
        return self._cap

    @property
    def where(self) -> str:
        """host:port/dbname of the server (for logs: never the password)."""
        return self._where

    @property
    def application_name(self) -> str:
        """The `application_name` of every pooled connection (what `pg_stat_activity` shows)."""
        return self._application_name

    async def open(self) -> None:
        """Verify the server, apply the schema, start the pool; idempotent.

        Raises `MemoryStoreError` naming DATABASE_URL / --database-url when the server cannot be used.
        """
        finished_before = self._open_attempts  # attempts finished before this caller queued
        async with self._opening:
            if self._closed:
                raise MemoryStoreError("the PostgreSQL memory store is closed")
            if self._pool is not None:
                return
            if self._open_attempts != finished_before and self._open_error is not None:
                # Another caller tried while this one queued, and failed: one dial, not one per caller.
                raise self._open_error
            try:
                self._pool = await self._open_pool()
                self._open_error = None
            except MemoryStoreError as error:
                self._open_error = error
                raise
            finally:
                self._open_attempts += 1
            log.info("memory.store.opened", store="postgres", where=self._where, cap=self._cap)

    async def aclose(self) -> None:
        async with self._opening:
            self._closed = True
            pool, self._pool = self._pool, None
        if self._purge is not None:
            self._purge.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._purge
        if pool is not None:
            await pool.close()

    async def retrieve(self, scope_key: str, query: str, limit: int) -> builtins.list[MemoryRecord]:
        """FTS prefilter by rank, the engine's ranking, one batched usage bump; `[]` if the server is lost."""
        validate_scope_key(scope_key)
        terms = prefilter_terms(self._ranking, query)
        tsquery = tsquery_of(terms)
        if tsquery is None or limit <= 0:
            return []
        try:
            pool = await self._ready()
            ranked = await self._retrieve(pool, scope_key, query, terms, tsquery, limit)
            return [item.record for item in ranked]
        except (psycopg.Error, MemoryStoreError) as error:
            log.warning(
                "memory.retrieve_failed",
                store="postgres",
                scope_key=scope_key,
                error=_kind(error),
                message=f"PostgreSQL memory unavailable, continuing without memory: {_first_line(error)}",
            )
            return []

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        """One transaction per batch under the scope's advisory lock: plan, apply, evict — or nothing.

        `cap` overrides the store's cap for this batch (the memory service's per-request cap).
        """
        validate_scope_key(scope_key)
        batch_cap = self._cap if cap is None else validate_cap(cap)
        # Validation and redaction are CPU work on untrusted text: off the event loop.
        batch = await asyncio.to_thread(prepare_batch, candidates)
        if not batch:
            return WriteResult()
        pool = await self._ready()
        try:
            result = await self._write(pool, scope_key, batch, batch_cap)
        except psycopg.Error as error:
            raise _failure("write", scope_key, error) from error
        if result.evicted:
            log.info(
                "memory.store.evicted", scope_key=scope_key, candidates=len(batch), evicted=result.evicted
            )
        return result

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> builtins.list[MemoryRecord]:
        """Active records newest first, optionally through the same FTS prefilter; no usage bump."""
        validate_scope_key(scope_key)
        params: tuple[object, ...]
        cutoff = self._retention.cutoff(scope_key, self._clock())
        since = _NO_CUTOFF if cutoff is None else cutoff
        if query is None:
            sql, params = _SELECT_LIST, (scope_key, since, limit)
        else:
            tsquery = match_query(query)
            if tsquery is None:
                return []
            sql, params = _SELECT_LIST_MATCHING, (scope_key, tsquery, since, limit)
        if limit <= 0:
            return []
        pool = await self._ready()
        try:
            async with pool.connection() as conn:
                rows = await _fetch(conn, sql, params)
        except psycopg.Error as error:
            raise _failure("list", scope_key, error) from error
        records = [record for _, record in rows]
        if query is not None:
            # The prefilter already is this gate (the same engine tokens); kept as the definition.
            records = [record for record in records if matches_filter(record, query)]
        return records

    async def scope_keys(self) -> builtins.list[str]:
        """Every scope with an active record (for `switchboard memory reindex`)."""
        pool = await self._ready()
        async with pool.connection() as conn:
            cursor = await conn.execute(_SCOPES)
            return [str(row[0]) for row in await cursor.fetchall()]

    async def reindex(
        self, scope_key: str, *, batch: int = REINDEX_BATCH, progress: Progress | None = None
    ) -> int:
        """Vectors for the scope's active records that have none of this embedder's, a batch per
        transaction: safe to interrupt and to run again. Returns how many were made."""
        validate_scope_key(scope_key)
        embedder = self._embedder
        if embedder is None:
            return 0
        pool = await self._ready()
        done = 0
        while True:
            async with pool.connection() as conn:
                cursor = await conn.execute(_UNVECTORED, (scope_key, embedder.name, batch))
                rows = await cursor.fetchall()
                if rows:
                    vectors = await asyncio.to_thread(embedder.embed, [str(text) for _, text in rows])
                    async with conn.transaction():
                        for (seq, _), vector in zip(rows, vectors, strict=True):
                            await conn.execute(_SET_VECTOR, (to_blob(vector), embedder.name, scope_key, seq))
                        await conn.execute(_NEXT_GENERATION, (scope_key, GENERATION_TERM))
                cursor = await conn.execute(_COUNT_UNVECTORED, (scope_key, embedder.name))
                left = int(_one(await cursor.fetchone()))
            done += len(rows)
            if progress is not None:
                progress(scope_key, done, done + left)
            if not rows or left == 0:
                return done

    async def forget(self, scope_key: str, record_id: str) -> bool:
        """Soft-delete one active record of this scope; a foreign or unknown id forgets nothing."""
        validate_scope_key(scope_key)
        seq = _own_seq(scope_key, record_id)
        if seq is None:
            return False  # not an id minted in this scope: no row of this scope can hold it
        forgotten = (
            await self._erase(
                "forget",
                "scope_key = %s AND seq = %s AND id = %s AND status = 'active'",
                (scope_key, seq, record_id),
                "forgotten",
            )
            > 0
        )
        log.info("memory.forget", store="postgres", scope_key=scope_key, id=record_id, forgotten=forgotten)
        return forgotten

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        validate_scope_key(scope_key)
        erased = await self._erase("erase", "scope_key = %s", (scope_key,), reason)
        log.info("memory.store.erased", store="postgres", scope_key=scope_key, reason=reason, erased=erased)
        return erased

    async def erase_expired(self) -> int:
        """Every scope: the configured ttl for all but the scopes with their own, then each of those."""
        retention = self._retention
        if not retention.expires:
            return 0
        now = self._clock()
        own = builtins.list(retention.scope_ttl_days)
        total = 0
        if retention.ttl_days is not None:
            default_cutoff = now - retention.ttl_days * 86_400.0
            total += await self._erase(
                "erase",
                "created_at < %s AND NOT (scope_key = ANY(%s::text[]))",
                (default_cutoff, own),
                "expired",
            )
        for scope_key in own:
            cutoff = retention.cutoff(scope_key, now)
            if cutoff is not None:
                total += await self._erase(
                    "erase", "scope_key = %s AND created_at < %s", (scope_key, cutoff), "expired"
                )
        if total:
            log.info("memory.store.expired", store="postgres", erased=total)
        return total

    async def link_sources(self, link: SourceLink) -> None:
        if not link.messages or not link.scope_keys:
            return
        for key in link.scope_keys:
            validate_scope_key(key)
        rows = [(m, link.run_id, key, self._clock()) for m in link.messages for key in link.scope_keys]
        pool = await self._ready()
        try:
            async with pool.connection() as conn, conn.cursor() as cursor:
                await cursor.executemany(_LINK_SOURCE, rows)
        except psycopg.Error as error:
            raise _failure("link_sources", "-", error) from error

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        wanted = builtins.list(dict.fromkeys(messages))
        if not wanted:
            return 0
        erased = await self._erase(
            "erase",
            "(scope_key, source_run_id) IN"
            " (SELECT scope_key, run_id FROM memory_run_sources WHERE message = ANY(%s::text[]))",
            (wanted,),
            reason,
        )
        log.info("memory.store.sources_erased", store="postgres", messages=len(wanted), erased=erased)
        return erased

    async def fetch(self, scope_key: str, record_ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        validate_scope_key(scope_key)
        ids = builtins.list(dict.fromkeys(record_ids))[:MAX_LIMIT]
        if not ids:
            return []
        pool = await self._ready()
        try:
            async with pool.connection() as conn:
                rows = await _fetch(conn, _SELECT_BY_IDS, (scope_key, ids))
        except psycopg.Error as error:
            raise _failure("fetch", scope_key, error) from error
        return [record for _, record in rows]

    async def record_read(self, entry: ReadAudit) -> None:
        cutoff = self._retention.audit_cutoff(self._clock())
        pool = await self._ready()
        try:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute("DELETE FROM memory_read_audit WHERE at < %s", (cutoff,))
                await conn.execute(
                    _INSERT_AUDIT,
                    (
                        entry.run_id,
                        entry.thread_key,
                        entry.asker,
                        builtins.list(entry.scope_keys),
                        [record_id for record_id, _ in entry.records],
                        [rank for _, rank in entry.records],
                        entry.at,
                    ),
                )
        except psycopg.Error as error:
            raise _failure("record_read", "-", error) from error

    async def read_audit(self, query: AuditQuery) -> builtins.list[ReadAudit]:
        cutoff = self._retention.audit_cutoff(self._clock())
        if query.record_id is not None:
            where, value = "record_ids @> ARRAY[%s]::text[]", query.record_id
        elif query.run_id is not None:
            where, value = "run_id = %s", query.run_id
        elif query.user_id is not None:
            where, value = "asker = %s", query.user_id
        else:
            where, value = "thread_key = %s", query.thread_key or ""
        pool = await self._ready()
        try:
            async with pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT run_id, thread_key, asker, scope_keys, record_ids, ranks, at"
                    f" FROM memory_read_audit WHERE {where} AND at >= %s"
                    " ORDER BY at DESC, audit_id DESC LIMIT %s",
                    (value, cutoff, query.limit),
                )
                rows = await cursor.fetchall()
        except psycopg.Error as error:
            raise _failure("read_audit", "-", error) from error
        return [
            ReadAudit(
                run_id=row[0],
                thread_key=row[1],
                asker=row[2],
                scope_keys=tuple(row[3]),
                records=tuple(sorted(zip(row[4], row[5], strict=True), key=lambda pair: (pair[1], pair[0]))),
                at=float(row[6]),
            )
            for row in rows
        ]

    async def _erase(self, action: str, where: str, params: Sequence[object], reason: EraseReason) -> int:
        """One UPDATE in place over the not-yet-erased rows matching `where`: text, norm, keywords,
        tokens and any later content column (a vector) scrubbed; an active row becomes `forgotten`."""
        pool = await self._ready()
        try:
            async with pool.connection() as conn, conn.transaction():
                if self._scrub is None:
                    self._scrub = await _scrub_assignments(conn)
                return await _erase_rows(conn, self._scrub, where, params, reason, self._clock())
        except psycopg.Error as error:
            raise _failure(action, "-", error) from error

    # --- the work ------------------------------------------------------------------------------------

    async def _ready(self) -> AsyncConnectionPool[Connection]:
        """The open pool, opening it on first use (a failed open is retried by the next call)."""
        pool = self._pool
        if pool is None:
            await self.open()
            pool = self._pool
            assert pool is not None
        return pool

    async def _open_pool(self) -> AsyncConnectionPool[Connection]:
        connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": self._application_name,
            "connect_timeout": max(2, round(self._timeout)),
        }
        try:
            conn = await self._connection_class.connect(self._dsn, **connect_kwargs)
        except psycopg.Error as error:
            raise self._unusable("cannot connect to", error) from None
        try:
            await _apply_schema(conn)
        except psycopg.Error as error:
            raise self._unusable("cannot prepare the memory schema in", error) from None
        finally:
            await conn.close()
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            self._dsn,
            kwargs=connect_kwargs,
            connection_class=self._connection_class,
            min_size=self._min_size,
            max_size=self._max_size,
            open=False,
            configure=_configure,
            # A connection whose backend died (server restart, terminated backend) fails this check
            # and is replaced, instead of failing the caller's statement.
            check=self._check_connection,
            timeout=self._timeout,
            # Reconnection backs off exponentially (1 s, 2 s, 4 s …) and gives up after this long; the
            # next request then dials at once. Short, so a returning server is used within seconds.
            reconnect_timeout=self._reconnect_timeout,
            name=self._application_name,
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except psycopg.Error as error:
            await pool.close()
            raise self._unusable("cannot connect to", error) from None
        return pool

    async def _check_connection(self, conn: Connection) -> None:
        """The pool's check before handing a connection out; one dead connection means the server
        restarted or dropped us, so every idle one is checked and replaced at once. Otherwise the pool
        would meet them one by one, backing off 1 s, 2 s, 4 s … between them."""
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            if self._pool is not None and self._purge is None:
                self._purge = asyncio.create_task(self._purge_dead(self._pool))
            raise

    async def _purge_dead(self, pool: AsyncConnectionPool[Connection]) -> None:
        try:
            await pool.check()
        except psycopg.Error as error:
            log.warning("memory.store.pool_check_failed", store="postgres", error=_kind(error))
        finally:
            self._purge = None

    def _unusable(self, what: str, error: psycopg.Error) -> MemoryStoreError:
        return MemoryStoreError(f"{what} PostgreSQL at {self._where} ({DSN_SETTING}): {_first_line(error)}")

    async def _retrieve(
        self,
        pool: AsyncConnectionPool[Connection],
        scope_key: str,
        query: str,
        terms: Sequence[str],
        tsquery: str,
        limit: int,
    ) -> builtins.list[Ranked]:
        found = await self._retrieve_scopes(pool, [scope_key], query, terms, tsquery, limit)
        return found.get(scope_key, [])

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """Several scopes on one connection, each ranked as its own retrieve ranks it, the query embedded
        once, and every scope's usage bump in ONE transaction. `{}` when the server is lost (advisory)."""
        keys = builtins.list(dict.fromkeys(scope_keys))
        for key in keys:
            validate_scope_key(key)
        terms = prefilter_terms(self._ranking, query)
        tsquery = tsquery_of(terms)
        if tsquery is None or limit <= 0 or not keys:
            return {}
        try:
            pool = await self._ready()
            return await self._retrieve_scopes(pool, keys, query, terms, tsquery, limit)
        except (psycopg.Error, MemoryStoreError) as error:
            log.warning(
                "memory.retrieve_failed",
                store="postgres",
                scope_keys=keys,
                error=_kind(error),
                message=f"PostgreSQL memory unavailable, continuing without memory: {_first_line(error)}",
            )
            return {}

    async def _retrieve_scopes(
        self,
        pool: AsyncConnectionPool[Connection],
        scope_keys: Sequence[str],
        query: str,
        terms: Sequence[str],
        tsquery: str,
        limit: int,
    ) -> dict[str, builtins.list[Ranked]]:
        # No transaction for the reads: each SELECT is one snapshot (before or after any concurrent
        # batch), and a bump landing on a row a concurrent batch just retired is harmless.
        chosen: dict[
            str, tuple[builtins.list[Ranked], builtins.list[int], builtins.list[tuple[int, Matrix]]]
        ] = {}
        query_vector = None
        if self._embedder is not None and self._ranking.stemmed:  # once for every scope
            query_vector = await asyncio.to_thread(self._embedder.embed_query, query)
        async with pool.connection() as conn:
            now = self._clock()
            for scope_key in scope_keys:
                chosen[scope_key] = await self._rank_scope(
                    conn, scope_key, query, terms, tsquery, limit, now, query_vector
                )
            if not any(seqs or fresh for _, seqs, fresh in chosen.values()):
                return {}
            # One round trip (pipeline) and one transaction for every scope's bump; no WAL flush wait:
            # a usage bump lost in a server crash is harmless, and retrieve is on every request's path.
            async with conn.pipeline(), conn.transaction():
                await conn.execute(_NO_COMMIT_WAIT)
                for scope_key, (_, seqs, fresh) in chosen.items():
                    if seqs:
                        await conn.execute(_BUMP_USAGE, (now, scope_key, seqs))
                    if fresh and self._embedder is not None:  # vectors made lazily, on use
                        model = self._embedder.name
                        for seq, vector in fresh:
                            await conn.execute(_SET_VECTOR, (to_blob(vector), model, scope_key, seq))
                        await conn.execute(_NEXT_GENERATION, (scope_key, GENERATION_TERM))
        return {
            scope_key: [
                Ranked(replace(r.record, last_used_at=now, use_count=r.record.use_count + 1), r.relevance)
                for r in ranked
            ]
            for scope_key, (ranked, _, _) in chosen.items()
            if ranked
        }

    async def _rank_scope(
        self,
        conn: Connection,
        scope_key: str,
        query: str,
        terms: Sequence[str],
        tsquery: str,
        limit: int,
        now: float,
        query_vector: Matrix | None,
    ) -> tuple[builtins.list[Ranked], builtins.list[int], builtins.list[tuple[int, Matrix]]]:
        """One scope's ranking: its returned records, their seqs (to bump), and vectors made on use."""
        params = {"scope": scope_key, "q": tsquery, "n": candidate_cap(limit)}
        stemmed = self._ranking.stemmed
        rows = await _fetch(conn, _SELECT_STEM_MATCHES if stemmed else _SELECT_MATCHES, params)
        # The rank only chose who reaches the engine; seq order makes ties rank as in every store.
        rows.sort(key=lambda row: row[0])
        stats, generation = await _term_stats(conn, scope_key, terms) if stemmed else (None, 0)
        cosines: dict[str, float] | None = None
        centered: dict[str, float] | None = None
        fresh: builtins.list[tuple[int, Matrix]] = []
        if stats is not None and query_vector is not None:
            rows, cosines, centered, fresh = await self._semantic(
                conn, scope_key, query_vector, rows, generation, limit
            )
        cutoff = self._retention.cutoff(scope_key, now)
        if cutoff is not None:  # expired: never returned, erased on the scope's next write
            rows = [row for row in rows if row[1].created_at >= cutoff]
        records = [record for _, record in rows]
        if stats is not None and self._ranking.feedback.enabled:  # feedback stems weigh their IDF too
            stats = await _more_term_stats(conn, scope_key, stats, stats_stems(self._ranking, query, records))
        ranked = rank(
            records, query, limit, now, self._ranking, stats=stats, cosines=cosines, centered=centered
        )
        seqs = {record.id: seq for seq, record in rows}
        return ranked, [seqs[item.record.id] for item in ranked], fresh

    async def _semantic(
        self,
        conn: Connection,
        scope_key: str,
        query_vector: Matrix,
        rows: builtins.list[_Row],
        generation: int,
        limit: int,
    ) -> tuple[builtins.list[_Row], dict[str, float], dict[str, float], builtins.list[tuple[int, Matrix]]]:
        """The candidates' plain and centered cosines (the centroid is the whole scope's), plus the
        records the prefilter missed that are close enough in meaning, and vectors made now for
        candidates that had none of this model."""
        embedder = self._embedder
        assert embedder is not None
        vectors = self._vector_cache.get(scope_key)
        if vectors is None or vectors.generation != generation:
            cursor = await conn.execute(_SELECT_VECTORS, (scope_key, embedder.name))
            vectors = ScopeVectors.build(generation, await cursor.fetchall())
            self._vector_cache[scope_key] = vectors
        cosines, centered = vectors.cosines(query_vector)
        threshold = self._ranking.semantic_threshold
        extra = semantic_candidates(cosines, threshold, (seq for seq, _ in rows), candidate_cap(limit))
        if extra:
            rows = sorted(
                [*rows, *await _fetch(conn, _SELECT_BY_SEQS, (scope_key, extra))], key=lambda r: r[0]
            )
        unvectored = [(seq, record) for seq, record in rows if seq not in cosines]
        fresh: builtins.list[tuple[int, Matrix]] = []
        if unvectored:
            made = await asyncio.to_thread(embedder.embed, [record.text for _, record in unvectored])
            seqs = [seq for seq, _ in unvectored]
            plain, close = vectors.cosines_of(seqs, made, query_vector)
            cosines.update(plain)
            centered.update(close)
            fresh.extend(zip(seqs, made, strict=True))
        ids_by_seq = {seq: record.id for seq, record in rows}
        return (
            rows,
            record_cosines(cosines, ids_by_seq),
            record_cosines(centered, ids_by_seq),
            fresh,
        )

    async def _write(
        self,
        pool: AsyncConnectionPool[Connection],
        scope_key: str,
        batch: Sequence[MemoryCandidate],
        cap: int,
    ) -> WriteResult:
        inserted = deduped = superseded = evicted = 0
        vectors = None
        if self._embedder is not None:  # off the loop, before the scope's lock is taken
            vectors = await asyncio.to_thread(self._embedder.embed, [c.text for c in batch])
        async with pool.connection() as conn, conn.transaction():
            # The scope's single writer: held until COMMIT/ROLLBACK, so seq and lookups cannot race.
            await conn.execute(_LOCK_SCOPE, (scope_key,))
            cursor = await conn.execute(_MAX_SEQ_OF_SCOPE, (scope_key,))
            seq = int(_one(await cursor.fetchone()))
            now = self._clock()
            cutoff = self._retention.cutoff(scope_key, now)
            if cutoff is not None:  # the scope is being written: its expired records go now
                if self._scrub is None:
                    self._scrub = await _scrub_assignments(conn)
                await _erase_rows(
                    conn,
                    self._scrub,
                    "scope_key = %s AND created_at < %s",
                    (scope_key, cutoff),
                    "expired",
                    now,
                )
            for index, candidate in enumerate(batch):
                lookup = await _write_pool(conn, scope_key, candidate)
                plan = plan_write(scope_key, candidate, [record for _, record in lookup])
                seqs = {record.id: row_seq for row_seq, record in lookup}
                if plan.action == "dedup" and plan.dedup_id is not None:
                    await conn.execute(_BUMP_DEDUP, (scope_key, seqs[plan.dedup_id]))
                    deduped += 1
                    continue
                if plan.supersede_id is not None:
                    cursor = await conn.execute(_SUPERSEDE, (scope_key, seqs[plan.supersede_id]))
                    superseded += cursor.rowcount
                    await _uncount(conn, scope_key, await cursor.fetchall())
                seq += 1
                await _insert(conn, seq, mint_record(scope_key, seq, candidate, now, plan.supersede_id))
                if vectors is not None and self._embedder is not None:
                    blob = to_blob(vectors[index])
                    await conn.execute(_SET_VECTOR, (blob, self._embedder.name, scope_key, seq))
                inserted += 1
            cursor = await conn.execute(_COUNT_ACTIVE, (scope_key,))
            if int(_one(await cursor.fetchone())) > cap:
                active = await _fetch(conn, _SELECT_ACTIVE, (scope_key,))
                doomed = set(plan_eviction([record for _, record in active], cap))
                doomed_seqs = [row_seq for row_seq, record in active if record.id in doomed]
                cursor = await conn.execute(_EVICT, (scope_key, doomed_seqs))
                await _uncount(conn, scope_key, await cursor.fetchall())
                evicted = len(doomed_seqs)
        return WriteResult(inserted=inserted, deduped=deduped, superseded=superseded, evicted=evicted)


# --- helpers ------------------------------------------------------------------------------------------


async def _configure(conn: Connection) -> None:
    # The advisory lock is taken by the batch's first statement; READ COMMITTED gives every later
    # statement a fresh snapshot, so the batch sees what the previous lock holder committed.
    await conn.set_isolation_level(IsolationLevel.READ_COMMITTED)


async def _apply_schema(conn: Connection) -> None:
    """CREATE … IF NOT EXISTS under a lock, so replicas starting together do not race each other."""
    async with conn.transaction():
        await conn.execute(_LOCK_SCHEMA)
        for statement in _SCHEMA:
            await conn.execute(statement)
        await _migrate_origin(conn)
        stemmed = await _backfill_stems(conn)
        cursor = await conn.execute(_TERM_DF_BUILT)
        if stemmed or await cursor.fetchone() is None:
            for statement in _REBUILD_TERM_DF:
                await conn.execute(statement)
            log.info("memory.store.term_df_rebuilt", store="postgres", stemmed=stemmed)


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
                    (sorted(s for s in stems_of(text, keywords) if len(s) <= _MAX_LEXEME), scope_key, seq)
                    for scope_key, seq, text, keywords in rows
                ],
            )
        done += len(rows)


async def _term_stats(conn: Connection, scope_key: str, stems: Sequence[str]) -> tuple[TermStats, int]:
    """The scope's document frequencies for the stems, and its vector generation: one statement."""
    cursor = await conn.execute(_SELECT_TERM_DF, (scope_key, ["", GENERATION_TERM, *stems]))
    found = {str(term): int(df) for term, df in await cursor.fetchall()}
    generation = found.pop(GENERATION_TERM, 0)
    return TermStats(documents=found.pop("", 0), frequencies=found), generation


async def _more_term_stats(
    conn: Connection, scope_key: str, stats: TermStats, stems: Sequence[str]
) -> TermStats:
    """`stats` with the frequencies of those of `stems` it lacks: one statement, none if it lacks none."""
    missing = [stem for stem in stems if stem not in stats.frequencies]
    if not missing:
        return stats
    cursor = await conn.execute(_SELECT_TERM_DF, (scope_key, missing))
    found = {**stats.frequencies, **{str(term): int(df) for term, df in await cursor.fetchall()}}
    return TermStats(documents=stats.documents, frequencies=found)


async def _uncount(conn: Connection, scope_key: str, retired: Sequence[TupleRow]) -> None:
    """Take retired rows' stems (and the rows themselves) out of the scope's document frequencies."""
    counts: Counter[str] = Counter()
    for (stems,) in retired:
        if stems is not None:  # a row never stemmed was never counted
            counts.update(["", *stems])
    by_amount: dict[int, builtins.list[str]] = {}
    for term, amount in counts.items():
        by_amount.setdefault(amount, []).append(term)
    for amount, terms in sorted(by_amount.items()):  # one statement per distinct amount (mostly just 1)
        await conn.execute(_UNCOUNT_TERMS, (amount, scope_key, terms))
    if retired:
        await conn.execute(_NEXT_GENERATION, (scope_key, GENERATION_TERM))


async def _migrate_origin(conn: Connection) -> None:
    """Rows written before the origin label get their scope's conservative label (`legacy_origin`),
    once: after that the column is NOT NULL and this is one catalogue lookup."""
    cursor = await conn.execute(_ORIGIN_NULLABLE)
    if not _one(await cursor.fetchone()):
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


async def _erase_rows(
    conn: Connection, scrub: str, where: str, params: Sequence[object], reason: EraseReason, now: float
) -> int:
    """Inside a transaction: scrub the not-yet-erased rows matching `where` in place; an active row
    becomes `forgotten` and leaves its scope's document frequencies (a stem nobody holds is dropped)."""
    cursor = await conn.execute(
        "WITH doomed AS (SELECT scope_key, seq, stems, status FROM memory_records"
        f" WHERE erased_at IS NULL AND ({where}) FOR UPDATE)"
        f" UPDATE memory_records AS m SET {scrub}, erased_reason = %s, erased_at = %s,"
        " status = CASE WHEN m.status = 'active' THEN 'forgotten' ELSE m.status END"
        " FROM doomed WHERE m.scope_key = doomed.scope_key AND m.seq = doomed.seq"
        " RETURNING doomed.scope_key, doomed.stems, doomed.status",
        (*params, reason, now),
    )
    rows = await cursor.fetchall()
    retired: dict[str, builtins.list[TupleRow]] = {}
    for scope_key, stems, status in rows:
        if status == "active":
            retired.setdefault(scope_key, []).append((stems,))
    for scope_key, stems in retired.items():
        await _uncount(conn, scope_key, stems)
    if retired:
        await conn.execute(
            "DELETE FROM memory_term_df WHERE scope_key = ANY(%s::text[]) AND df <= 0 AND term <> ''",
            (builtins.list(retired),),
        )
    return len(rows)


async def _scrub_assignments(conn: Connection) -> str:
    """`col = NULL | default | ''` for every content column of the live table (generated ones follow)."""
    cursor = await conn.execute(
        "SELECT column_name, is_nullable, column_default, is_generated FROM information_schema.columns"
        " WHERE table_name = 'memory_records' AND table_schema = current_schema() ORDER BY ordinal_position"
    )
    parts = []
    for name, nullable, default, generated in await cursor.fetchall():
        if name in _KEPT_COLUMNS or generated == "ALWAYS":
            continue
        value = "NULL" if nullable == "YES" else (default if default is not None else "''")
        parts.append(f"{name} = {value}")
    return ", ".join(parts)


async def _write_pool(conn: Connection, scope_key: str, candidate: MemoryCandidate) -> builtins.list[_Row]:
    """Exactly the rows plan_write reads (§18): the supersede target, else the same-norm actives."""
    if candidate.supersedes:
        seq = _own_seq(scope_key, candidate.supersedes)
        if seq is None:
            return []
        return await _fetch(conn, _SELECT_ONE_ACTIVE, (scope_key, seq, candidate.supersedes))
    norm = normalize_text(candidate.text)
    return await _fetch(conn, _SELECT_SAME_NORM, (scope_key, norm, norm))


async def _insert(conn: Connection, seq: int, record: MemoryRecord) -> None:
    stems = sorted(stem for stem in record_stems(record) if len(stem) <= _MAX_LEXEME)
    await conn.execute(
        _INSERT,
        (
            record.scope_key,
            seq,
            record.id,
            record.kind,
            record.text,
            normalize_text(record.text),
            builtins.list(record.keywords),
            sorted(token for token in record_tokens(record) if len(token) <= _MAX_LEXEME),
            record.source_thread_key,
            record.source_run_id,
            record.created_at,
            record.last_used_at,
            record.use_count,
            record.confidence,
            record.supersedes,
            record.status,
            stems,
            record.origin,
            record.origin_conversation,
        ),
    )
    await conn.execute(_ADD_TERMS, (record.scope_key, ["", *stems]))
    await conn.execute(_NEXT_GENERATION, (record.scope_key, GENERATION_TERM))


async def _fetch(conn: Connection, sql: str, params: Any) -> builtins.list[_Row]:
    cursor = await conn.execute(sql, params)
    return [_row(row) for row in await cursor.fetchall()]


def _row(row: TupleRow) -> _Row:
    """One selected row (in `_COLUMNS` order) as its seq and record."""
    record = MemoryRecord(
        id=row[1],
        scope_key=row[2],
        kind=cast(RecordKind, row[3]),
        text=row[4],
        source_thread_key=row[5],
        created_at=row[6],
        keywords=tuple(row[7]),
        source_run_id=row[8],
        last_used_at=row[9],
        use_count=row[10],
        confidence=row[11],
        supersedes=row[12],
        status=cast(RecordStatus, row[13]),
        origin=cast(Origin, row[14]) if row[14] in ORIGINS else "unknown",
        origin_conversation=row[15],
    )
    return int(row[0]), record


def _one(row: TupleRow | None) -> Any:
    if row is None:
        raise psycopg.DataError("expected one row, got none")
    return row[0]


def _own_seq(scope_key: str, record_id: str) -> int | None:
    """The seq of an id minted in this scope; None for a foreign, malformed or out-of-range id."""
    parsed = parse_record_id(record_id)
    if parsed is None or parsed[0] != scope_key or parsed[1] > _MAX_SEQ:
        return None
    return parsed[1]


def _dsn_params(dsn: str) -> dict[str, str]:
    """A DSN's parameters; a malformed DSN is refused naming the setting.

    The parser's own message is not repeated: it quotes the DSN, password included.
    """
    if not dsn.strip():
        raise ValueError(f"{DSN_SETTING} is empty; expected postgresql://user:password@host:port/dbname")
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        raise ValueError(
            f"{DSN_SETTING} is not a valid PostgreSQL connection string;"
            " expected postgresql://user:password@host:port/dbname or key=value pairs"
        ) from None
    return {key: str(value) for key, value in params.items() if value is not None}


def _describe(params: dict[str, str]) -> str:
    """host:port/dbname — never the password."""
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or '?'}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _failure(action: str, scope_key: str, error: psycopg.Error) -> MemoryStoreError:
    log.warning(f"memory.{action}_failed", store="postgres", scope_key=scope_key, error=_kind(error))
    return MemoryStoreError(f"PostgreSQL memory {action} failed: {_first_line(error)}")


def _kind(error: BaseException) -> str:
    return type(error).__name__
