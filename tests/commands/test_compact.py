"""`switchboard memory compact` on PostgreSQL: after every kind of erasure, the real command leaves no
erased word in any file of the memory tables, their indexes or their TOAST, and keeps every word of
the records nobody erased."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from memory.rules.retention import Retention
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import SourceLink
from tests.commands.test_cli import ROOT
from tests.memory.postgres_support import TempSchema, relations_holding, temp_schema, unique_application_name
from tests.memory.records import fact

ORG = "org:acme"
COLD = "channel:CCOLD"  # a scope with a one-day retention
ADMIN = "user:slack:U1"
DAY = 86_400.0

# One distinctive word per way of erasing (none changes under the stemmer), and words kept.
FORGOTTEN = "quorvexil"
REJECTED = "brimzatok"
PENDING_EXPIRED = "flindorax"
RETENTION_EXPIRED = "snarvelok"
SOURCE_ERASED = "trelquist"
SCOPE_ERASED = "gomblatix"
ERASED = (FORGOTTEN, REJECTED, PENDING_EXPIRED, RETENTION_EXPIRED, SOURCE_ERASED, SCOPE_ERASED)
KEPT = ("marzipank", "vindelorb")


@pytest.fixture
def schema() -> Iterator[TempSchema]:
    with temp_schema() as created:
        yield created


async def erase_every_way(schema: TempSchema) -> None:
    """A record (or a pending one) erased in each way the store erases, beside records kept."""
    now = [1_800_000_000.0]
    store = PostgresMemoryStore(
        schema.dsn,
        application_name=unique_application_name(),
        clock=lambda: now[0],
        retention=Retention(scope_ttl_days={COLD: 1.0}),
        compact_after_seconds=3600,  # the command compacts here, not the store by itself
    )
    try:
        await store.write(ORG, [fact(f"the {KEPT[0]} runbook lives in the wiki")])
        await store.write(ORG, [fact(f"the {FORGOTTEN} vault opens at noon")])
        await store.write_pending(ORG, [fact(f"the {REJECTED} proposal is pending")])
        await store.write(COLD, [fact(f"the {RETENTION_EXPIRED} tunnel is closed")])
        await store.write("user:slack:UBOB", [fact(f"bob's {SCOPE_ERASED} allergy")])
        await store.link_sources(SourceLink("run-src", (ORG,), ("slack:C9:1.0",)))
        await store.write(ORG, [replace(fact(f"the {SOURCE_ERASED} pager rota"), source_run_id="run-src")])
        await store.write("channel:CKEPT", [fact(f"the {KEPT[1]} dashboard is green")])

        assert await store.forget(ORG, "mem:org:acme:2") is True
        assert await store.reject(ORG, "mem:org:acme:3", ADMIN) is True
        await store.write_pending(ORG, [fact(f"the {PENDING_EXPIRED} idea waits")])
        assert await store.expire_pending(float("inf")) == 1
        now[0] += 2 * DAY
        assert await store.erase_expired() == 1
        assert await store.erase_sources(["slack:C9:1.0"], "source_deleted") == 1
        assert await store.erase_scope("user:slack:UBOB", "user_request") == 1
    finally:
        await store.aclose()


def run_compact(schema: TempSchema, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_MEMORY__STORE": "postgres",
        "SWITCHBOARD_MEMORY__EMBEDDER": "none",
        "SWITCHBOARD_ORGANIZATION": "acme",
        "DATABASE_URL": schema.dsn,
    }
    return subprocess.run(
        [sys.executable, "-m", "app", "memory", "compact"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_compact_leaves_no_erased_word_in_any_memory_table_file(
    schema: TempSchema, tmp_path: Path
) -> None:
    await erase_every_way(schema)
    before = {word: relations_holding(schema.name, word) for word in ERASED}
    assert all(before.values()), before  # the files held them: the check can see them

    result = run_compact(schema, tmp_path)

    assert result.returncode == 0, result.stderr
    assert re.search(r"memory_records_p\d\d:", result.stdout) and "memory_term_df:" in result.stdout
    assert "locked" in result.stdout and "CHECKPOINT" in result.stdout
    assert {word: relations_holding(schema.name, word) for word in ERASED} == {word: set() for word in ERASED}
    for word in KEPT:
        assert {"memory_records", "memory_records_fts", "memory_records_stems"} <= relations_holding(
            schema.name, word
        ), word
