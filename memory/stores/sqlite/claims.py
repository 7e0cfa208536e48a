"""Event claims in the ledger database (memory/rules/claims.py): several processes over one data
directory share them, and SQLite's write lock makes the claim atomic across those processes."""

from __future__ import annotations

import sqlite3

from memory.rules.claims import PURGE_BATCH
from memory.stores.sqlite.sql import transaction

# Made on first use (IF NOT EXISTS, in the claim's own transaction): the ledger's schema is untouched.
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS event_claims (key TEXT PRIMARY KEY, expires_at REAL NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS event_claims_expiry ON event_claims (expires_at)",
)
_PURGE = (
    "DELETE FROM event_claims WHERE key IN "
    f"(SELECT key FROM event_claims WHERE expires_at <= ? ORDER BY expires_at LIMIT {PURGE_BATCH})"
)
# A new key is inserted; a key whose claim has expired is claimed again; a live claim is left alone.
_CLAIM = (
    "INSERT INTO event_claims (key, expires_at) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE event_claims.expires_at <= ?"
)


def claim(connection: sqlite3.Connection, key: str, ttl_seconds: float, now: float) -> bool:
    """True when this call took the claim (one IMMEDIATE transaction: no other writer in between)."""
    with transaction(connection):
        for statement in _SCHEMA:
            connection.execute(statement)
        connection.execute(_PURGE, (now,))
        before = connection.total_changes
        connection.execute(_CLAIM, (key, now + ttl_seconds, now))
        return connection.total_changes - before == 1
