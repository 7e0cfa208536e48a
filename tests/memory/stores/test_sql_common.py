"""The helpers the SQLite and PostgreSQL stores share (memory/stores/sql_common.py)."""

from __future__ import annotations

from memory.stores.sql_common import bumped
from memory.types import Ranked
from tests.memory.records import NOW, record


def test_a_bump_marks_a_record_used_now_and_once_more() -> None:
    [found] = bumped([Ranked(record("deploys run nightly", last_used_at=NOW - 60), 0.5)], NOW)

    assert (found.record.last_used_at, found.record.use_count, found.relevance) == (NOW, 1, 0.5)


def test_a_bump_keeps_a_later_use_stored_by_a_replica_whose_clock_is_ahead() -> None:
    [found] = bumped([Ranked(record("deploys run nightly", last_used_at=NOW + 5), 0.5)], NOW)

    assert found.record.last_used_at == NOW + 5
