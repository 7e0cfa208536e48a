"""No word in the planner's statistics: ANALYZE (autovacuum's, or an operator's) samples each column's
common values and histogram bounds into `pg_statistic`, a catalog table that no compaction of ours can
rewrite — an erased record's words would stay in its files. The columns that hold words are never
sampled (their statistics target is 0); the planner keeps the statistics of every other column (the
scope, the status, the dates), which its plans are chosen by, and a full-text match is estimated at
PostgreSQL's default selectivity."""

from __future__ import annotations

from typing import Final

from memory.stores.postgres.rows import Connection

# (table, column) of every column that holds a record's words or a word of one.
WORD_COLUMNS: Final = (
    *(
        ("memory_records", column)
        for column in ("text", "norm", "keywords", "tokens", "stems", "tsv", "stems_tsv")
    ),
    ("memory_term_df", "term"),
)

_SAMPLED: Final = """
    SELECT c.relname, a.attname FROM pg_attribute AS a
    JOIN pg_class AS c ON c.oid = a.attrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema()
      AND (c.relname, a.attname) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
      AND a.attstattarget IS DISTINCT FROM 0 AND NOT a.attisdropped  -- NULL: the default, since PG 17
"""


async def unsample_words(conn: Connection) -> int:
    """Inside the schema transaction: each word column not yet unsampled made so (a catalogue lookup
    once they all are); how many were changed."""
    tables, columns = zip(*WORD_COLUMNS, strict=True)
    cursor = await conn.execute(_SAMPLED, (list(tables), list(columns)))
    sampled = await cursor.fetchall()
    for table, column in sampled:
        # Names from WORD_COLUMNS, never input.
        await conn.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET STATISTICS 0")
    return len(sampled)
