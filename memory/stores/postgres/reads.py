"""A scope's plain reads: `list` (newest first, optionally through the FTS prefilter) and `fetch` by
id. Neither bumps usage."""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from psycopg_pool import AsyncConnectionPool

from memory.rules.engine import (
    matches_filter,
)
from memory.stores.postgres.rows import NO_CUTOFF, Connection, fetch_rows, match_query
from memory.stores.postgres.sql import (
    _FOREIGN_VECTORS,
    _SCOPES,
    _SELECT_BY_IDS,
    _SELECT_LIST,
    _SELECT_LIST_MATCHING,
)
from memory.types import (
    MemoryRecord,
)


def list_statement(
    scope_key: str, limit: int, query: str | None, cutoff: float | None
) -> tuple[str, tuple[object, ...]] | None:
    """The list's statement and parameters; None when it can find nothing (no limit, no query tokens)."""
    params: tuple[object, ...]
    since = NO_CUTOFF if cutoff is None else cutoff
    if query is None:
        sql, params = _SELECT_LIST, (scope_key, since, limit)
    else:
        tsquery = match_query(query)
        if tsquery is None:
            return None
        sql, params = _SELECT_LIST_MATCHING, (scope_key, tsquery, since, limit)
    if limit <= 0:
        return None
    return sql, params


async def list_records(
    pool: AsyncConnectionPool[Connection], statement: tuple[str, tuple[object, ...]], query: str | None
) -> builtins.list[MemoryRecord]:
    """Active records newest first, optionally through the same FTS prefilter; no usage bump."""
    async with pool.connection() as conn:
        rows = await fetch_rows(conn, *statement)
    records = [record for _, record in rows]
    if query is not None:
        # The prefilter already is this gate (the same engine tokens); kept as the definition.
        records = [record for record in records if matches_filter(record, query)]
    return records


async def fetch_records(
    pool: AsyncConnectionPool[Connection], scope_key: str, ids: Sequence[str], cutoff: float | None
) -> builtins.list[MemoryRecord]:
    since = NO_CUTOFF if cutoff is None else cutoff
    async with pool.connection() as conn:
        rows = await fetch_rows(conn, _SELECT_BY_IDS, (scope_key, ids, since))
    return [record for _, record in rows]


async def count_foreign_vectors(pool: AsyncConnectionPool[Connection], embedder_name: str) -> int:
    """Active records whose vector another embedder than `embedder_name` made, over every scope."""
    async with pool.connection() as conn:
        cursor = await conn.execute(_FOREIGN_VECTORS, (embedder_name,))
        row = await cursor.fetchone()
    return 0 if row is None else int(row[0])


async def scope_keys(pool: AsyncConnectionPool[Connection]) -> builtins.list[str]:
    """Every scope holding a record not yet erased."""
    async with pool.connection() as conn:
        cursor = await conn.execute(_SCOPES)
        return [str(row[0]) for row in await cursor.fetchall()]
