"""Loaded first by a test subprocess (its PYTHONPATH): no socket may connect anywhere."""

import socket


class _NoNetwork(OSError):
    pass


def _refuse(self: socket.socket, *args: object, **kwargs: object) -> None:
    raise _NoNetwork(f"network is off for this process (tried to connect to {args!r})")


socket.socket.connect = _refuse  # type: ignore[method-assign,assignment]
socket.socket.connect_ex = _refuse  # type: ignore[method-assign,assignment]
socket.create_connection = lambda *args, **kwargs: _refuse(None, *args)  # type: ignore[assignment,arg-type]
