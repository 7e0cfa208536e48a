"""PostgresMemoryStore runs the one curation contract suite (tests/memory/curation_contract.py) too.

Each store the factory makes gets its own fresh schema on the real server, so every store starts
empty; the store opens itself on first use. An unreachable server fails these tests, never skips them.
"""

from __future__ import annotations

from tests.memory.curation_contract import CurationContract
from tests.memory.stores.test_postgres_contract import make_store  # noqa: F401  (the fixture)


class TestPostgresCurationContract(CurationContract):
    """The same curation the in-process and SQLite stores show, on PostgreSQL."""
