"""The statements of the PostgreSQL store's reads and writes, one place for all of them.

Every data statement is filtered by `scope_key` (a test holds them to it by their names: `_SELECT…`,
`_BUMP…`, `_COUNT…` and the rest). `status = 'active'` stays a literal everywhere so the planner can
use the partial FTS indexes.
"""

from __future__ import annotations

from typing import Final

# First key of the two-key advisory lock, so our per-scope locks never meet another application's.
_LOCK_NAMESPACE: Final = 0x5B_4D_45_4D  # "[MEM"

# A record row with its usage row beside it (memory/stores/postgres/changes.py): an active record's
# usage is its usage row's, any other's its own columns'. The usage row's key columns are renamed, so
# the statements' unqualified names still mean the record's.
_USAGE_JOIN: Final = (
    "LEFT JOIN (SELECT scope_key AS used_scope, seq AS used_seq, used_at, uses,"
    " changed_xid AS used_xid FROM memory_usage) AS usage ON used_scope = scope_key AND used_seq = seq"
)
_RECORDS: Final = f"memory_records {_USAGE_JOIN}"

# Selected from `_RECORDS` (a locking read locks the record rows only: `_LOCK_ROWS`).
_COLUMNS: Final = (
    "seq, id, scope_key, kind, text, source_thread_key, created_at, keywords, source_run_id,"
    " CASE WHEN used_seq IS NULL THEN last_used_at ELSE used_at END AS last_used_at,"
    " COALESCE(uses, use_count) AS use_count,"
    " confidence, supersedes, status, origin, origin_conversation, observed_at"
)

# How many `_COLUMNS` are (what a longer row holds after them starts here).
_COLUMN_COUNT: Final = 17

_LOCK_ROWS: Final = " FOR UPDATE OF memory_records"

# `status = 'active'` stays a literal everywhere so the planner can use the partial FTS index.
_SELECT_MATCHES: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %(scope)s AND status = 'active' AND tsv @@ %(q)s::tsquery
    ORDER BY ts_rank(tsv, %(q)s::tsquery, 1) DESC, seq DESC
    LIMIT %(n)s
"""

# One row per stem of the record (and '' for the record itself): +1 on insert.
_ADD_TERMS: Final = """
    INSERT INTO memory_term_df (scope_key, term, df) SELECT %s, term, 1 FROM unnest(%s::text[]) AS term
    ON CONFLICT (scope_key, term) DO UPDATE SET df = memory_term_df.df + 1
"""

# Never into a row erased meanwhile (a vector made on use races the erase).
_SET_VECTOR: Final = (
    "UPDATE memory_records SET embedding = %s, embedding_model = %s"
    " WHERE scope_key = %s AND seq = %s AND erased_at IS NULL"
)

# The same, on a row no other transaction holds (else nothing): the read path never waits for a row lock.
_SET_VECTOR_SKIP_LOCKED: Final = """
    UPDATE memory_records SET embedding = %(vector)s, embedding_model = %(model)s
    WHERE scope_key = %(scope)s AND seq = (
        SELECT seq FROM memory_records WHERE scope_key = %(scope)s AND seq = %(seq)s AND erased_at IS NULL
        FOR UPDATE SKIP LOCKED
    )
"""

# Every scope still holding a record's text (not yet erased): reindex skips those with no active
# record, and the start-up migration of DMs' old scopes must reach their superseded rows too.
_SCOPES: Final = "SELECT DISTINCT scope_key FROM memory_records WHERE erased_at IS NULL ORDER BY scope_key"

_UNVECTORED_WHERE: Final = (
    "scope_key = %s AND status = 'active' AND (embedding IS NULL OR embedding_model IS DISTINCT FROM %s)"
)

_UNVECTORED: Final = f"SELECT seq, text FROM memory_records WHERE {_UNVECTORED_WHERE} ORDER BY seq LIMIT %s"

_FOREIGN_VECTORS: Final = (
    "SELECT COUNT(*) FROM memory_records WHERE status = 'active' AND embedding IS NOT NULL"
    " AND embedding_model IS DISTINCT FROM %s"
)
_COUNT_UNVECTORED: Final = f"SELECT COUNT(*) FROM memory_records WHERE {_UNVECTORED_WHERE}"

_UNCOUNT_TERMS: Final = "UPDATE memory_term_df SET df = df - %s WHERE scope_key = %s AND term = ANY(%s)"


def newest_first(status: str) -> str:
    """A scope's unexpired records in one status (a literal: each status has its own partial index),
    newest first: (scope_key, cutoff, limit)."""
    return f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status = '{status}' AND created_at >= %s
    ORDER BY seq DESC LIMIT %s
"""


_SELECT_LIST: Final = newest_first("active")

_SELECT_LIST_MATCHING: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status = 'active' AND tsv @@ %s::tsquery AND created_at >= %s
    ORDER BY seq DESC LIMIT %s
"""

_SELECT_SAME_NORM: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status = 'active' AND md5(norm) = md5(%s) AND norm = %s
    ORDER BY seq
"""

_SELECT_ONE_ACTIVE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND seq = %s AND id = %s AND status = 'active'
"""


_LOCK_SCOPE: Final = f"SELECT pg_advisory_xact_lock({_LOCK_NAMESPACE}, hashtext(%s))"

# The highest seq the scope has used: a seq whose row was deleted by hand (its tombstone) counts, so the
# next record never takes the id of a deleted one, which a citation or an audit entry may still name.
_MAX_SEQ_OF_SCOPE: Final = """
    SELECT GREATEST(
        (SELECT COALESCE(MAX(seq), 0) FROM memory_records WHERE scope_key = %(scope)s),
        (SELECT COALESCE(MAX(seq), 0) FROM memory_deleted WHERE scope_key = %(scope)s)
    )
"""

# The scope's active count as its document frequencies keep it (the term '' counts the active rows,
# in the transaction of every change): one primary-key lookup, where a COUNT(*) reads every active
# index entry — and, until a vacuum, every active row — of the scope.
_COUNT_ACTIVE: Final = "SELECT COALESCE(MAX(df), 0) FROM memory_term_df WHERE scope_key = %s AND term = ''"

# A restatement folded into its record (`fold_into`): used once more, and dated by its later telling.
# The record's own columns count it too (a pending record has no usage row; an active one's usage row
# counts it, and its columns are laid over when it leaves active).
_BUMP_DEDUP: Final = (
    "UPDATE memory_records SET use_count = use_count + 1, last_used_at = %s, observed_at = %s"
    " WHERE scope_key = %s AND seq = %s"
)
_BUMP_DEDUP_USAGE: Final = (
    "UPDATE memory_usage SET uses = uses + 1, used_at = GREATEST(used_at, %s)"
    " WHERE scope_key = %s AND seq = %s"
)

# The usage bump: ONE statement for the whole returned set, by primary key.
_BUMP_USAGE: Final = (
    "UPDATE memory_usage SET used_at = GREATEST(used_at, %s), uses = uses + 1"
    " WHERE scope_key = %s AND seq = ANY(%s)"
)

_NO_COMMIT_WAIT: Final = "SET LOCAL synchronous_commit = off"

# A flush of usage bumps waits this long at most for a row another transaction holds.
_FLUSH_LOCK_WAIT: Final = "SET LOCAL lock_timeout = '2s'"

_SUPERSEDE: Final = (
    "UPDATE memory_records SET status = 'superseded' WHERE scope_key = %s AND seq = %s AND status = 'active'"
    " RETURNING stems"
)

# A pending row replaced by its edit: it was never counted, so nothing is taken out of the counts.
_WITHDRAW: Final = (
    "UPDATE memory_records SET status = 'superseded' WHERE scope_key = %s AND seq = %s AND status = 'pending'"
)

# A merge's survivor with its duplicates' uses (`merged_survivor`).
_SET_MERGED_USAGE: Final = """
    UPDATE memory_records SET use_count = %s, last_used_at = %s, observed_at = %s
    WHERE scope_key = %s AND seq = %s
"""
# The survivor is active: its usage row is what its usage reads from. Relative, as a flush of usage
# bumps writes it without the record rows' locks: a use counted meanwhile stays counted.
_ADD_MERGED_USAGE_ROW: Final = (
    "UPDATE memory_usage SET uses = uses + %s, used_at = GREATEST(used_at, %s)"
    " WHERE scope_key = %s AND seq = %s"
)

# The `%(n)s` first active rows in the eviction order (`memory.rules.engine.eviction_key`, full ties
# by seq), read off the usage table's eviction index (changes.CHANGE_SCHEMA): never the whole active set.
# The seqs are taken first, once, then each row is updated by primary key (the only index holding
# seq): a plan that re-ran the ordered scan per row, or filtered the scope's rows by the seqs, would
# read the whole scope. (No status test outside: the batch holds the scope's lock.)
_EVICT_LEAST_USED: Final = """
    UPDATE memory_records AS m SET status = 'evicted'
    FROM unnest(ARRAY(
        SELECT seq FROM memory_usage WHERE scope_key = %(scope)s
        ORDER BY COALESCE(used_at, created_at), created_at, seq LIMIT %(n)s
    )) AS doomed (seq)
    WHERE m.scope_key = %(scope)s AND m.seq = doomed.seq
    RETURNING m.stems
"""

_INSERT: Final = """
    INSERT INTO memory_records (scope_key, seq, id, kind, text, norm, keywords, tokens, source_thread_key,
        source_run_id, created_at, last_used_at, use_count, confidence, supersedes, status, stems, origin,
        origin_conversation, observed_at)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""

_SELECT_BY_IDS: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND id = ANY(%s) AND erased_at IS NULL AND status <> 'pending'
        AND created_at >= %s
    ORDER BY seq
"""

_LINK_SOURCE: Final = """
    INSERT INTO memory_run_sources (message, run_id, scope_key, linked_at) VALUES (%s, %s, %s, %s)
    ON CONFLICT DO NOTHING
"""

_INSERT_AUDIT: Final = """
    INSERT INTO memory_read_audit (run_id, thread_key, asker, scope_keys, record_ids, ranks, at)
    VALUES (%s, %s, %s, %s, %s, %s, %s)
"""

# A pending write folds a restatement into an active or a pending record alike.
_SELECT_SAME_NORM_LIVE: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS}
    WHERE scope_key = %s AND status IN ('active', 'pending') AND md5(norm) = md5(%s) AND norm = %s
    ORDER BY seq
"""

_SELECT_ALL_PENDING: Final = f"""
    SELECT {_COLUMNS} FROM {_RECORDS} WHERE scope_key = %s AND status = 'pending' ORDER BY seq
"""

_ACTIVATE: Final = """
    UPDATE memory_records SET status = 'active', supersedes = %s, last_used_at = %s
    WHERE scope_key = %s AND seq = %s AND status = 'pending' RETURNING stems
"""

# The rows of a planned change, by seq (the scope's lock held).
_SEQS: Final = "scope_key = %s AND seq = ANY(%s)"
