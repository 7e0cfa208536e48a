"""Slow clients and connection floods, cut off below the HTTP server (uvicorn or aiohttp alike).

Neither uvicorn nor aiohttp bounds how long a client may take to send its headers: a client that sends
half a request line and then nothing holds its connection (and a file descriptor) forever. The guard
wraps the server's asyncio protocol and watches the bytes going in:

- the request head must be complete within `header_timeout` (10 s) of the connection opening or of the
  request's first byte; a connection still in its head then gets a 408 and is closed;
- a declared body (Content-Length, or chunked up to the blank line after its trailers) must arrive
  within `body_timeout` (30 s) of the head's end, else the connection is closed; a chunked body is
  framed chunk by chunk (`ChunkedBody`), so bytes inside chunk data never end it early, and a
  malformed or oversized chunk-size or trailer line closes the connection at once;
- at most `max_connections` connections are open at once; one more is answered with a 503 and closed
  before the server sees it (a clean refusal, never a hang or a reset);
- an idle keep-alive connection between requests is the server's own keep-alive timeout (`keep_alive`).

The byte tracking (`RequestTracker`, `ChunkedBody`) is pure and only finds request boundaries; parsing
and every other refusal about content stay with the server.
"""

from __future__ import annotations

import asyncio
import re
import resource
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import structlog

from ops.coalesce import CoalescingTransport
from ops.metrics import Metrics

log = structlog.get_logger("http.guard")

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_KEEP_ALIVE = 5.0
# File descriptors kept back from the connection cap for the store, logs and the listening socket.
FD_RESERVE = 64
MAX_HEAD_BYTES = 64 * 1024  # past this the server refuses the head itself (431/400); we stop looking
MAX_CHUNK_LINE = 4096  # a chunk-size line (with its extensions) or one trailer line, CRLF excluded
MAX_CHUNK_SIZE_DIGITS = 16  # significant hex digits: a chunk size fits in 64 bits
_HEX = re.compile(rb"[0-9A-Fa-f]+")

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


def fd_bounded(limit: int) -> int:
    """The cap, lowered below the process's open-file limit so a flood meets a 503, not EMFILE."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limit
    return max(1, min(limit, soft - FD_RESERVE))


ChunkState = Literal["size", "data", "data_end", "trailer", "done", "bad"]


class ChunkedBody:
    """A chunked body's framing (RFC 9112 §7.1), fed in pieces of any size: where it ends, or that it is bad.

    Each chunk-size line (hex, optional `;extensions`) says how many data bytes to skip; the data is
    followed by CRLF; the last chunk (size 0, however many zeros) is followed by trailer lines up to a
    blank line. Only the framing is looked at, never the data, so nothing inside a chunk can end the
    body. A line that is not CRLF-terminated, not hex, too long, or a size past 64 bits is `bad`.
    """

    def __init__(self) -> None:
        self.state: ChunkState = "size"
        self._line = bytearray()
        self._remaining = 0  # data bytes of the current chunk, then 2 for its CRLF
        self._trailers = 0

    def feed(self, view: memoryview) -> memoryview:
        """Consume `view` up to the body's end; the bytes after it (the next request) are returned."""
        while view and self.state not in ("done", "bad"):
            if self.state == "data":
                used = min(self._remaining, len(view))
                self._remaining -= used
                view = view[used:]
                if self._remaining == 0:
                    self.state, self._remaining = "data_end", 2
            elif self.state == "data_end":
                if view[0] != b"\r\n"[2 - self._remaining]:
                    self.state = "bad"
                    break
                self._remaining -= 1
                view = view[1:]
                if self._remaining == 0:
                    self.state = "size"
            else:
                view = self._feed_line(view)
        return view

    def _feed_line(self, view: memoryview) -> memoryview:
        room = MAX_CHUNK_LINE + 2 - len(self._line)  # never look further than a line may be long
        window = bytes(view[:room])
        newline = window.find(b"\n")
        if newline < 0:
            self._line += window
            if len(self._line) >= MAX_CHUNK_LINE + 2:
                self.state = "bad"
            return view[len(window) :]
        self._line += window[: newline + 1]
        line = bytes(self._line)
        self._line.clear()
        if not line.endswith(b"\r\n"):
            self.state = "bad"
        elif self.state == "size":
            self._size_line(line[:-2])
        else:
            self._trailer_line(line[:-2])
        return view[newline + 1 :]

    def _size_line(self, line: bytes) -> None:
        digits = line.split(b";", 1)[0].rstrip(b" \t")
        if not _HEX.fullmatch(digits) or len(digits.lstrip(b"0")) > MAX_CHUNK_SIZE_DIGITS:
            self.state = "bad"
            return
        size = int(digits, 16)
        self.state, self._remaining = ("data", size) if size else ("trailer", 0)

    def _trailer_line(self, line: bytes) -> None:
        if not line:
            self.state = "done"
            return
        self._trailers += len(line) + 2
        if self._trailers > MAX_HEAD_BYTES:
            self.state = "bad"


class RequestTracker:
    """Where a connection's byte stream is: in a request head, in a body, or between requests.

    `serial` counts requests begun, so a caller can tell a new head from the same one still coming.
    `malformed` is set for good when a chunked body's framing is bad; the connection is then closed.
    """

    def __init__(self) -> None:
        self.phase: Phase = "head"  # a new connection owes us a request head
        self.serial = 1
        self._head = bytearray()
        self._remaining = 0
        self._chunks: ChunkedBody | None = None
        self._gave_up = False
        self.malformed = False

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not (self._gave_up or self.malformed):
            if self.phase == "idle":
                stripped = bytes(view[:2])
                if stripped.startswith(b"\r\n"):  # a stray CRLF between requests is allowed
                    view = view[2:]
                    continue
                self.phase, self.serial = "head", self.serial + 1
            view = self._feed_head(view) if self.phase == "head" else self._feed_body(view)

    def _feed_head(self, view: memoryview) -> memoryview:
        start = max(0, len(self._head) - 3)
        self._head += view
        end = self._head.find(b"\r\n\r\n", start)
        if end < 0:
            if len(self._head) > MAX_HEAD_BYTES:
                self._gave_up = True
            return view[len(view) :]
        rest = memoryview(bytes(self._head[end + 4 :]))
        self._start_body(bytes(self._head[:end]))
        self._head.clear()
        return rest

    def _start_body(self, head: bytes) -> None:
        length, chunked = 0, False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length" and value.strip().isdigit():
                length = int(value.strip())
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        self._chunks, self._remaining = (ChunkedBody() if chunked else None), length
        self.phase = "body" if chunked or length > 0 else "idle"

    def _feed_body(self, view: memoryview) -> memoryview:
        if self._chunks is not None:
            view = self._chunks.feed(view)
            if self._chunks.state == "bad":
                self.malformed = True
            elif self._chunks.state == "done":
                self.phase, self._chunks = "idle", None
            return view
        used = min(self._remaining, len(view))
        self._remaining -= used
        if self._remaining == 0:
            self.phase = "idle"
        return view[used:]


_REFUSAL_BODY = b'{"error":"too many connections"}'
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(_REFUSAL_BODY)).encode() + b"\r\n\r\n" + _REFUSAL_BODY
)
_TIMEOUT_BODY = b'{"error":"request head not received in time"}'
REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Content-Length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n" + _TIMEOUT_BODY
)


class ConnectionGuard:
    """One per listening server: the limits, the open-connection count, and the protocol wrapper.

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
        self._metrics = metrics

    def wrap(self, factory: Callable[..., asyncio.Protocol]) -> Callable[..., asyncio.Protocol]:
        """A protocol factory that puts every connection `factory` makes under this guard."""

        def guarded(*args: Any, **kwargs: Any) -> asyncio.Protocol:
            return _GuardedProtocol(self, lambda: factory(*args, **kwargs))

        return guarded

    def _opened(self) -> bool:
        if self.open >= self.limits.max_connections:
            if self._metrics is not None:
                self._metrics.connections_refused.labels(self.server).inc()
            return False
        self.open += 1
        if self._metrics is not None:
            self._metrics.open_connections.labels(self.server).set(self.open)
        return True

    def _closed(self) -> None:
        self.open -= 1
        if self._metrics is not None:
            self._metrics.open_connections.labels(self.server).set(self.open)

    def _malformed(self) -> None:
        log.info("http.malformed_body_closed", server=self.server)

    def _timed_out(self, phase: Phase) -> None:
        log.info("http.slow_client_closed", server=self.server, phase=phase)
        if self._metrics is not None:
            self._metrics.slow_clients_closed.labels(self.server, phase).inc()


class _GuardedProtocol(asyncio.Protocol):
    """Forwards everything to the server's protocol; owns the deadline timer of its connection."""

    def __init__(self, guard: ConnectionGuard, make_inner: Callable[[], asyncio.Protocol]) -> None:
        self._guard = guard
        self._make_inner = make_inner
        self._inner: asyncio.Protocol | None = None
        self._transport: asyncio.Transport | None = None
        self._tracker = RequestTracker()
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses
        self._transport = transport
        if not self._guard._opened():
            transport.write(REFUSAL)
            transport.close()
            return
        if self._guard.coalesce_writes:
            transport = self._transport = CoalescingTransport(transport)
        self._inner = self._make_inner()
        self._arm()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._inner is None:
            return
        before = (self._tracker.phase, self._tracker.serial)
        self._tracker.feed(data)
        if self._tracker.malformed:  # the server would wait on framing it cannot have: close now
            self._guard._malformed()
            if self._transport is not None:
                self._transport.abort()
            return
        if (self._tracker.phase, self._tracker.serial) != before:
            self._arm()
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self._inner is None:
            return
        self._guard._closed()
        inner, self._inner = self._inner, None
        inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def _arm(self) -> None:
        self._cancel()
        phase = self._tracker.phase
        if phase == "idle":
            return
        limits = self._guard.limits
        delay = limits.header_timeout if phase == "head" else limits.body_timeout
        self._timer = asyncio.get_running_loop().call_later(delay, self._expire, phase)

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
        if phase == "head":  # nothing answered yet on this request: say why, then close
            transport.write(REQUEST_TIMEOUT)
            transport.close()
        else:
            transport.abort()
