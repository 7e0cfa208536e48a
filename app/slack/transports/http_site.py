"""HTTP mode's server: the Bolt endpoint and /healthz (app/slack/transports/http.py) on aiohttp, with every
connection under the slow-client guard and `/metrics` beside the Bolt route."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from aiohttp import web

from app.slack.transports.http import HEALTH_PATH, ServedBot, build_web_app
from ops.http_guard import ConnectionGuard, GuardLimits
from ops.metrics import CONTENT_TYPE, METRICS_PATH, OTHER_ROUTE, Metrics, scrape_allowed

EVENTS_PATH = "/slack/events"


async def start_http(
    bot: ServedBot,
    *,
    host: str,
    port: int,
    path: str = EVENTS_PATH,
    limits: GuardLimits | None = None,
    metrics: Metrics | None = None,
    metrics_token: str | None = None,
) -> web.AppRunner:
    """Serve the Bolt app's Events API / slash command / interactivity endpoint and /healthz on aiohttp
    (app/slack/transports/http.py); returns the runner to clean up. Port 0 picks a free port (see
    `bound_port`).

    Every connection is under the slow-client guard (ops/http_guard.py); `/metrics` sits beside the
    Bolt route, outside Slack's signature check, behind its own token (ops/metrics.py).
    """
    limits = limits or GuardLimits()
    metrics = metrics if metrics is not None else Metrics()
    web_app = build_web_app(bot, path=path)
    web_app.middlewares.append(_measured(metrics, path))
    web_app.router.add_get(METRICS_PATH, _scrape(metrics, metrics_token))
    runner = web.AppRunner(web_app, keepalive_timeout=limits.keep_alive)
    await runner.setup()
    site = _GuardedSite(runner, _listening_socket(host, port), ConnectionGuard("slack", limits, metrics))
    await site.start()
    return runner


def bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    raise RuntimeError("the Slack HTTP server is not listening")


def _measured(metrics: Metrics, path: str) -> Any:
    """Requests by route and status: the events path, /healthz, /metrics, or `other` (never the raw path)."""
    known = {path, HEALTH_PATH, METRICS_PATH}

    @web.middleware
    async def measured(request: web.Request, handler: Any) -> web.StreamResponse:
        started = time.perf_counter()
        route = request.path if request.path in known else OTHER_ROUTE
        status = 500
        try:
            response: web.StreamResponse = await handler(request)
            status = response.status
            return response
        except web.HTTPException as error:
            status = error.status
            raise
        finally:
            metrics.observe_request("slack", route, status, time.perf_counter() - started)

    return measured


def _scrape(metrics: Metrics, token: str | None) -> Any:
    async def scrape(request: web.Request) -> web.Response:
        if not scrape_allowed(request.headers.get("Authorization"), token):
            return web.json_response({"error": "unauthorized"}, status=401)
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    return scrape


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.setblocking(False)
    return sock


class _GuardedSite(web.SockSite):
    """aiohttp's socket site with every connection's protocol wrapped by the guard."""

    def __init__(self, runner: web.AppRunner, sock: socket.socket, guard: ConnectionGuard) -> None:
        super().__init__(runner, sock)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.wrap(server), sock=self._sock, backlog=self._backlog
        )
