"""Tracing's switch: off (the API's no-op) unless OTEL_TRACES_EXPORTER names an exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ops.tracing import configure_tracing
from tests.memory.service_support import ROOT

SCRIPT = """
from ops.tracing import configure_tracing, span
configure_tracing(__import__("os").environ, "switchboard-test")
with span("hello", {"count": 3}):
    pass
"""


def run_traced(env: dict[str, str]) -> list[dict[str, object]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={**base, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]


def test_without_an_exporter_tracing_stays_off_and_no_span_is_started() -> None:
    assert configure_tracing({}, "switchboard") is None
    assert configure_tracing({"OTEL_TRACES_EXPORTER": "none"}, "switchboard") is None
    script = (
        "from opentelemetry import trace\n"
        "from ops.tracing import configure_tracing, span\n"
        "configure_tracing({}, 'switchboard')\n"
        "with span('hello') as current:\n"
        "    print(current is trace.INVALID_SPAN, trace.get_current_span() is trace.INVALID_SPAN)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["True", "True"]


def test_the_console_exporter_writes_one_json_span_per_line_on_stderr() -> None:
    [hello] = run_traced({"OTEL_TRACES_EXPORTER": "console"})
    assert hello["name"] == "hello"
    assert hello["attributes"] == {"count": 3}
    assert hello["resource"]["attributes"]["service.name"] == "switchboard-test"  # type: ignore[index]


def test_otel_service_name_wins_over_the_process_default() -> None:
    [hello] = run_traced({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "bot-eu-1"})
    assert hello["resource"]["attributes"]["service.name"] == "bot-eu-1"  # type: ignore[index]
