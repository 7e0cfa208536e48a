"""`memory_records` split by a hash of the scope key, so that a compaction locks only the part that held
an erased record's bytes.

`VACUUM (FULL)` holds the table's ACCESS EXCLUSIVE lock while it writes the table anew, and a table's
rewrite takes time in proportion to its size: on one table, an erasure in one scope made every read and
write of every scope wait for the whole table's rewrite. Split into `PARTITIONS` partitions by
`hash(scope_key)`, each scope's rows (and their indexes and TOAST) live in one partition, and a
compaction rewrites only the partitions that hold an erasure since the last one (compaction.py): a
read or write of a scope in another partition never waits for it. Every query of one scope names its
key, so it is planned onto that scope's partition alone.

A database is made partitioned when `memory_records` is first made. One that an earlier release made
keeps its one table, and its compaction rewrites that whole table as before: converting it means
copying every row under the table's strongest lock, which stops every replica's reads and writes for
the copy, so it is not done on open.
"""

from __future__ import annotations

from typing import Final

from memory.stores.postgres import ddl
from memory.stores.postgres.rows import Connection

# A scope lives in one partition, so a rewrite locks at least one scope's rows and those of the scopes
# that share its partition: more partitions, fewer scopes sharing (with 20 scopes in 32 partitions, most
# are alone). Fixed once a database is made: hash partitions are not split later.
PARTITIONS: Final = 32

TABLE: Final = "memory_records"

# The table's kind ('p': partitioned, 'r': an earlier release's one table) and its partitions' count.
_STATE: Final = """
    SELECT c.relkind, (SELECT count(*) FROM pg_inherits WHERE inhparent = c.oid)
    FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relname = %s
"""


def partition_name(remainder: int) -> str:
    return f"{TABLE}_p{remainder:02d}"


def _create(remainder: int) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {partition_name(remainder)} PARTITION OF {TABLE}"
        f" FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {remainder})"
    )


async def is_partitioned(conn: Connection) -> bool:
    cursor = await conn.execute(_STATE, (TABLE,))
    found = await cursor.fetchone()
    return found is not None and str(found[0]) == "p"


async def make(conn: Connection) -> None:
    """Inside the schema transaction, after `memory_records` is made: its partitions, each only when
    missing (ddl.py), and one catalogue lookup once they are all there; nothing for an earlier
    release's one table."""
    cursor = await conn.execute(_STATE, (TABLE,))
    found = await cursor.fetchone()
    if found is None or str(found[0]) != "p" or int(found[1]) == PARTITIONS:
        return
    for remainder in range(PARTITIONS):
        await ddl.apply(conn, _create(remainder))
