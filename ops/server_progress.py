"""How each HTTP server tells the slow-client guard (ops/http_guard.py) where its requests are.

The guard never reads the bytes: the server's own parser decides where a request head and a request
end, and these adapters pass that on. uvicorn's C parser calls back its protocol, and
`WatchedHttpToolsProtocol` (ops/uvicorn_progress.py) forwards those callbacks; aiohttp's protocol has
no callbacks, so its adapter reads, after each read, how many request heads its parser has produced and
whether the current body is complete. Each server's library is imported only by the process running it.

aiohttp also closes a connection whose head is still arriving once its keep-alive timeout (shorter than
the head deadline) passes, silently; its adapter holds that timer back while a head is owed, so the
client gets the guard's 408 at the head deadline instead.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from aiohttp.streams import StreamReader


class Watch(Protocol):
    """The guard's side of one connection (ops/http_guard.py `_GuardedProtocol`)."""

    @property
    def phase(self) -> Literal["head", "body", "idle"]: ...

    @property
    def deadline(self) -> float: ...

    def head_begun(self) -> None: ...

    def head_complete(self) -> None: ...

    def message_complete(self) -> None: ...


class Progress(Protocol):
    def after_data(self) -> None:
        """The server has had the connection or a read: pass on what its parser made of it."""


class _Callbacks:
    """A server whose parser calls back (uvicorn): the callbacks have already said everything."""

    def after_data(self) -> None:
        return None


_CALLBACKS = _Callbacks()

# What aiohttp's RequestHandler is read for (its parser's output); checked per connection, so an
# aiohttp that renames them fails the first request loudly instead of leaving connections unwatched.
_AIOHTTP_STATE = ("_request_count", "_messages", "_next_keepalive_close_time")


class _AiohttpProgress:
    def __init__(self, handler: Any, watch: Watch) -> None:  # aiohttp's web_protocol.RequestHandler
        missing = [name for name in _AIOHTTP_STATE if not hasattr(handler, name)]
        if missing:
            names = ", ".join(missing)
            raise RuntimeError(f"aiohttp's RequestHandler has no {names}: the guard cannot watch it")
        self._handler = handler
        self._watch = watch
        self._heads = 0
        self._payload: StreamReader | None = None

    def after_data(self) -> None:
        handler, watch = self._handler, self._watch
        heads: int = handler._request_count
        if heads != self._heads:
            self._heads = heads
            messages = handler._messages
            self._payload = messages[-1][1] if messages else None
            watch.head_complete()
        if watch.phase == "body" and (self._payload is None or self._payload.is_eof()):
            self._payload = None
            watch.message_complete()
        if watch.phase == "head":  # the head deadline, not aiohttp's keep-alive, ends this wait
            hold = watch.deadline + 1.0
            if handler._next_keepalive_close_time < hold:
                handler._next_keepalive_close_time = hold


def progress_of(protocol: asyncio.Protocol, watch: Watch) -> Progress:
    """The adapter for a server's protocol; a server the guard does not know is refused."""
    attach = getattr(protocol, "attach_watch", None)
    if attach is not None:  # ops/uvicorn_progress.py
        attach(watch)
        return _CALLBACKS
    from aiohttp import web_protocol  # a process serving aiohttp has it imported already

    if isinstance(protocol, web_protocol.RequestHandler):
        return _AiohttpProgress(protocol, watch)
    raise TypeError(f"the slow-client guard cannot watch {type(protocol).__name__}: no adapter for it")
