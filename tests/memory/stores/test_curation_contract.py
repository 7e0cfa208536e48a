"""Every curating store runs the one curation contract (tests/memory/curation_contract.py), over the
very stores the store contract makes (its `make_store` fixture: in-process and SQLite)."""

from __future__ import annotations

from tests.memory.curation_contract import CurationContract
from tests.memory.stores import test_store_contract

make_store = test_store_contract.make_store


class TestCurationContract(CurationContract):
    """In-process and SQLite; PostgreSQL and the service join with their own fixtures."""
