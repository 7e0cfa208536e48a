"""uvicorn's httptools protocol, reporting its parser's callbacks to the slow-client guard
(ops/http_guard.py, through ops/server_progress.py): the memory service's HTTP protocol."""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ops.server_progress import Watch


class WatchedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, reporting its parser's callbacks to the guard."""

    watch: Watch | None = None

    def attach_watch(self, watch: Watch) -> None:
        self.watch = watch

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.watch is not None:
            self.watch.head_begun()

    def on_headers_complete(self) -> None:
        if self.watch is not None:
            self.watch.head_complete()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        # Reported even when the app answered before reading the body (uvicorn then ignores the rest).
        if self.watch is not None:
            self.watch.message_complete()
        super().on_message_complete()
