"""A PostgreSQL row as the store reads it: its seq and record, the tsquery a query's tokens make, and
the seq an id names."""

from __future__ import annotations

import builtins
import re
from collections.abc import Sequence
from typing import Any, Final

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from memory.rules.engine import (
    match_tokens,
    parse_record_id,
)
from memory.stores.sql_common import record_of
from memory.types import (
    MemoryRecord,
)

Connection = AsyncConnection[TupleRow]

_MAX_SEQ: Final = 2**63 - 1

_TOKEN: Final = re.compile(r"[a-z0-9]+")

# PostgreSQL's longest lexeme: a longer token or stem (a 4,000-character run, which the wire accepts)
# cannot be in a tsvector or tsquery, so it is left out of both — no query can name one anyway.
MAX_LEXEME: Final = 2047

NO_CUTOFF: Final = float("-inf")

# A row as selected: its seq (the key's second half) and the record.
Row = tuple[int, MemoryRecord]


def match_query(query: str) -> str | None:
    """The OR of the query's match tokens as a tsquery literal, or None when it has no tokens.

    Every term is an `[a-z0-9]+` token in quotes, so user text never becomes tsquery syntax.
    """
    return tsquery_of(match_tokens(query))


def tsquery_of(terms: Sequence[str]) -> str | None:
    """Tokens or stems (each `[a-z0-9]+`, quoted) OR-joined as a tsquery literal; None when none."""
    quoted = [f"'{term}'" for term in terms if _TOKEN.fullmatch(term) and len(term) <= MAX_LEXEME]
    return " | ".join(quoted) or None


async def fetch_rows(conn: Connection, sql: str, params: Any) -> builtins.list[Row]:
    cursor = await conn.execute(sql, params)
    return [row_record(row) for row in await cursor.fetchall()]


def row_record(row: TupleRow) -> Row:
    """One selected row (in `_COLUMNS` order) as its seq and record."""
    seq, record_id, scope_key, kind, text, thread, created_at, keywords, run_id, *later = row
    record = record_of(record_id, scope_key, kind, text, tuple(keywords), thread, run_id, created_at, *later)
    return int(seq), record


def one(row: TupleRow | None) -> Any:
    if row is None:
        raise psycopg.DataError("expected one row, got none")
    return row[0]


def own_seq(scope_key: str, record_id: str) -> int | None:
    """The seq of an id minted in this scope; None for a foreign, malformed or out-of-range id."""
    parsed = parse_record_id(record_id)
    if parsed is None or parsed[0] != scope_key or parsed[1] > _MAX_SEQ:
        return None
    return parsed[1]
