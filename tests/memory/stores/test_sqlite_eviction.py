"""Eviction over the cap in a SQLite scope: read off the eviction index, and exactly the records the
pure plan (`plan_eviction`) picks."""

from __future__ import annotations

import contextlib
import random
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from memory.rules.engine import mint_record, plan_eviction
from memory.stores.sqlite.schema import open_database, prepare_scope
from memory.stores.sqlite.sql import transaction
from memory.stores.sqlite.writes import EVICTION_ORDER, evict_over_cap, insert_record
from memory.types import MemoryRecord, RecordStatus
from tests.memory.store_contract import fact

ORG = "org:acme"
# Mostly active, so a scope has enough to evict; the others must stay out of the eviction index.
STATUSES: tuple[RecordStatus, ...] = ("active",) * 6 + ("superseded", "forgotten", "evicted")


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    opened = open_database(tmp_path / "scope.sqlite3", lambda c: prepare_scope(c, ORG))
    with contextlib.closing(opened):
        yield opened


def random_scope(rng: random.Random, count: int) -> list[MemoryRecord]:
    """Records in seq order whose recency ties often (few distinct times, some never used), and
    some of which are not active (the index must leave them out)."""
    records = []
    for seq in range(1, count + 1):
        minted = mint_record(ORG, seq, fact(f"record number {seq}"), float(rng.randint(1, 4)))
        used = rng.choice([None, None, 2.0, 3.0, 4.0, 5.0])
        status = rng.choice(STATUSES)
        records.append(replace(minted, last_used_at=used, use_count=0 if used is None else 1, status=status))
    return records


def statuses(connection: sqlite3.Connection) -> dict[str, str]:
    rows = connection.execute("SELECT id, status FROM records").fetchall()
    return {str(record_id): str(status) for record_id, status in rows}


@pytest.mark.parametrize("seed", range(16))
def test_eviction_off_the_index_picks_exactly_what_the_plan_picks(
    connection: sqlite3.Connection, seed: int
) -> None:
    rng = random.Random(seed)
    records = random_scope(rng, rng.randint(40, 120))
    with transaction(connection):
        for seq, record in enumerate(records, start=1):
            insert_record(connection, seq, record)
    active = sum(1 for record in records if record.status == "active")
    cap = rng.randint(1, active - 1)
    before = statuses(connection)

    with transaction(connection):
        evicted = evict_over_cap(connection, ORG, cap)

    planned = plan_eviction(records, cap)
    after = statuses(connection)
    assert evicted == len(planned) == active - cap
    assert {i for i in after if after[i] != before[i]} == set(planned)
    assert all(after[i] == "evicted" for i in planned)


def test_eviction_reads_the_excess_off_the_index_without_sorting(connection: sqlite3.Connection) -> None:
    steps = [str(row[3]) for row in connection.execute(f"EXPLAIN QUERY PLAN {EVICTION_ORDER}", (5,))]

    assert any("records_eviction" in step for step in steps), steps
    assert not any("TEMP B-TREE" in step for step in steps), steps
