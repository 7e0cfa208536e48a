"""The planner's statistics never hold a record's words: ANALYZE samples into `pg_statistic`, a catalog
no compaction of the store can rewrite, so the word columns are never sampled."""

from __future__ import annotations

import random
import string
from pathlib import Path

from memory.stores.postgres.store import PostgresMemoryStore
from tests.memory.postgres_support import TempSchema, admin_connect, one_value, unique_application_name
from tests.memory.records import fact


def statistics_file_holds(word: str) -> bool:
    with admin_connect() as conn:
        conn.execute("CHECKPOINT")
        data = Path(str(one_value(conn, "SHOW data_directory")))
        path = data / str(one_value(conn, "SELECT pg_relation_filepath('pg_statistic')"))
    return word.encode() in path.read_bytes()


async def test_analyze_samples_no_word_of_a_record(schema: TempSchema) -> None:
    # A word never written before on this server: the catalog keeps other runs' dead rows.
    word = "".join(random.choices(string.ascii_lowercase, k=14))
    store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name())
    try:
        for index in range(5):
            await store.write("org:acme", [fact(f"note {index} about the {word} vault")])
        with admin_connect() as conn:
            for table in ("memory_records", "memory_term_df"):
                conn.execute(f"ANALYZE {schema.name}.{table}")
            sampled = one_value(
                conn,
                "SELECT count(*) FROM pg_statistic"
                f" WHERE starelid = '{schema.name}.memory_records'::regclass",
            )
        assert int(str(sampled)) > 0  # the other columns are still sampled for the planner
        assert not statistics_file_holds(word)
    finally:
        await store.aclose()
