"""Schema statements that take no table lock once what they make is there.

Every replica re-applies the schema when it opens. `ALTER TABLE … ADD COLUMN IF NOT EXISTS` takes the
table's strongest lock, and `CREATE INDEX IF NOT EXISTS` a lock that stops writes, before either finds
that there is nothing to do; a write that had already read the table then waits on the opening replica
while it waits on the write, and PostgreSQL ends one of them (deadlock detected). So each such statement
is run only when the catalogue lacks the column, index or table it names. A function is replaced only
when its body lacks the mark of this exact definition (a replaced function makes every session compile
it, and drop the plans it keeps, again). So on a database of the current schema an open only reads the
catalogue.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from memory.stores.postgres.rows import Connection

_ADD_COLUMN: Final = re.compile(r"\s*ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+)\b", re.IGNORECASE)
_CREATE_RELATION: Final = re.compile(
    r"\s*CREATE (?:UNIQUE )?(?:TABLE|INDEX) IF NOT EXISTS (\w+)\b", re.IGNORECASE
)
_FUNCTION: Final = re.compile(r"\s*CREATE OR REPLACE FUNCTION (\w+)\(", re.IGNORECASE)
_HAS_FUNCTION: Final = """
    SELECT 1 FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
    WHERE n.nspname = current_schema() AND p.proname = %s AND strpos(p.prosrc, %s) > 0
"""
# More than one change in a statement ("ADD COLUMN a …, ADD COLUMN b …"): the first one's being there
# says nothing of the others, so such a statement always runs.
_MORE_THAN_ONE: Final = re.compile(r";|,\s*(?:ADD|ALTER|DROP)\b", re.IGNORECASE)

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


def made_by(statement: str) -> tuple[str, str | None] | None:
    """What a guarded statement makes: (table, column) for an added column, (table or index, None) for
    a created one; None for a statement that always runs."""
    if _MORE_THAN_ONE.search(statement) is not None:
        return None
    column = _ADD_COLUMN.match(statement)
    if column is not None:
        return column[1], column[2]
    relation = _CREATE_RELATION.match(statement)
    return None if relation is None else (relation[1], None)


def marked(statement: str) -> tuple[str, str, str] | None:
    """A function's name, its definition with its mark (a digest of the whole statement, settings
    included) as the body's last line, and the mark; None for a statement that defines no function."""
    function = _FUNCTION.match(statement)
    head, quote, tail = statement.rpartition("$$")
    if function is None or not quote or _MORE_THAN_ONE.search(tail):
        return None
    mark = f"-- switchboard {hashlib.sha256(statement.encode()).hexdigest()[:16]}"
    return function[1], f"{head}{mark}\n{quote}{tail}", mark


async def apply(conn: Connection, statement: str) -> bool:
    """Run `statement` unless what it makes (`made_by`, or a function's `marked` definition) is there
    already; True when it ran."""
    lookup, definition = _lookup(statement)
    if lookup is not None:
        cursor = await conn.execute(*lookup)
        if await cursor.fetchone() is not None:
            return False
    await conn.execute(definition)
    return True


def _lookup(statement: str) -> tuple[tuple[str, tuple[str, ...]] | None, str]:
    """The catalogue query that finds what `statement` makes (None: nothing to find, it always runs),
    and the statement to run when nothing is found (a function's with its mark)."""
    function = marked(statement)
    if function is not None:
        proname, definition, mark = function
        return (_HAS_FUNCTION, (proname, mark)), definition
    made = made_by(statement)
    if made is None:
        return None, statement
    name, column = made
    if column is None:
        return (_HAS_RELATION, (name,)), statement
    return (_HAS_COLUMN, (name, column)), statement
