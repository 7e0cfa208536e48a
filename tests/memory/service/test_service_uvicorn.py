"""The memory service as a real `python -m memory.service` process (uvicorn, SQLite) on 127.0.0.1.

Spec rows: "Worker: a streamed or bodiless request with no Content-Length is 411 — never parsed",
"oversized body → 413 … before parsing", "Worker: 5 concurrent write batches to one scope → all succeed,
unique ids" (here 50 batches from 50 connections), and the durable store surviving a restart (§15).
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from memory.stores.http import HttpMemoryStore
from memory.types import MemoryCandidate, WriteResult
from tests.memory.service_support import AUTH, TOKEN, RunningService, memory_service_process

SCOPE = "org:acme"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with memory_service_process(tmp_path_factory.mktemp("memory-service")) as running:
        yield running


def raw_exchange(
    service: RunningService, head: str, body: bytes = b"", timeout: float = 5.0
) -> tuple[int, dict[str, Any]]:
    """Send a request head (maybe part of a body) on a fresh socket; read the reply, send nothing more."""
    with socket.create_connection((service.host, service.port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1") + body)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
        header_block, _, rest = reply.partition(b"\r\n\r\n")
        lines = header_block.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    return status, json.loads(rest[:length]) if length else {}


def head(path: str, service: RunningService, *extra: str) -> str:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {service.host}:{service.port}",
        f"Authorization: Bearer {TOKEN}",
    ]
    return "\r\n".join([*lines, *extra, "", ""])


def test_a_chunked_body_without_content_length_is_411_before_any_body_is_sent(
    service: RunningService,
) -> None:
    request = head("/write", service, "Content-Type: application/json", "Transfer-Encoding: chunked")
    status, body = raw_exchange(service, request)  # no chunk ever follows the head
    assert status == 411
    assert "Content-Length" in body["error"]


def test_a_bodiless_post_without_content_length_is_411(service: RunningService) -> None:
    status, body = raw_exchange(service, head("/list", service))
    assert status == 411
    assert body["error"]


def test_a_declared_600_kib_body_is_413_before_the_body_is_sent(service: RunningService) -> None:
    request = head("/write", service, "Content-Type: application/json", f"Content-Length: {600 * 1024}")
    status, body = raw_exchange(service, request, b'{"scopeKey": "org:acme", "records": [')
    assert status == 413
    assert "bytes" in body["error"]


def test_an_unauthenticated_oversized_request_is_401_without_reading(service: RunningService) -> None:
    request = "\r\n".join(
        ["POST /write HTTP/1.1", f"Host: {service.host}", f"Content-Length: {600 * 1024}", "", ""]
    )
    status, _ = raw_exchange(service, request)
    assert status == 401


async def test_fifty_concurrent_write_batches_from_separate_connections_get_unique_ids(
    service: RunningService,
) -> None:
    scope = "org:concurrent"

    async def batch(n: int) -> httpx.Response:
        # A client per batch: its own connection, so the batches really race on the server.
        async with httpx.AsyncClient(base_url=service.base_url, headers=AUTH, timeout=30) as client:
            records = [
                {"kind": "fact", "text": f"batch{n} first fact", "sourceThreadKey": f"t{n}"},
                {"kind": "fact", "text": f"batch{n} second fact", "sourceThreadKey": f"t{n}"},
            ]
            return await client.post("/write", json={"scopeKey": scope, "records": records})

    replies = await asyncio.gather(*(batch(n) for n in range(50)))
    assert [r.status_code for r in replies] == [200] * 50
    assert all(
        r.json() == {"ok": True, "inserted": 2, "deduped": 0, "superseded": 0, "evicted": 0} for r in replies
    )

    ids: list[str] = []
    async with httpx.AsyncClient(base_url=service.base_url, headers=AUTH, timeout=30) as client:
        for n in range(50):
            listed = await client.post("/list", json={"scopeKey": scope, "limit": 50, "query": f"batch{n}"})
            records = listed.json()["records"]
            assert sorted(r["text"] for r in records) == [f"batch{n} first fact", f"batch{n} second fact"]
            ids += [r["id"] for r in records]
    assert len(set(ids)) == 100
    assert sorted(int(i.rsplit(":", 1)[1]) for i in ids) == list(range(1, 101))


async def test_http_store_round_trip_over_tcp(service: RunningService) -> None:
    store = HttpMemoryStore(service.base_url, TOKEN, timeout=5.0, cap=3)
    try:
        candidates = [
            MemoryCandidate("fact", f"tcp fact {word}", "slack:C9:1")
            for word in ("alpha", "beta", "gamma", "delta")
        ]
        assert await store.write("org:tcp", candidates) == WriteResult(inserted=4, evicted=1)
        found = await store.retrieve("org:tcp", "tcp delta", 2)
        assert found[0].text == "tcp fact delta"
        assert len(await store.list("org:tcp", 50)) == 3
        assert await store.forget("org:tcp", found[0].id) is True
    finally:
        await store.aclose()


async def test_retrieve_degrades_against_the_real_service_with_a_wrong_token(service: RunningService) -> None:
    store = HttpMemoryStore(service.base_url, "wrong-token")
    try:
        with capture_logs() as logs:
            assert await store.retrieve(SCOPE, "anything", 5) == []
    finally:
        await store.aclose()
    [warning] = [e for e in logs if e["event"] == "memory.retrieve_failed"]
    assert "401" in warning["message"]


def test_memory_survives_a_restart_and_sigterm_stops_the_service_cleanly(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with memory_service_process(data_dir, via_cli=True) as first:
        wrote = httpx.post(
            f"{first.base_url}/write",
            headers=AUTH,
            json={
                "scopeKey": SCOPE,
                "records": [{"kind": "fact", "text": "kept across restarts", "sourceThreadKey": "t"}],
            },
        )
        assert wrote.json()["inserted"] == 1
        first.process.send_signal(signal.SIGTERM)
        assert first.process.wait(timeout=10) == 0
    assert any((data_dir / "memory").iterdir())
    with memory_service_process(data_dir) as second:
        listed = httpx.post(f"{second.base_url}/list", headers=AUTH, json={"scopeKey": SCOPE, "limit": 5})
        assert [r["text"] for r in listed.json()["records"]] == ["kept across restarts"]


def test_without_memory_token_the_service_starts_but_refuses_every_data_request(tmp_path: Path) -> None:
    with memory_service_process(tmp_path, token=None) as running:
        assert httpx.get(f"{running.base_url}/healthz").json() == {"ok": True}
        for headers in ({}, {"Authorization": "Bearer"}, AUTH):
            reply = httpx.post(
                f"{running.base_url}/list", headers=headers, json={"scopeKey": SCOPE, "limit": 5}
            )
            assert reply.status_code == 401


def test_switchboard_memory_service_help_names_the_token_variable(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["memory-service", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "MEMORY_TOKEN" in out
    assert "--data-dir" in out


def test_the_service_logs_one_json_line_per_event_even_with_what_orjson_refuses() -> None:
    from memory.service.main import _json_line

    event = {"event": "memory.service.request", "route": "/retrieve", "records": 8, "scope_key": "org:é"}
    assert json.loads(_json_line(event)) == event
    huge = {"event": "memory.service.request", "erased": 2**70}
    assert json.loads(_json_line(huge, default=str)) == huge
