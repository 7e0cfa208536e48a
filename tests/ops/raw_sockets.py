"""Raw-socket clients for the slow-client tests: what no HTTP library will do on purpose."""

from __future__ import annotations

import socket
import time


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
