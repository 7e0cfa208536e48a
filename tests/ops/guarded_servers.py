"""uvicorn and aiohttp, each under the slow-client guard as the two services run them, in the test's loop.

Both serve the same tiny app: `GET` answers `ok`, `POST` reads its whole body and answers its length.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from aiohttp import web

from ops.http_guard import ConnectionGuard, GuardLimits
from ops.uvicorn_progress import WatchedHttpToolsProtocol

SERVERS = ("uvicorn", "aiohttp")


@dataclass(frozen=True)
class Guarded:
    host: str
    port: int
    guard: ConnectionGuard


async def _asgi(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    reply = b"ok" if scope["method"] == "GET" else str(len(body)).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(reply))]}
    )
    await send({"type": "http.response.body", "body": reply})


async def _aiohttp_handler(request: web.BaseRequest) -> web.Response:
    body = await request.read()
    return web.Response(text="ok" if request.method == "GET" else str(len(body)))


def _listener() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def guarded(
    server: str,
    limits: GuardLimits,
    *,
    coalesce_writes: bool = False,
    uvicorn_protocol: type[WatchedHttpToolsProtocol] = WatchedHttpToolsProtocol,
) -> AsyncIterator[Guarded]:
    """`server` ("uvicorn" or "aiohttp") on a free loopback port under a guard with `limits`."""
    sock = _listener()
    port = sock.getsockname()[1]
    guard = ConnectionGuard(server, limits, coalesce_writes=coalesce_writes)
    if server == "uvicorn":
        config = uvicorn.Config(
            _asgi,
            http=guard.wrap(uvicorn_protocol),  # type: ignore[arg-type]
            limit_concurrency=limits.max_connections + 1,
            timeout_keep_alive=limits.keep_alive,  # type: ignore[arg-type]
            log_level="critical",
            lifespan="off",
        )
        config.load()
        uv = uvicorn.Server(config)
        uv.lifespan = config.lifespan_class(config)  # what `Server.serve` sets before `startup`
        await uv.startup(sockets=[sock])
        try:
            yield Guarded("127.0.0.1", port, guard)
        finally:
            await uv.shutdown()
        return
    runner = web.ServerRunner(web.Server(_aiohttp_handler, keepalive_timeout=limits.keep_alive))
    await runner.setup()
    assert runner.server is not None
    listening = await asyncio.get_running_loop().create_server(guard.wrap(runner.server), sock=sock)
    try:
        yield Guarded("127.0.0.1", port, guard)
    finally:
        listening.close()
        await runner.cleanup()


async def exchange(
    where: Guarded, sent: bytes, within: float = 5, *, then: bytes = b"", pause: float = 0
) -> tuple[bytes, float]:
    """Send `sent` (and `then` after `pause` s) on a fresh connection; what came back until the server
    closed it (or `within` passed), and after how long (from the last byte sent)."""
    reader, writer = await asyncio.open_connection(where.host, where.port)
    try:
        writer.write(sent)
        if then:
            await asyncio.sleep(pause)
            writer.write(then)
        started = time.monotonic()
        received = b""
        try:
            async with asyncio.timeout(within):
                while chunk := await reader.read(65536):
                    received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return received, time.monotonic() - started
    finally:
        writer.close()
