"""The embedded durable store: one SQLite database file per scope key, and a ledger beside them."""

from memory.stores.sqlite.store import SqliteMemoryStore

__all__ = ["SqliteMemoryStore"]
