"""The embedded durable backend: one SQLite database file per scope key, and a ledger beside them.

The same module names as every backend folder, for the same concerns: `store` (the facade,
`SqliteMemoryStore`: threads and locks), `connections` (the open scope databases and their locks),
`schema` (migrations), `sql` (the row form and the bookkeeping every change shares), `writes` (a
planned batch applied, and reindex), `review` (the pending queue), `versions` (chains, histories,
forget, edits, merges), `curation_log`, `retrieve` and `reads`, `erasure`, `ledger` (run sources,
read audit), `claims` and `index` (what this process holds of a scope between operations);
`store` also keeps the storage under the store front (memory/stores/front.py). Every write is planned by
memory/stores/writing.py. It may import `memory.types`, `memory.rules`, `memory.ranking` and
`memory.stores`' shared modules, never the service, the read path or the write path; its modules
import each other without a circle.
"""

from memory.stores.sqlite.store import SqliteMemoryStore

__all__ = ["SqliteMemoryStore"]
