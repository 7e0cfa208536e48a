"""The PostgreSQL store: one shared database for several bot and memory-service replicas.

`store` is the facade (`PostgresMemoryStore`: errors and logs); `connection` opens the pool and checks
the server, `schema` applies the migrations, `sql` holds every data statement, `rows` the row form,
`writes`, `retrieve`, `reads` and `erasure` the operations on a scope, `terms` the document
frequencies they keep, `ledger` the run sources and read audit, `changes` the change feed (every row
stamped by the transaction that wrote it) and `scope_cache` this replica's scope indexes that follow
it; `curating` is the store's curating half (`CuratingStore`), its work in `review` (the pending
queue), `editing` (edits, merges) and `curation` (the curation log, version chains, histories). It
may import `memory.types`, `memory.rules`, `memory.ranking` and `memory.stores.sql_common`, never the
service, the read path or the write path; its modules import each other without a circle.
"""

from memory.stores.postgres.store import PostgresMemoryStore

__all__ = ["PostgresMemoryStore"]
