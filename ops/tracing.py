"""OpenTelemetry tracing: our code speaks the API only; the SDK comes with `switchboard[otel]`.

`configure_tracing(env)` runs once at a process's start. With `OTEL_TRACES_EXPORTER` unset (or
`none`) it does nothing and every span below is the API's no-op. Otherwise it installs the SDK's
tracer provider with the exporters named there: `console` (one JSON span per line on stderr, for a
local look) and `otlp` (OTLP over HTTP, configured by `OTEL_EXPORTER_OTLP_*`). The service name is
`OTEL_SERVICE_NAME` (or `OTEL_RESOURCE_ATTRIBUTES`), else the process's own default; the sampler is
`OTEL_TRACES_SAMPLER`; the propagator `OTEL_PROPAGATORS` (default W3C tracecontext + baggage).

Span attributes are ids, names and counts only: never record text, a prompt, an answer or a secret.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import structlog
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind

__all__ = [
    "Span",
    "SpanKind",
    "annotate",
    "client_span",
    "configure_tracing",
    "server_span",
    "span",
    "tracer",
]

log = structlog.get_logger("tracing")

TRACER_NAME = "switchboard"
EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
SERVICE_NAME_ENV = "OTEL_SERVICE_NAME"

AttributeValue = str | bool | int | float
Attributes = Mapping[str, AttributeValue | None]


def tracer() -> trace.Tracer:
    """The process's tracer (a proxy until a provider is installed, so importing early is fine)."""
    return trace.get_tracer(TRACER_NAME)


@contextmanager
def span(
    name: str, attributes: Attributes | None = None, *, kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[Span]:
    """A child of the current span; None attributes are left out. An exception marks it failed."""
    if not recording():
        yield trace.INVALID_SPAN
        return
    with tracer().start_as_current_span(name, kind=kind, attributes=_kept(attributes)) as current:
        yield current


def recording() -> bool:
    """False until a tracer provider is installed: until then a span is not even started (no cost).

    Nothing is lost: without a provider the API's spans record nothing, and neither server of ours
    passes an incoming trace context on to a call of its own.
    """
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def annotate(attributes: Attributes) -> None:
    """Add attributes to the current span (a no-op when there is none or tracing is off)."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(_kept(attributes))


def _kept(attributes: Attributes | None) -> dict[str, AttributeValue]:
    return {key: value for key, value in (attributes or {}).items() if value is not None}


@contextmanager
def client_span(
    method: str, route: str, host: str | None, port: int | None
) -> Iterator[tuple[Span, dict[str, str]]]:
    """An outgoing HTTP request's span and the headers (W3C `traceparent`) that carry it onwards."""
    attributes: dict[str, AttributeValue | None] = {
        "http.request.method": method,
        "http.route": route,
        "url.path": route,
        "server.address": host,
        "server.port": port,
    }
    with span(f"{method} {route}", attributes, kind=SpanKind.CLIENT) as current:
        headers: dict[str, str] = {}
        if current.is_recording():
            propagate.inject(headers)
        yield current, headers


@contextmanager
def server_span(method: str, route: str, headers: Mapping[str, str]) -> Iterator[Span]:
    """An incoming request's span, the child of the caller's span when its headers carry one."""
    if not recording():
        yield trace.INVALID_SPAN
        return
    parent = propagate.extract(headers)
    with tracer().start_as_current_span(
        f"{method} {route}",
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"http.request.method": method, "http.route": route},
    ) as current:
        yield current


def configure_tracing(env: Mapping[str, str], service_name: str) -> Any | None:
    """Install the SDK's tracer provider as `OTEL_TRACES_EXPORTER` asks; returns it, or None (no-op)."""
    names = [name.strip() for name in env.get(EXPORTER_ENV, "").split(",") if name.strip()]
    names = [name for name in names if name != "none"]
    if not names:
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        log.warning(
            "tracing.unavailable",
            env_var=EXPORTER_ENV,
            message="the OpenTelemetry SDK is not installed: pip install 'switchboard[otel]'; tracing is off",
        )
        return None
    named = bool(env.get(SERVICE_NAME_ENV))
    resource = Resource.create() if named else Resource.create({"service.name": service_name})
    provider = TracerProvider(resource=resource)
    for name in names:
        if name == "console":
            provider.add_span_processor(SimpleSpanProcessor(_console_exporter()))
        elif name == "otlp":
            exporter = _otlp_exporter()
            if exporter is not None:
                provider.add_span_processor(BatchSpanProcessor(exporter))
        else:
            log.warning(
                "tracing.unknown_exporter", env_var=EXPORTER_ENV, exporter=name, known="console, otlp"
            )
    trace.set_tracer_provider(provider)
    log.info("tracing.enabled", exporters=names)
    return provider


def _console_exporter() -> Any:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    def one_line(finished: ReadableSpan) -> str:
        return str(finished.to_json(indent=None)) + "\n"

    return ConsoleSpanExporter(out=sys.stderr, formatter=one_line)


def _otlp_exporter() -> Any | None:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning(
            "tracing.unavailable",
            exporter="otlp",
            message="the OTLP exporter is not installed: pip install 'switchboard[otel]'",
        )
        return None
    return OTLPSpanExporter()
