"""Prometheus metrics: one `Metrics` per process, in its own registry, served at `/metrics`.

Every label value comes from a fixed set (a route template, a status code, an outcome token, a
configured provider and model name), never from a request: no user text, scope key or record id can
become a label, so neither secrets nor unbounded series reach the scraper.

`/metrics` is not behind Slack's signature check nor the memory service's data token; it has its own
bearer token (`METRICS_TOKEN`), compared in constant time, and answers 401 to everyone when that is
unset. Prometheus sends it with `authorization: {credentials: …}` in the scrape config.

Several processes serving one port (`memory-service --workers N`) use prometheus-client's multiprocess
mode: the supervisor sets `PROMETHEUS_MULTIPROC_DIR` before the workers start, every worker's values
live in files there, and a scrape answered by any worker sums them all (`multiprocess_dir`).
"""

from __future__ import annotations

import hmac

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

METRICS_PATH = "/metrics"
METRICS_TOKEN_ENV = "METRICS_TOKEN"
CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
OTHER_ROUTE = "other"  # every path that is not one of the server's routes

_HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_MODEL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)


class Metrics:
    """The instruments both processes know; each process moves the ones it has.

    A fresh registry unless one is passed, so two apps (or two tests) in one process never share
    counts and prometheus-client's process-global default registry is left alone. `multiprocess_dir`
    (a worker of several, with `PROMETHEUS_MULTIPROC_DIR` set before prometheus-client was imported):
    `render` reports every process's files there, not this process's registry.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, multiprocess_dir: str | None = None
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._scraped = self.registry
        if multiprocess_dir is not None:
            self._scraped = CollectorRegistry()
            multiprocess.MultiProcessCollector(self._scraped, path=multiprocess_dir)  # type: ignore[no-untyped-call]
        self._add_http(self.registry)
        self._add_memory(self.registry)
        self._add_model(self.registry)
        self._request_children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def _add_http(self, r: CollectorRegistry) -> None:
        self.http_requests = Counter(
            "switchboard_http_requests", "HTTP requests answered", ["server", "route", "status"], registry=r
        )
        self.http_latency = Histogram(
            "switchboard_http_request_duration_seconds",
            "Time to answer an HTTP request",
            ["server", "route"],
            buckets=_HTTP_BUCKETS,
            registry=r,
        )
        self.open_connections = Gauge(
            "switchboard_http_open_connections",
            "Connections open now",
            ["server"],
            registry=r,
            multiprocess_mode="livesum",  # several workers: the sum over the living ones
        )
        self.connections_refused = Counter(
            "switchboard_http_connections_refused",
            "Connections refused at the cap (503)",
            ["server"],
            registry=r,
        )
        self.connections_shed = Counter(
            "switchboard_http_connections_shed",
            "Connections without a request head closed at the cap to let a new one in (503)",
            ["server"],
            registry=r,
        )
        self.slow_clients_closed = Counter(
            "switchboard_http_slow_clients_closed",
            "Connections closed for missing the head or body deadline",
            ["server", "phase"],
            registry=r,
        )

    def _add_memory(self, r: CollectorRegistry) -> None:
        # The service counts the retrieves it serves; the bot counts its runs' reads (one per run that
        # reads memory, whichever store answers it), so each process's /metrics shows its own.
        self.memory_reads = Counter("switchboard_memory_reads", "Memory retrieval reads", registry=r)
        self.memory_records_read = Counter(
            "switchboard_memory_records_read", "Records returned by retrieval reads", registry=r
        )
        self.memory_read_failures = Counter(
            "switchboard_memory_read_failures",
            "Memory reads that failed (the run went on without memory)",
            registry=r,
        )
        self.memory_writes = Counter(
            "switchboard_memory_writes", "Written candidates by what the store did", ["result"], registry=r
        )
        self.memory_evictions = Counter(
            "switchboard_memory_evictions", "Records evicted over a scope's cap", registry=r
        )
        self.memory_curations = Counter(
            "switchboard_memory_curations",
            "Curation actions done (approved, rejected, expired, edited, merged)",
            ["action"],
            registry=r,
        )
        self.memory_denials = Counter(
            "switchboard_memory_denials",
            "Memory access refused (unauthorized request, write gate denial)",
            ["reason"],
            registry=r,
        )
        self.reflection_outcomes = Counter(
            "switchboard_reflection_outcomes", "Reflections by outcome", ["outcome"], registry=r
        )

    def _add_model(self, r: CollectorRegistry) -> None:
        self.model_latency = Histogram(
            "switchboard_model_call_duration_seconds",
            "Time of one model call",
            ["provider", "model"],
            buckets=_MODEL_BUCKETS,
            registry=r,
        )
        self.model_tokens = Counter(
            "switchboard_model_tokens",
            "Model tokens by direction",
            ["provider", "model", "direction"],
            registry=r,
        )

    def observe_request(self, server: str, route: str, status: int, seconds: float) -> None:
        # The labelled children, looked up once per series: `labels()` takes a lock and builds a key on
        # every call, and this runs on every request (the series are the ones Prometheus keeps anyway).
        key = (server, route, status)
        children = self._request_children.get(key)
        if children is None:
            children = (
                self.http_requests.labels(server, route, str(status)),
                self.http_latency.labels(server, route),
            )
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        """The registry (several workers: all of theirs, summed) in Prometheus text format."""
        return generate_latest(self._scraped)


def mark_worker_dead(pid: int, multiprocess_dir: str) -> None:
    """A worker has exited: its live gauges leave the sums (its counters stay, as counted)."""
    multiprocess.mark_process_dead(pid, multiprocess_dir)  # type: ignore[no-untyped-call]


def scrape_allowed(authorization: str | None, token: str | None) -> bool:
    """`Authorization: Bearer <METRICS_TOKEN>`, constant-time; no token configured → nobody."""
    if not token or not authorization:
        return False
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        return False
    return hmac.compare_digest(presented.encode("latin-1", "replace"), token.encode("utf-8"))
