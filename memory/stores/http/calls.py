"""One round trip to the memory service, and what its failure is under the store front's policy.

A request that never got an answer from the service (refused, reset, timed out) or a 502, 503 or
504 (the service, or the gateway in front of it, cannot serve now; the service answers 503 itself
when its own storage is out of reach) is `MemoryUnavailable`: the front then reads a retrieve as
nothing, with one warning. Any other non-2xx (a 4xx for a request the service refused, a 500 for its
store's failure) and a 2xx that is not a JSON object is a `MemoryStoreError` naming the route and
the service's reason, with the status.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from memory.types import MemoryStoreError, MemoryUnavailable
from ops.tracing import client_span

# What a gateway or the service answers while it cannot serve: the service is out of reach for now.
UNAVAILABLE_STATUSES = frozenset({502, 503, 504})


class CallFailed(Exception):
    """One round trip did not produce a 2xx JSON object; `status` is None when no answer came."""

    def __init__(self, status: int | None, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason

    def error(self, route: str) -> MemoryStoreError:
        """This failure under the front's policy: out of reach, or a fault to raise."""
        message = f"memory service {route} failed: {self.reason}"
        if self.status is None or self.status in UNAVAILABLE_STATUSES:
            return MemoryUnavailable(message, status=self.status)
        return MemoryStoreError(message, status=self.status)


class ServiceCalls:
    """One pooled `httpx.AsyncClient` to the memory service, with the bearer token on every request."""

    def __init__(
        self, base_url: str, token: str, timeout: float, transport: httpx.AsyncBaseTransport | None
    ) -> None:
        self._timeout = timeout
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    @property
    def timeout(self) -> float:
        return self._timeout

    async def post(self, route: str, body: dict[str, object]) -> dict[str, Any]:
        """The route's JSON reply; its failure raised as the module's docstring says."""
        try:
            return await self.round_trip(route, body)
        except CallFailed as failure:
            raise failure.error(route) from None

    async def round_trip(self, route: str, body: dict[str, object]) -> dict[str, Any]:
        """One POST, bounded as a whole by the timeout (httpx's own timeouts are per phase); a
        `CallFailed` unless the reply is a 2xx JSON object.

        The request is an http.client span whose W3C `traceparent` header makes the service's span
        its child.
        """
        url = self._client.base_url
        with client_span("POST", route, url.host, url.port) as (span, trace_headers):
            try:
                async with asyncio.timeout(self._timeout):
                    response = await self._client.post(route, json=body, headers=trace_headers)
            except (TimeoutError, httpx.TimeoutException):
                span.set_attribute("error.type", "timeout")
                raise CallFailed(None, "timed out") from None
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                span.set_attribute("error.type", type(exc).__name__)
                raise CallFailed(None, f"transport error ({type(exc).__name__})") from None
            span.set_attribute("http.response.status_code", response.status_code)
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if not response.is_success:
            error = reply.get("error") if isinstance(reply, dict) else None
            if not isinstance(error, str) or not error:
                error = response.reason_phrase or "no reason"
            raise CallFailed(response.status_code, f"{response.status_code} {error[:200]}")
        if not isinstance(reply, dict):
            raise CallFailed(response.status_code, "reply is not a JSON object")
        return reply

    async def aclose(self) -> None:
        await self._client.aclose()
