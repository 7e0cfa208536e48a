"""The bot's side of the memory service: the store front over the service's routes as its backend.

`HttpMemoryStore` is a `StoreFront` like the in-process, SQLite and PostgreSQL stores, so its argument
checks, clamping, de-duplication, events and failure policy are the front's, written once: a service
out of reach (no answer, a 502, 503 or 504) is `MemoryUnavailable`, so a retrieve reads as nothing
with one `memory.retrieve_failed` warning; any other failure (a refused request, the service's store
failing, a malformed reply) raises a `MemoryStoreError` naming the route. The service's own store,
behind its own front, ranks by its ranking and keeps its retention: the front here applies neither
(`_rules_here`). Its backend is `HttpBackend`: the reads (memory/stores/http/reads.py) and the writes
and curation (memory/stores/http/curating.py), each primitive one route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import httpx

from memory.stores.contract import ScopeMaintenance
from memory.stores.front import StoreFront
from memory.stores.http.calls import CallFailed, ServiceCalls
from memory.stores.http.curating import HttpWrites
from memory.stores.http.reads import HttpReads
from memory.types import MemoryStoreError

DEFAULT_TIMEOUT = 5.0
# The scope `open` asks about: a fetch of no ids is authenticated and answered without touching a store.
START_CHECK_SCOPE = "org:switchboard-start-check"


class HttpBackend(HttpWrites, HttpReads):
    """Every `StoreBackend` primitive as a call to the memory service."""

    def __init__(self, service: ServiceCalls) -> None:
        self._service = service


class HttpMemoryStore(StoreFront):
    """One pooled client to the memory service; `cap` goes on every write and approval when set
    (unset: the service applies its own default)."""

    _log_fields: ClassVar[Mapping[str, str]] = {"store": "http"}
    _rules_here: ClassVar[bool] = False

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = DEFAULT_TIMEOUT,
        cap: int | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._cap = cap
        self._embedder = None  # the service embeds for its callers: vectors never cross the wire
        self._service = ServiceCalls(base_url, token, timeout, transport)
        self._backend = HttpBackend(self._service)

    @property
    def base_url(self) -> str:
        return self._service.base_url

    @property
    def cap(self) -> int | None:
        """The per-scope cap sent on every write; None lets the service apply its own default."""
        return self._cap

    @property
    def timeout(self) -> float:
        return self._service.timeout

    async def open(self) -> None:
        """One authenticated round trip at start-up, so a wrong token or a service that is not there
        is one line now, not a bot that starts and then quietly remembers nothing (a retrieve reads a
        service out of reach as nothing). Raises MemoryStoreError naming what to fix."""
        try:
            await self._service.round_trip("/fetch", {"scopeKey": START_CHECK_SCOPE, "ids": []})
        except CallFailed as failure:
            where = f"memory.service_url {self.base_url}"
            if failure.status == 401:
                message = f"{where} refused the token (401): set MEMORY_TOKEN to the memory service's token"
            elif failure.status is None:
                message = f"{where}: cannot reach the memory service ({failure.reason})"
            else:
                message = f"{where}: the memory service answered {failure.reason}"
            raise MemoryStoreError(message, status=failure.status) from None

    def maintenance(self) -> ScopeMaintenance | None:
        """None: the scopes and their vectors live on the service's host (run reindex there)."""
        return None

    async def aclose(self) -> None:
        await self._service.aclose()
