"""The garbage collector of a long-running server: start-up objects out of its way, collections rarer.

A full collection walks every tracked object; in a server that is the modules, the embedder and the
stores' caches, and it pauses the server for tens of milliseconds under load: the tail of its
latency. Objects alive at start-up live as long as the process, so they are
frozen out of the collector's generations; and the youngest generation is collected every 20,000
allocations instead of CPython's 700, so the per-request garbage of an HTTP server triggers a
collection every few hundred requests rather than every few. Cycles are still collected.
"""

from __future__ import annotations

import gc

# CPython's defaults are (700, 10, 10).
SERVER_THRESHOLDS = (20_000, 50, 100)


def settle_heap() -> None:
    """Call once, when the server is built and about to serve."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVER_THRESHOLDS)
