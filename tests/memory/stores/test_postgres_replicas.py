"""Several memory-service replicas on one PostgreSQL database (issue 10, "Must show").

Real `python -m memory.service --database-url …` processes on free loopback ports, sharing one
schema of the real server; requests race through separate HTTP connections.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import MemoryCandidate
from tests.memory.postgres_support import TempSchema, temp_schema, terminate_backends, unique_application_name
from tests.memory.service_support import ROOT, free_port, stop_process, wait_healthy

TOKEN = "replica-test-token-41c9"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass(frozen=True)
class Replica:
    base_url: str
    application_name: str
    process: subprocess.Popen[bytes]


@contextmanager
def replica(database_url: str, *, via_env: bool = False, startup_timeout: float = 20.0) -> Iterator[Replica]:
    """One service process on a free port, its pool named uniquely (application_name in the DSN)."""
    name = unique_application_name("sbreplica")
    dsn = make_conninfo(database_url, application_name=name)
    env = {k: v for k, v in os.environ.items() if k not in ("MEMORY_TOKEN", "DATABASE_URL")}
    env.update(MEMORY_TOKEN=TOKEN, PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "memory.service"]
    if via_env:
        env["DATABASE_URL"] = dsn
    else:
        args += ["--database-url", dsn]
    errors: list[str] = []
    for _ in range(3):  # a free port can be taken between probing and binding: retry on a fresh one
        port = free_port()
        process = subprocess.Popen(
            [*args, "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            if wait_healthy(process, port, startup_timeout):
                yield Replica(f"http://127.0.0.1:{port}", name, process)
                return
        finally:
            errors.append(stop_process(process))
    raise RuntimeError("memory service replica did not start:\n" + "\n".join(errors))


@pytest.fixture(scope="module")
def schema() -> Iterator[TempSchema]:
    with temp_schema("sbreplicas") as created:
        yield created


@pytest.fixture(scope="module")
def replicas(schema: TempSchema) -> Iterator[tuple[Replica, Replica]]:
    """Two replicas for the whole module (process start-up is the slow part); each test its own scope."""
    with ExitStack() as stack:
        first = stack.enter_context(replica(schema.dsn))
        second = stack.enter_context(replica(schema.dsn, via_env=True))  # DATABASE_URL works too
        yield first, second


def rows_of(schema: TempSchema, scope: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(schema.dsn) as conn:
        return conn.execute(
            "SELECT seq, id, status, text FROM memory_records WHERE scope_key = %s ORDER BY seq", (scope,)
        ).fetchall()


async def post(base_url: str, route: str, body: dict[str, Any]) -> httpx.Response:
    # A client per request: its own connection, so the batches really race on the servers.
    async with httpx.AsyncClient(base_url=base_url, headers=AUTH, timeout=30) as client:
        return await client.post(route, json=body)


def batch_body(scope: str, n: int, cap: int) -> dict[str, Any]:
    records = [
        {"kind": "fact", "text": f"replica batch{n} first fact", "sourceThreadKey": f"slack:C1:{n}"},
        {"kind": "fact", "text": f"replica batch{n} second fact", "sourceThreadKey": f"slack:C1:{n}"},
    ]
    return {"scopeKey": scope, "records": records, "cap": cap}


async def test_fifty_concurrent_batches_over_two_replicas_land_once_with_unique_ids_and_the_cap_exact(
    replicas: tuple[Replica, Replica], schema: TempSchema
) -> None:
    scope, cap = "org:replicas", 60
    replies = await asyncio.gather(
        *(post(replicas[n % 2].base_url, "/write", batch_body(scope, n, cap)) for n in range(50))
    )
    assert [r.status_code for r in replies] == [200] * 50
    bodies = [r.json() for r in replies]
    assert sum(b["inserted"] for b in bodies) == 100 and sum(b["deduped"] for b in bodies) == 0
    assert sum(b["evicted"] for b in bodies) == 40

    rows = rows_of(schema, scope)
    assert [seq for seq, *_ in rows] == list(range(1, 101))  # unique ids, no gap, no collision
    assert [row_id for _, row_id, *_ in rows] == [f"mem:{scope}:{seq}" for seq in range(1, 101)]
    texts = sorted(text for *_, text in rows)
    expected = sorted(f"replica batch{n} {which} fact" for n in range(50) for which in ("first", "second"))
    assert texts == expected  # nothing lost
    statuses = [status for _, _, status, _ in rows]
    assert statuses.count("active") == cap and statuses.count("evicted") == 40  # the cap holds exactly

    # Both replicas serve the same memory.
    for one in replicas:
        listed = await post(one.base_url, "/list", {"scopeKey": scope, "limit": 50, "query": "batch7"})
        assert sorted(r["text"] for r in listed.json()["records"]) == sorted(
            r[3] for r in rows if "batch7 " in r[3] and r[2] == "active"
        )


async def test_a_replica_writes_again_after_its_database_connections_are_dropped(
    replicas: tuple[Replica, Replica], schema: TempSchema
) -> None:
    first, second = replicas
    scope = "org:restart"
    # Concurrent writes grow the replica's pool to several connections...
    replies = await asyncio.gather(
        *(post(first.base_url, "/write", batch_body(scope, 0, 500)) for _ in range(8))
    )
    assert all(r.status_code == 200 for r in replies)
    # ...then every one of them is dropped, as a database restart does.
    assert await terminate_backends(first.application_name) >= 2
    reply = await post(first.base_url, "/write", batch_body(scope, 1, 500))
    assert reply.status_code == 200 and reply.json()["inserted"] == 2
    found = await post(second.base_url, "/retrieve", {"scopeKey": scope, "query": "batch1", "limit": 8})
    assert {r["id"] for r in found.json()["records"]} == {f"mem:{scope}:3", f"mem:{scope}:4"}


def test_a_replica_with_an_unreachable_database_exits_with_one_line_naming_the_setting() -> None:
    dsn = f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/test"
    done = subprocess.run(
        [sys.executable, "-m", "memory.service", "--port", str(free_port()), "--database-url", dsn],
        cwd=ROOT,
        env={**os.environ, "MEMORY_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=30,
    )
    assert done.returncode != 0
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "DATABASE_URL / --database-url" in lines[0] and "s3cret" not in lines[0]


FREEZE = MemoryCandidate("fact", "deploys freeze in december", "slack:C1:1")


async def seen_by(one: Replica, scope: str, record_id: str) -> tuple[list[str], list[str], list[str]]:
    """What one replica serves of the record: its retrieve, its list and its fetch."""
    found = await post(one.base_url, "/retrieve", {"scopeKey": scope, "query": "freeze december", "limit": 8})
    listed = await post(one.base_url, "/list", {"scopeKey": scope, "limit": 50})
    fetched = await post(one.base_url, "/fetch", {"scopeKey": scope, "ids": [record_id]})
    retrieved, shown, got = ([r["id"] for r in reply.json()["records"]] for reply in (found, listed, fetched))
    return retrieved, shown, got


async def test_an_approval_is_served_by_every_replica_at_once(
    replicas: tuple[Replica, Replica], schema: TempSchema
) -> None:
    scope, record_id = "org:approve", "mem:org:approve:1"
    store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name("sbcurator"))
    try:
        await store.write_pending(scope, [FREEZE])
        for one in replicas:  # each replica's index of the scope warm before the approval
            assert await seen_by(one, scope, record_id) == ([], [], [])
        assert await store.approve(scope, record_id, "user:slack:U1") is not None
        for one in replicas:  # no cache anywhere holds the old answer
            assert await seen_by(one, scope, record_id) == ([record_id], [record_id], [record_id])
    finally:
        await store.aclose()


async def test_a_rejection_leaves_no_replica_anything_and_no_text_in_the_row(
    replicas: tuple[Replica, Replica], schema: TempSchema
) -> None:
    scope, record_id = "org:reject", "mem:org:reject:1"
    store = PostgresMemoryStore(schema.dsn, application_name=unique_application_name("sbcurator"))
    try:
        await store.write_pending(scope, [FREEZE])
        for one in replicas:  # each replica's index of the scope warm before the rejection
            assert await seen_by(one, scope, record_id) == ([], [], [])
        assert await store.reject(scope, record_id, "user:slack:U1") is True
        for one in replicas:
            assert await seen_by(one, scope, record_id) == ([], [], [])
        assert rows_of(schema, scope) == [(1, record_id, "forgotten", "")]
        assert await store.approve(scope, record_id, "user:slack:U1") is None
    finally:
        await store.aclose()
