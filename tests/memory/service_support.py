"""Shared helpers for the memory-service tests: an in-process client, raw ASGI calls, a real server."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-memory-token-7f3a"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# The service's curation routes (memory/service/curation_routes.py), each a POST.
CURATION_ROUTES = (
    "/pending/write",
    "/pending/list",
    "/pending/approve",
    "/pending/reject",
    "/pending/expire",
    "/records/edit",
    "/records/history",
    "/records/active",
    "/records/merge",
    "/curation/record",
    "/curation/log",
)


def asgi_client(app: Starlette, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """A client that talks to the app in-process through httpx's real ASGI transport."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://memory.test", headers=headers
    )


def fact(text: str, thread: str = "slack:C1:1700000000.000100", **extra: Any) -> dict[str, Any]:
    """One wire candidate (camelCase), as the bot's client sends it."""
    return {"kind": "fact", "text": text, "sourceThreadKey": thread, **extra}


@dataclass
class RawReply:
    status: int
    headers: dict[str, str]
    body: Any
    receive_calls: int = 0


@dataclass
class _Receiver:
    chunks: list[bytes]
    calls: int = 0
    sent: list[bytes] = field(default_factory=list)

    async def __call__(self) -> dict[str, Any]:
        self.calls += 1
        if self.chunks:
            chunk = self.chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(self.chunks)}
        return {"type": "http.disconnect"}


async def raw_asgi(
    app: Starlette,
    method: str,
    path: str,
    headers: Sequence[tuple[str, str | bytes]],
    chunks: Sequence[bytes] = (),
) -> RawReply:
    """Call the ASGI app directly with exactly these headers; counts how often the body was asked for.

    This reaches header forms no HTTP client will send (blank or non-digit Content-Length, none at all).
    """
    receiver = _Receiver(list(chunks))
    messages: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        messages.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (k.lower().encode("latin-1"), v if isinstance(v, bytes) else v.encode("latin-1"))
            for k, v in headers
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("memory.test", 80),
    }
    await app(scope, receiver, send)
    start = next(m for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return RawReply(
        status=start["status"],
        headers={k.decode(): v.decode() for k, v in start["headers"]},
        body=json.loads(body) if body else None,
        receive_calls=receiver.calls,
    )


# Below the kernel's ephemeral range (32768 and up on Linux): a port probed free here is not one the
# kernel hands the next socket bound to port 0 (every fake server of every test worker binds one), so
# it stays free between the probe and the process that binds it.
_PROBED_PORTS = (20_000, 32_000)


def free_port() -> int:
    """A loopback port nothing listens on now, for a process the test starts to bind."""
    for _ in range(200):
        port = random.randint(*_PROBED_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {_PROBED_PORTS}")


@dataclass(frozen=True)
class RunningService:
    base_url: str
    host: str
    port: int
    process: subprocess.Popen[bytes]


@contextmanager
def memory_service_process(
    data_dir: Path,
    token: str | None = TOKEN,
    *,
    via_cli: bool = False,
    startup_timeout: float = 20.0,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
) -> Iterator[RunningService]:
    """`python -m memory.service` (or `python -m app memory-service`, the `switchboard` CLI) on a
    free loopback port with extra `args` and `env`; always stopped afterwards. `log_path`: its stdout
    (the JSON log lines) goes there."""
    env = {**{k: v for k, v in os.environ.items() if k != "MEMORY_TOKEN"}, **(env or {})}
    if token is not None:
        env["MEMORY_TOKEN"] = token
    env["PYTHONPATH"] = str(ROOT)
    errors: list[str] = []
    for _ in range(3):  # a free port can be taken between probing and binding: retry on a fresh one
        port = free_port()
        entry = ["-m", "app", "memory-service"] if via_cli else ["-m", "memory.service"]
        stdout = log_path.open("ab") if log_path is not None else subprocess.DEVNULL
        process = subprocess.Popen(
            [sys.executable, *entry, "--port", str(port), "--data-dir", str(data_dir), *args],
            cwd=ROOT,
            env=env,
            stdout=stdout,
            stderr=subprocess.PIPE,
        )
        if not isinstance(stdout, int):
            stdout.close()  # the child has its own copy
        try:
            if wait_healthy(process, port, startup_timeout):
                yield RunningService(f"http://127.0.0.1:{port}", "127.0.0.1", port, process)
                return
        finally:
            errors.append(stop_process(process))
    raise RuntimeError("memory service did not start:\n" + "\n".join(errors))


def wait_healthy(process: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    # One client for every look: each new one builds its TLS context (some 20 ms of CPU).
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            try:
                if client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    return False


def stop_process(process: subprocess.Popen[bytes]) -> str:
    """Stop the server (SIGTERM, then SIGKILL) and return what it wrote to stderr."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    if process.stderr is None:
        return ""
    with process.stderr:
        return process.stderr.read().decode(errors="replace")[-4000:]
