"""Event claims in one table (memory/rules/claims.py): every replica on the database shares them, and
the key's primary-key conflict makes the claim atomic across replicas."""

from __future__ import annotations

from typing import Final

from psycopg_pool import AsyncConnectionPool

from memory.rules.claims import PURGE_BATCH
from memory.stores.postgres import ddl
from memory.stores.postgres.rows import Connection
from memory.stores.postgres.schema import _LOCK_SCHEMA

# Made by the first claim, under the schema lock (replicas starting together do not race on it).
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS memory_event_claims"
    " (key text PRIMARY KEY, expires_at double precision NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memory_event_claims_expiry ON memory_event_claims (expires_at)",
)
# A new key is inserted; a key whose claim has expired is claimed again; a live claim is left alone.
_CLAIM: Final = (
    "INSERT INTO memory_event_claims (key, expires_at) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE"
    " SET expires_at = EXCLUDED.expires_at WHERE memory_event_claims.expires_at <= %s"
)
# SKIP LOCKED: a purge never waits on another replica's purge or claim, so the two never deadlock.
_PURGE: Final = (
    "DELETE FROM memory_event_claims WHERE key IN (SELECT key FROM memory_event_claims"
    f" WHERE expires_at <= %s ORDER BY expires_at LIMIT {PURGE_BATCH} FOR UPDATE SKIP LOCKED)"
)


class ClaimTable:
    """The claims table of one store: made on the first claim, then one upsert per claim."""

    def __init__(self) -> None:
        self._made = False

    async def claim(
        self, pool: AsyncConnectionPool[Connection], key: str, ttl_seconds: float, now: float
    ) -> bool:
        """True when this call took the claim; the purge of expired claims is its own transaction."""
        async with pool.connection() as conn:
            if not self._made:
                async with conn.transaction():
                    await conn.execute(_LOCK_SCHEMA)
                    for statement in _SCHEMA:
                        await ddl.apply(conn, statement)
                self._made = True
            async with conn.transaction():
                cursor = await conn.execute(_CLAIM, (key, now + ttl_seconds, now))
                claimed = cursor.rowcount == 1
            async with conn.transaction():
                await conn.execute(_PURGE, (now,))
        return claimed
