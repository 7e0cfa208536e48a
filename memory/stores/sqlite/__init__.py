"""The embedded durable store: one SQLite database file per scope key, and a ledger beside them.

`store` is the facade (`SqliteMemoryStore`: threads and locks); `connections` holds the open scope
databases and their locks, `schema` their migrations, `sql` the row form and bookkeeping every change
shares, `writes`, `retrieve`, `reads` and `erasure` the operations on a scope, `index_sync` and
`usage_bumps` what this process holds of a scope between operations, `ledger` the run sources and read
audit. It may import `memory.types`, `memory.rules`, `memory.ranking` and `memory.stores.sql_common`,
never the service, the read path or the write path; its modules import each other without a circle.
"""

from memory.stores.sqlite.store import SqliteMemoryStore

__all__ = ["SqliteMemoryStore"]
