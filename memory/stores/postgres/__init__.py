"""The PostgreSQL store: one shared database for several bot and memory-service replicas."""

from memory.stores.postgres.store import PostgresMemoryStore

__all__ = ["PostgresMemoryStore"]
