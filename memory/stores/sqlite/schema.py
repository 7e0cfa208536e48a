"""A scope database's schema and its migrations, applied on every open; and how a scope's file is named.

The one migration path is re-applied on every open: idempotent and safe over live data. A column added
after the first release is added once if missing (`ensure_column`), and a migration that must label
older rows does it in the transaction that adds the column.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from memory.rules.restate import meaning_key
from memory.rules.scope import validate_scope_key
from memory.rules.visibility import legacy_origin
from memory.stores.sql_common import SLASH_MARKER, SLASH_THREADS, log_relabelled, slash_relabels
from memory.stores.sqlite.sql import (
    BUSY_TIMEOUT_SECONDS,
    DOCUMENTS,
    configure,
    fts_keywords,
    fts_text,
    load_keywords,
    stamp,
    stems_text,
    transaction,
)
from memory.types import (
    MemoryStoreError,
)

log = structlog.get_logger("memory")

SCHEMA_VERSION = "1"

# The `meta` marker that a database's stored `norm` is the dedup key the engine uses now (`meaning_key`).
NORM_MARKER = ("norm_key", "meaning")

_PREFIX_LENGTH = 48

_UNSAFE = re.compile(r"[^a-z0-9_-]+")

# The one migration path: re-applied on every open, idempotent, safe over live data.
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS records (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        scope_key TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('fact', 'summary')),
        text TEXT NOT NULL,
        norm TEXT NOT NULL,
        keywords TEXT NOT NULL DEFAULT '[]',
        source_thread_key TEXT NOT NULL,
        source_run_id TEXT,
        created_at REAL NOT NULL,
        last_used_at REAL,
        use_count INTEGER NOT NULL DEFAULT 0,
        confidence REAL,
        supersedes TEXT,
        status TEXT NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'superseded', 'forgotten', 'evicted', 'pending'))
    )""",
    "CREATE INDEX IF NOT EXISTS records_status_norm ON records (status, norm)",
    "CREATE INDEX IF NOT EXISTS records_active_seq ON records (status, seq DESC)",
    "CREATE INDEX IF NOT EXISTS records_active_used ON records (status, last_used_at DESC, created_at DESC)",
    # The eviction order (`memory.rules.engine.eviction_key`, full ties by seq) over the active rows
    # only: a write over the cap reads the excess off its first entries, never the whole active set.
    "CREATE INDEX IF NOT EXISTS records_eviction"
    " ON records (COALESCE(last_used_at, created_at), created_at, seq) WHERE status = 'active'",
    "CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5(text, keywords, tokenize = 'ascii')",
    # Ranking v2: the engine's stems of text + keywords, exactly the active rows (rowid = seq),
    # and each stem's document frequency among them, kept in the same transaction as every change.
    "CREATE VIRTUAL TABLE IF NOT EXISTS records_stems USING fts5(stems, tokenize = 'ascii')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS records_stems_vocab USING fts5vocab(records_stems, 'row')",
    "CREATE TABLE IF NOT EXISTS term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID",
    # The change counter the in-process scope index follows (`stamp` moves it on every change to a
    # record other than its usage counts, in whichever process makes it).
    "CREATE TABLE IF NOT EXISTS changes (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO changes (id, generation) VALUES (1, 0)",
    # Who approved, edited, rejected, merged or forgot which record, when (ids only, never text): kept
    # in the scope's own file, so an action and its entry commit in one transaction.
    """CREATE TABLE IF NOT EXISTS curation_log (
        entry_id INTEGER PRIMARY KEY,
        record_id TEXT NOT NULL,
        scope_key TEXT NOT NULL,
        action TEXT NOT NULL,
        actor TEXT NOT NULL,
        at REAL NOT NULL,
        related_id TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS curation_log_record ON curation_log (record_id)",
    "CREATE INDEX IF NOT EXISTS curation_log_related ON curation_log (related_id)",
    "CREATE INDEX IF NOT EXISTS curation_log_at ON curation_log (at)",
)

# The statuses a row may hold; a database whose CHECK admits fewer is rebuilt (`_migrate_statuses`).
STATUSES = ("active", "superseded", "forgotten", "evicted", "pending")
_STATUS_CHECK = re.compile(r"CHECK\s*\(\s*status\s+IN\s*\(([^)]*)\)\s*\)", re.IGNORECASE)

# Columns added after the first release: (table, column, declaration), each added once if missing.
_COLUMNS_ADDED = (
    ("records", "embedding", "BLOB"),
    ("records", "embedding_model", "TEXT"),
    # Erasure: why and when a row's text was scrubbed.
    ("records", "erased_reason", "TEXT"),
    ("records", "erased_at", "REAL"),
    # The change generation that last touched the row (`stamp`).
    ("records", "changed", "INTEGER NOT NULL DEFAULT 0"),
)


def database_filename(scope_key: str) -> str:
    """A safe, collision-free file name for a scope: readable prefix + hash of the exact key.

    The prefix keeps only `[a-z0-9_-]` (no dots, no separators: no traversal); the hash tells apart
    keys that differ only in case or punctuation, even on a case-insensitive filesystem.
    """
    validate_scope_key(scope_key)
    prefix = _UNSAFE.sub("_", scope_key.lower()).strip("_")[:_PREFIX_LENGTH] or "scope"
    digest = hashlib.sha256(scope_key.encode("utf-8")).hexdigest()[:32]
    return f"{prefix}-{digest}.sqlite3"


@dataclass(frozen=True, slots=True)
class ScopeFiles:
    """The scope databases under a data directory: the scope key of each one read, and the name and
    the reason of each one that could not be read (it holds a scope nobody can name until it is fixed)."""

    keys: builtins.list[str]
    unreadable: builtins.list[tuple[str, str]]


def scope_keys_in(data_dir: Path) -> ScopeFiles:
    """The scope key each database file under `data_dir` names (read-only). A file holding no scope
    yet (made a moment ago, its schema not yet committed) is none; one that cannot be read at all
    (not a database, damaged, not a file, not readable) is `unreadable`, never passed over."""
    keys: builtins.list[str] = []
    unreadable: builtins.list[tuple[str, str]] = []
    for path in sorted(data_dir.glob("*.sqlite3")) if data_dir.is_dir() else []:
        if path.name.startswith("_"):  # the ledger's (a scope's file name never starts with "_")
            continue
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
                key = _scope_key_of(connection)
        except sqlite3.Error as error:
            unreadable.append((path.name, str(error).strip() or type(error).__name__))
            continue
        if key is not None:
            keys.append(key)
    return ScopeFiles(keys, unreadable)


def _scope_key_of(connection: sqlite3.Connection) -> str | None:
    """The scope key a database holds, or None while it has no `meta` table yet. Reading the catalogue
    is what fails on a file that is no database."""
    made = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if made is None:
        return None
    row = connection.execute("SELECT value FROM meta WHERE key = 'scope_key'").fetchone()
    return None if row is None else str(row[0])


def prepare_scope(connection: sqlite3.Connection, scope_key: str) -> None:
    """WAL, the schema (idempotent), the scope identity check, and FTS reconciliation."""
    configure(connection)
    with transaction(connection):
        for statement in _SCHEMA:
            connection.execute(statement)
        for table, column, declaration in _COLUMNS_ADDED:
            ensure_column(connection, table, column, declaration)
        connection.execute("CREATE INDEX IF NOT EXISTS records_changed ON records (changed)")
        # A version chain is walked both ways: by id, and by the id a newer version supersedes.
        connection.execute("CREATE INDEX IF NOT EXISTS records_supersedes ON records (supersedes)")
        _migrate_statuses(connection, scope_key)
        _migrate_origin(connection, scope_key)
        _migrate_observed(connection, scope_key)
        _migrate_norm(connection, scope_key)
        _relabel_slash_notes(connection, scope_key)
        row = connection.execute("SELECT value FROM meta WHERE key = 'scope_key'").fetchone()
        if row is None:
            connection.execute(
                "INSERT INTO meta (key, value) VALUES ('scope_key', ?), ('schema_version', ?)",
                (scope_key, SCHEMA_VERSION),
            )
        elif row[0] != scope_key:
            raise MemoryStoreError(f"database file for scope {scope_key} belongs to another scope")
        _reconcile_fts(connection, scope_key)
        _reconcile_stems(connection, scope_key)


def ensure_column(connection: sqlite3.Connection, table: str, column: str, declaration: str) -> bool:
    """The one way a column is added: idempotent, so every open of an older database migrates it.
    True when this call added it (a migration that must label the older rows does it then)."""
    present = {str(row[1]) for row in connection.execute(f"PRAGMA table_info({table})")}
    if column in present:
        return False
    connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    return True


def _migrate_statuses(connection: sqlite3.Connection, scope_key: str) -> None:
    """A database whose status CHECK predates `pending` gets the table rebuilt with the wider CHECK,
    once, in the open's transaction (SQLite cannot alter a CHECK in place): the stored definition
    with only the CHECK changed, every row copied with its seq (the FTS rowids stay true), the old
    table dropped (its freed pages zeroed: secure_delete), and its indexes made again."""
    row = connection.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'records'"
    ).fetchone()
    match = _STATUS_CHECK.search(str(row[0]))
    if match is None:  # an early layout checked no status at all: it admits `pending` already
        return
    admitted = {part.strip().strip("'") for part in match.group(1).split(",")}
    if admitted >= set(STATUSES):
        return
    wider = ", ".join(f"'{status}'" for status in STATUSES)
    definition = str(row[0])[: match.start(1)] + wider + str(row[0])[match.end(1) :]
    rebuilt = re.sub(r"^CREATE TABLE\s+\"?records\"?", "CREATE TABLE records_rebuilt", definition, count=1)
    indexes = [
        str(sql)
        for (sql,) in connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' AND sql IS NOT NULL"
        )
    ]
    connection.execute(rebuilt)
    copied = connection.execute("INSERT INTO records_rebuilt SELECT * FROM records").rowcount
    connection.execute("DROP TABLE records")
    connection.execute("ALTER TABLE records_rebuilt RENAME TO records")
    for sql in indexes:
        connection.execute(sql)
    log.info("memory.store.statuses_migrated", scope_key=scope_key, records=copied)


def _migrate_origin(connection: sqlite3.Connection, scope_key: str) -> None:
    """The origin label. Rows written before it existed get the conservative label of
    their scope (`legacy_origin`), once, in the transaction that adds the columns."""
    added = ensure_column(connection, "records", "origin", "TEXT NOT NULL DEFAULT 'unknown'")
    ensure_column(connection, "records", "origin_conversation", "TEXT")
    if added:
        origin, conversation = legacy_origin(scope_key)
        labelled = connection.execute(
            "UPDATE records SET origin = ?, origin_conversation = ? RETURNING seq", (origin, conversation)
        ).fetchall()
        stamp(connection, [int(row[0]) for row in labelled])
        if labelled:
            log.info(
                "memory.store.origin_migrated", scope_key=scope_key, origin=origin, records=len(labelled)
            )


def _migrate_observed(connection: sqlite3.Connection, scope_key: str) -> None:
    """When each record's source conversation happened. Rows written before it was kept take their
    `created_at` (the best the row knows), once, in the transaction that adds the column."""
    if not ensure_column(connection, "records", "observed_at", "REAL"):
        return
    dated = connection.execute("UPDATE records SET observed_at = created_at RETURNING seq").fetchall()
    stamp(connection, [int(row[0]) for row in dated])
    if dated:
        log.info("memory.store.observed_migrated", scope_key=scope_key, records=len(dated))


def _migrate_norm(connection: sqlite3.Connection, scope_key: str) -> None:
    """The stored dedup key recomputed once with `meaning_key` (a marker in `meta`): rows written under
    the older, stricter key would otherwise never meet the restatements that should fold into them.
    Two old rows that now share a key both stay; a new restatement folds into the earlier."""
    if _marked(connection, NORM_MARKER):
        return
    rows = connection.execute("SELECT seq, text, norm FROM records WHERE erased_at IS NULL").fetchall()
    keyed = [(meaning_key(str(text)), norm, int(seq)) for seq, text, norm in rows]
    changed = [(new, seq) for new, old, seq in keyed if new != old]
    connection.executemany("UPDATE records SET norm = ? WHERE seq = ?", changed)
    connection.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", NORM_MARKER)
    if changed:
        log.info("memory.store.norm_migrated", scope_key=scope_key, records=len(changed))


def _marked(connection: sqlite3.Connection, marker: tuple[str, str]) -> bool:
    """Whether `meta` holds the marker (key, value): its migration is done."""
    key, value = marker
    found = connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return found is not None and found[0] == value


def _relabel_slash_notes(connection: sqlite3.Connection, scope_key: str) -> None:
    """Notes saved with the `/memory` slash command in a channel before such a note for the typist's
    own scope was labelled `dm` carry the channel's label: relabelled as `typed_alone` labels them
    now, once (a marker in `meta`), in the open's transaction."""
    if _marked(connection, SLASH_MARKER):
        return
    found = connection.execute(
        "SELECT DISTINCT origin FROM records WHERE source_thread_key LIKE ?", (SLASH_THREADS,)
    ).fetchall()
    relabelled: builtins.list[int] = []
    for new, _, old in slash_relabels((scope_key, str(label)) for (label,) in found):
        rows = connection.execute(
            "UPDATE records SET origin = ? WHERE origin = ? AND source_thread_key LIKE ? RETURNING seq",
            (new, old, SLASH_THREADS),
        ).fetchall()
        relabelled += [int(row[0]) for row in rows]
    stamp(connection, relabelled)
    connection.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", SLASH_MARKER)
    log_relabelled("sqlite", len(relabelled), scope_key=scope_key)


def _reconcile_fts(connection: sqlite3.Connection, scope_key: str) -> None:
    """Make the FTS table hold exactly the active rows: drop dead entries, restore missing ones."""
    dead, missing = _reconcile(
        connection,
        "records_fts",
        "INSERT INTO records_fts (rowid, text, keywords) VALUES (?, ?, ?)",
        lambda text, keywords: (fts_text(text), fts_keywords(keywords)),
    )
    if dead > 0 or missing:
        log.info("memory.store.reconciled", scope_key=scope_key, removed=max(dead, 0), restored=missing)


def _reconcile_stems(connection: sqlite3.Connection, scope_key: str) -> None:
    """The stem index holds exactly the active rows, and term_df counts it; a database from before
    ranking v2 gets both here, on its first open."""
    dead, missing = _reconcile(
        connection,
        "records_stems",
        "INSERT INTO records_stems (rowid, stems) VALUES (?, ?)",
        lambda text, keywords: (stems_text(text, keywords),),
    )
    counted = connection.execute("SELECT df FROM term_df WHERE term = ?", (DOCUMENTS,)).fetchone()
    active = int(connection.execute("SELECT COUNT(*) FROM records_stems").fetchone()[0])
    if dead > 0 or missing or counted is None or int(counted[0]) != active:
        # fts5vocab counts each stem's rows: the counts table rebuilt from the index in one statement.
        connection.execute("DELETE FROM term_df")
        connection.execute("INSERT INTO term_df (term, df) SELECT term, doc FROM records_stems_vocab")
        connection.execute("INSERT INTO term_df (term, df) VALUES (?, ?)", (DOCUMENTS, active))
    if dead > 0 or missing:
        log.info("memory.store.stems_reconciled", scope_key=scope_key, removed=dead, restored=missing)


def _reconcile(
    connection: sqlite3.Connection,
    table: str,
    insert: str,
    columns: Callable[[str, tuple[str, ...]], tuple[str, ...]],
) -> tuple[int, int]:
    """An index table keyed by seq made to hold exactly the active rows: its dead entries dropped, the
    missing ones restored with `columns` of their text and keywords; how many of each."""
    dead = connection.execute(
        f"DELETE FROM {table} WHERE rowid NOT IN (SELECT seq FROM records WHERE status = 'active')"
    ).rowcount
    missing = connection.execute(
        "SELECT seq, text, keywords FROM records WHERE status = 'active' "
        f"AND seq NOT IN (SELECT rowid FROM {table})"
    ).fetchall()
    for seq, text, keywords in missing:
        connection.execute(insert, (int(seq), *columns(str(text), load_keywords(str(keywords)))))
    return dead, len(missing)


def open_database(path: Path, prepare: Callable[[sqlite3.Connection], None]) -> sqlite3.Connection:
    """A connection to `path` for the store's worker threads (autocommit: every transaction is explicit),
    prepared by `prepare`, or closed again if that fails."""
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    try:
        prepare(connection)
    except BaseException:
        connection.close()
        raise
    return connection
