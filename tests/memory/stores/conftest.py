"""Fixtures the stores' tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.memory.postgres_support import TempSchema, temp_schema


@pytest.fixture
def schema() -> Iterator[TempSchema]:
    """A throwaway schema on the local test server, dropped after the test."""
    with temp_schema() as created:
        yield created
