"""Slow clients and connection floods, watched below the HTTP server (uvicorn or aiohttp alike).

Neither server bounds how long a client may take to send its request head or its body: a client that
sends half a request line and then nothing holds its connection (and a file descriptor) forever. The
guard wraps the server's asyncio protocol and keeps the time, never the framing: the server's own
parser is the only thing that reads the bytes and decides where a request ends, and tells the guard
through its callbacks (ops/server_progress.py), so the guard can never disagree with it about where a
request ends.

- the request head must be complete within `header_timeout` (10 s) of the connection opening or of the
  request's first byte, and within `MAX_HEAD_BYTES`; a connection still in its head then gets a 408
  (or 431) and is closed;
- once the server has the head, its body must be complete within `body_timeout` (30 s), else the
  connection is closed (nothing can be answered on it any more);
- at most `max_connections` connections are open at once; one more sheds the connection that has waited
  longest without completing a request head (a 503, closed); failing that, the body-phase connection
  that has sent nothing for longest, once that is longer than `header_timeout` (closed: a client that
  sent a head and then stops must not hold its slot for the whole body deadline); and only when every
  connection is in a live request is the new one answered with a 503 and closed before the server
  sees it;
- an idle keep-alive connection between requests is the server's own keep-alive timeout (`keep_alive`).
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import structlog

from ops.coalesce import CoalescingTransport
from ops.metrics import Metrics
from ops.server_progress import Progress, progress_of

log = structlog.get_logger("http.guard")

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_KEEP_ALIVE = 5.0
# File descriptors kept back from the connection cap for the store, logs and the listening socket.
FD_RESERVE = 64
# A request head longer than this is refused (431). uvicorn's C parser has no limit of its own; aiohttp's
# (8 KiB a line) refuses long heads before this is reached.
MAX_HEAD_BYTES = 64 * 1024

Phase = Literal["head", "body", "idle"]


@dataclass(frozen=True, slots=True)
class GuardLimits:
    """The deadlines (seconds) and the connection cap; every server builds one from its settings."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    keep_alive: float = DEFAULT_KEEP_ALIVE

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keep_alive"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive number of seconds")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")


def raise_open_file_limit() -> int:
    """Raise this process's soft open-file limit to its hard limit (start-up); the soft limit now.

    A distribution's default soft limit (often 256 or 1024) would otherwise put the connection cap a few
    hundred connections up, where a flood of idle ones shuts real clients out.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as error:  # a hard limit the kernel will not grant (e.g. over nr_open)
        log.warning("http.open_file_limit_kept", soft=soft, hard=hard, error=type(error).__name__)
        return soft
    log.info("http.open_file_limit_raised", soft=soft, hard=hard)
    return hard


def fd_bounded(limit: int) -> int:
    """The cap, lowered below the process's open-file limit so a flood meets a 503, not EMFILE."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limit
    return max(1, min(limit, soft - FD_RESERVE))


def serving_limits(limits: GuardLimits) -> GuardLimits:
    """`limits` for a server about to start: the open-file limit raised, the cap kept below it."""
    raise_open_file_limit()
    return replace(limits, max_connections=fd_bounded(limits.max_connections))


def _response(status: bytes, body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n" + extra + b"Connection: close\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


REFUSAL = _response(b"503 Service Unavailable", b'{"error":"too many connections"}', b"Retry-After: 1\r\n")
REQUEST_TIMEOUT = _response(b"408 Request Timeout", b'{"error":"request head not received in time"}')
HEAD_TOO_LARGE = _response(b"431 Request Header Fields Too Large", b'{"error":"request head is too large"}')


class ConnectionGuard:
    """One per listening server: the limits, the open connections, and the protocol wrapper.

    `waiting` holds the connections owing a request head, oldest first: the ones shed first at the cap;
    `in_body` the ones whose body is still arriving, shed next once stalled.
    `coalesce_writes` hands the server's protocol a transport that sends each loop turn's writes as
    one (ops/coalesce.py): uvicorn's head and body leave in one send instead of two.
    """

    def __init__(
        self,
        server: str,
        limits: GuardLimits,
        metrics: Metrics | None = None,
        *,
        coalesce_writes: bool = False,
    ) -> None:
        self.server = server
        self.limits = limits
        self.open = 0
        self.coalesce_writes = coalesce_writes
        self.waiting: dict[_GuardedProtocol, None] = {}
        self.in_body: dict[_GuardedProtocol, None] = {}
        self._metrics = metrics

    def wrap(self, factory: Callable[..., asyncio.Protocol]) -> Callable[..., asyncio.Protocol]:
        """A protocol factory that puts every connection `factory` makes under this guard."""

        def guarded(*args: Any, **kwargs: Any) -> asyncio.Protocol:
            return _GuardedProtocol(self, lambda: factory(*args, **kwargs))

        return guarded

    def _admit(self) -> bool:
        """Room for one more connection: free already, or made by shedding the longest-waiting one."""
        victim = self._sheddable() if self.open >= self.limits.max_connections else None
        if victim is not None:
            phase = victim.phase
            victim._shed()
            log.info("http.connection_shed", server=self.server, open=self.open, phase=phase)
            if self._metrics is not None:
                self._metrics.connections_shed.labels(self.server).inc()
        if self.open >= self.limits.max_connections:
            if self._metrics is not None:
                self._metrics.connections_refused.labels(self.server).inc()
            return False
        self._count(+1)
        return True

    def _sheddable(self) -> _GuardedProtocol | None:
        """The longest-waiting connection owing a head, else the longest-stalled body, else None."""
        if self.waiting:
            return next(iter(self.waiting))
        if not self.in_body:
            return None
        stalled = min(self.in_body, key=lambda connection: connection.last_byte)
        if asyncio.get_running_loop().time() - stalled.last_byte > self.limits.header_timeout:
            return stalled
        return None

    def _count(self, change: int) -> None:
        self.open += change
        if self._metrics is not None:
            self._metrics.open_connections.labels(self.server).set(self.open)

    def _timed_out(self, phase: Phase) -> None:
        log.info("http.slow_client_closed", server=self.server, phase=phase)
        if self._metrics is not None:
            self._metrics.slow_clients_closed.labels(self.server, phase).inc()


class _GuardedProtocol(asyncio.Protocol):
    """Forwards everything to the server's protocol; owns the deadline timer of its connection.

    The phase moves on two signals only: a byte arriving while no request is in progress begins a head
    (the bytes are the server's to read), and the server's parser saying a head or a whole request is
    complete (`head_complete`, `message_complete`, called by ops/server_progress.py).
    """

    def __init__(self, guard: ConnectionGuard, make_inner: Callable[[], asyncio.Protocol]) -> None:
        self._guard = guard
        self._make_inner = make_inner
        self._inner: asyncio.Protocol | None = None
        self._progress: Progress | None = None
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._phase: Phase = "idle"
        self._heads = 0  # request heads the server has had on this connection
        self._head_bytes = 0
        self._deadline = 0.0
        self._last_byte = 0.0
        self._counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses
        self._transport = transport
        if not self._guard._admit():
            transport.write(REFUSAL)
            transport.close()
            return
        self._counted = True
        if self._guard.coalesce_writes:
            transport = self._transport = CoalescingTransport(transport)
        inner = self._inner = self._make_inner()
        self._progress = progress_of(inner, self)
        self.head_begun()  # a new connection owes a request head from now
        inner.connection_made(transport)
        self._progress.after_data()

    def data_received(self, data: bytes) -> None:
        if self._inner is None or self._progress is None:
            return
        heads = self._heads
        self._last_byte = asyncio.get_running_loop().time()
        self.head_begun()
        self._inner.data_received(data)
        self._progress.after_data()
        if self._phase != "head" or self._heads != heads:  # a head ended inside `data`
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES and self._transport is not None:
            self._cancel()
            self._forget()
            log.info("http.head_too_large", server=self._guard.server, length=self._head_bytes)
            self._transport.write(HEAD_TOO_LARGE)
            self._transport.close()

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self._forget()
        if self._counted:
            self._counted = False
            self._guard._count(-1)
        if self._inner is None:
            return
        inner, self._inner = self._inner, None
        inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    # ---- what the server's parser says (ops/server_progress.py) --------------------------------------

    def head_begun(self) -> None:
        """Bytes of a request the server has no head of yet (or a new connection): the head deadline."""
        if self._phase == "idle":
            self._phase, self._head_bytes = "head", 0
            self._guard.waiting[self] = None
            self._arm(self._guard.limits.header_timeout)

    def head_complete(self) -> None:
        """The server has a whole request head: its body (if any) has the body deadline."""
        self._phase = "body"
        self._heads += 1
        self._forget()
        self._guard.in_body[self] = None
        self._arm(self._guard.limits.body_timeout)

    def message_complete(self) -> None:
        """The server has the whole request: no deadline of ours until the next one begins."""
        self._phase = "idle"
        self._forget()
        self._cancel()

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def last_byte(self) -> float:
        """When (loop time) the connection's last bytes arrived."""
        return self._last_byte

    @property
    def deadline(self) -> float:
        """When (loop time) the current deadline passes."""
        return self._deadline

    # ---- deadlines and shedding ------------------------------------------------------------------

    def _arm(self, delay: float) -> None:
        self._cancel()
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + delay
        self._timer = loop.call_at(self._deadline, self._expire, self._phase)

    def _forget(self) -> None:
        """Off both of the guard's shedding lists (its phase has moved on, or it is closing)."""
        self._guard.waiting.pop(self, None)
        self._guard.in_body.pop(self, None)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self, phase: Phase) -> None:
        self._timer = None
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self._guard._timed_out(phase)
        self._forget()
        if phase == "head":  # nothing answered yet on this request: say why, then close
            transport.write(REQUEST_TIMEOUT)
            transport.close()
        else:
            transport.abort()

    def _shed(self) -> None:
        """Make room at the cap: this connection owes a head (it is told to retry) or its body stalled
        (closed: the server may have answered on it already, so nothing more can be written)."""
        phase = self._phase
        self._cancel()
        self._forget()
        if self._counted:  # its slot is free now, though the socket closes on the next loop turn
            self._counted = False
            self._guard._count(-1)
        if self._transport is not None and not self._transport.is_closing():
            if phase == "head":
                self._transport.write(REFUSAL)
                self._transport.close()
            else:
                self._transport.abort()
        # Off the server's books now, not when the socket has closed: uvicorn counts its connections
        # against `limit_concurrency` when the new one's request arrives, maybe in this same loop turn.
        inner, self._inner = self._inner, None
        if inner is not None:
            inner.connection_lost(None)
