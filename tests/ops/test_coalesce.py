"""The coalescing transport: one loop turn's writes leave as one write, in order, and close/abort keep
their meaning. The memory service's real uvicorn runs through it in tests/memory/test_service_uvicorn.py
and test_service_slow_clients.py; here a recording transport shows what reaches the socket."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from ops.coalesce import CoalescingTransport
from ops.http_guard import GuardLimits
from ops.uvicorn_progress import WatchedHttpToolsProtocol
from tests.ops.guarded_servers import exchange, guarded


class RecordingTransport(asyncio.Transport):
    """What a socket transport is asked to do, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any]] = []
        self.closing = False
        self.buffered = 0

    def write(self, data: Any) -> None:
        self.calls.append(("write", bytes(data)))

    def close(self) -> None:
        self.calls.append(("close", None))
        self.closing = True

    def abort(self) -> None:
        self.calls.append(("abort", None))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5)}.get(name, default)


async def turn() -> None:
    await asyncio.sleep(0)


async def test_the_writes_of_one_turn_reach_the_socket_as_one_write_in_order() -> None:
    real = RecordingTransport()
    transport = CoalescingTransport(real)
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(b"")
    transport.writelines([b"o", bytearray(b"k")])
    assert real.calls == []
    await turn()
    assert real.calls == [("write", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")]
    transport.write(b"next")
    await turn()
    assert real.calls[1:] == [("write", b"next")]


async def test_a_bytearray_changed_after_write_is_sent_as_it_was() -> None:
    real = RecordingTransport()
    transport = CoalescingTransport(real)
    buffer = bytearray(b"before")
    transport.write(buffer)
    buffer[:] = b"after!"
    await turn()
    assert real.calls == [("write", b"before")]


async def test_close_sends_what_is_pending_first_and_abort_drops_it() -> None:
    closed, aborted = RecordingTransport(), RecordingTransport()
    one, two = CoalescingTransport(closed), CoalescingTransport(aborted)
    one.write(b"last words")
    one.close()
    two.write(b"never sent")
    two.abort()
    await turn()
    assert closed.calls == [("write", b"last words"), ("close", None)]
    assert aborted.calls == [("abort", None)]


async def test_nothing_is_written_to_a_transport_closed_meanwhile() -> None:
    real = RecordingTransport()
    transport = CoalescingTransport(real)
    transport.write(b"too late")
    real.closing = True  # the peer went away before the end of the turn
    await turn()
    assert real.calls == []


async def test_the_rest_is_the_real_transports() -> None:
    real = RecordingTransport()
    real.buffered = 10
    transport = CoalescingTransport(real)
    transport.write(b"12345")
    assert transport.get_write_buffer_size() == 15
    assert transport.get_extra_info("peername") == ("127.0.0.1", 5)
    assert transport.is_closing() is False


class Recording(WatchedHttpToolsProtocol):
    transports: ClassVar[list[asyncio.BaseTransport]] = []

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        Recording.transports.append(transport)
        super().connection_made(transport)


async def test_the_guard_hands_the_server_a_coalescing_transport_only_when_asked() -> None:
    for coalesce in (True, False):
        Recording.transports.clear()
        async with guarded(
            "uvicorn", GuardLimits(), coalesce_writes=coalesce, uvicorn_protocol=Recording
        ) as where:
            received, _ = await exchange(where, b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        assert received.startswith(b"HTTP/1.1 200 ") and received.endswith(b"ok")
        assert isinstance(Recording.transports[0], CoalescingTransport) is coalesce
