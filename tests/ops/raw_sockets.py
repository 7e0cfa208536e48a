"""Raw-socket clients for the slow-client tests: what no HTTP library will do on purpose."""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager


def half_open(host: str, port: int, sent: bytes = b"POST /retr") -> socket.socket:
    """A connection that sent `sent` (half a request line by default) and will send nothing more."""
    sock = socket.create_connection((host, port), timeout=5)
    if sent:
        sock.sendall(sent)
    return sock


def read_until_closed(sock: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started = time.monotonic()
    sock.settimeout(within)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received, time.monotonic() - started


def read_responses(sock: socket.socket, count: int, within: float = 5) -> list[bytes]:
    """The next `count` whole responses (each head plus its Content-Length body) on a kept-alive socket."""
    sock.settimeout(within)
    buffered, replies = b"", list[bytes]()
    while len(replies) < count:
        head_end = buffered.find(b"\r\n\r\n")
        if head_end >= 0:
            length = 0
            for line in buffered[:head_end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            end = head_end + 4 + length
            if len(buffered) >= end:
                replies.append(buffered[:end])
                buffered = buffered[end:]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {len(replies)} of {count} responses")
        buffered += chunk
    return replies


@contextmanager
def soft_open_file_limit(soft: int) -> Iterator[None]:
    """Processes started inside inherit a soft open-file limit of `soft` (an ordinary default on
    many systems); this process has its own back on leaving."""
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (before, hard))
