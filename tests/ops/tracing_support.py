"""The SDK's in-memory exporter behind the process's tracer provider, for tests that assert spans.

OpenTelemetry allows one global provider per process, so the first test that asks installs it and
every later one gets the same exporter, emptied.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_installed: list[InMemorySpanExporter] = []


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    if not _installed:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _installed.append(exporter)
    exporter = _installed[0]
    exporter.clear()
    yield exporter
    exporter.clear()


def span_id(span: ReadableSpan) -> str:
    """The span's id as the console exporter writes it (`0x` + 16 hex digits)."""
    assert span.context is not None
    return f"0x{span.context.span_id:016x}"


def trace_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"0x{span.context.trace_id:032x}"


def parent_id(span: ReadableSpan) -> str | None:
    return f"0x{span.parent.span_id:016x}" if span.parent is not None else None
