"""A replica opening on a database of the current schema (memory/stores/postgres/ddl.py) against the real
server: it only reads the catalogue, so it never waits on a writer, and a writer never waits on it.
Before, its `ADD COLUMN IF NOT EXISTS` and `CREATE INDEX IF NOT EXISTS` took their table locks anyway,
and replicas starting beside writes ended in "deadlock detected"."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import make_conninfo

from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import BASE_DSN, TempSchema, unique_application_name
from tests.memory.records import fact

SCOPE = "org:acme"


async def test_a_replica_opens_beside_an_open_write_without_waiting_for_it(schema: TempSchema) -> None:
    first = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
    try:
        await first.write(SCOPE, [fact("deploys run nightly")])
    finally:
        await first.aclose()
    # A second's wait for any lock fails the open instead of hanging the test.
    impatient = make_conninfo(BASE_DSN, options=f"-csearch_path={schema.name} -clock_timeout=2000")
    async with await psycopg.AsyncConnection.connect(schema.dsn) as writer:
        # A write under way: it holds the records' and the usage rows' write locks until it ends.
        await writer.execute("UPDATE memory_records SET use_count = use_count WHERE seq = 1")
        await writer.execute("UPDATE memory_usage SET uses = uses WHERE seq = 1")
        second = PostgresMemoryStore(impatient, application_name=unique_application_name())
        try:
            await second.open()
            assert [r.text for r in await second.retrieve(SCOPE, "deploys", 5)] == ["deploys run nightly"]
        finally:
            await writer.rollback()  # first: the read's use is written when the replica closes
            await second.aclose()
