"""Schema statements that take no table lock once what they make is there.

Every replica re-applies the schema when it opens. `ALTER TABLE … ADD COLUMN IF NOT EXISTS` takes the
table's strongest lock, and `CREATE INDEX IF NOT EXISTS` a lock that stops writes, before either finds
that there is nothing to do; a write that had already read the table then waits on the opening replica
while it waits on the write, and PostgreSQL ends one of them (deadlock detected). So each such statement
is run only when the catalogue lacks the column, index or table it names: on a database of the current
schema an open only reads the catalogue.
"""

from __future__ import annotations

import re
from typing import Final

from memory.stores.postgres.rows import Connection

_ADD_COLUMN: Final = re.compile(r"^\s*ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+)\b", re.IGNORECASE)
_CREATE_RELATION: Final = re.compile(
    r"^\s*CREATE (?:UNIQUE )?(?:TABLE|INDEX) IF NOT EXISTS (\w+)\b", re.IGNORECASE
)

# Looked up in the schema the statement would make it in: the first one on the search path.
_HAS_COLUMN: Final = """
    SELECT 1 FROM pg_attribute AS a
    JOIN pg_class AS c ON c.oid = a.attrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relname = %s AND a.attname = %s AND NOT a.attisdropped
"""
_HAS_RELATION: Final = """
    SELECT 1 FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relname = %s
"""


async def apply(conn: Connection, statement: str) -> bool:
    """Run `statement` unless it adds a column, or creates a table or index, that is there already;
    True when it ran. Any other statement always runs."""
    column = _ADD_COLUMN.match(statement)
    if column is not None:
        cursor = await conn.execute(_HAS_COLUMN, (column[1], column[2]))
    else:
        relation = _CREATE_RELATION.match(statement)
        if relation is None:
            await conn.execute(statement)
            return True
        cursor = await conn.execute(_HAS_RELATION, (relation[1],))
    if await cursor.fetchone() is not None:
        return False
    await conn.execute(statement)
    return True
