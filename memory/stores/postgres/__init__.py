"""The PostgreSQL backend: one shared database for several bot and memory-service replicas.

The same module names as every backend folder, for the same concerns: `store` (the facade,
`PostgresMemoryStore`), `connections` (the pool, the server's checks), `schema` (migrations; `ddl`
its locks), `sql` and `rows` (the statements, the row form), `writes` (a planned batch applied, and
reindex), `review` (the pending queue), `versions` (chains, histories, forget, edits, merges),
`curation_log`, `retrieve` and `reads`, `erasure`, `ledger` (run sources, read audit), `claims`,
and `index` (this replica's scope indexes, following the change feed in `changes`); `store` also
keeps the storage under the store front (memory/stores/front.py). Backend-only: `terms` (document
frequencies), `held_bumps`. Every write is planned by memory/stores/writing.py. It may import `memory.types`,
`memory.rules`, `memory.ranking` and `memory.stores`' shared modules, never the service, the read
path or the write path; its modules import each other without a circle.
"""

from memory.stores.postgres.store import PostgresMemoryStore

__all__ = ["PostgresMemoryStore"]
