"""Process logging: structlog events and the SDKs' standard-library records share one format."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from ops.log_setup import configure_logging


def test_sdk_log_records_and_our_events_come_out_in_one_format() -> None:
    out = io.StringIO()
    configure_logging("info", json=True, stream=out)
    try:
        structlog.get_logger("slack").warning("slack.socket_retry", attempt=1)
        logging.getLogger("slack_sdk.socket_mode").warning("Failed to connect")
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
    finally:
        structlog.reset_defaults()
        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "_switchboard", False)]:
            root.removeHandler(handler)

    assert [(line["event"], line["level"]) for line in lines] == [
        ("slack.socket_retry", "warning"),
        ("Failed to connect", "warning"),
    ]
    assert all("timestamp" in line for line in lines)


def test_off_writes_nothing_from_our_events_or_the_sdks() -> None:
    out = io.StringIO()
    configure_logging("off", json=False, stream=out)
    structlog.get_logger("chat").critical("chat.broken", attempt=1)
    structlog.get_logger("chat").warning("chat.slow")
    logging.getLogger("httpx").error("connection refused")
    assert out.getvalue() == ""


def test_the_console_format_is_one_line_per_event_for_both_sources() -> None:
    out = io.StringIO()
    configure_logging("info", json=False, stream=out)
    structlog.get_logger("chat").info("chat.turn", run_id="r1")
    logging.getLogger("anthropic").warning("Retrying request")
    first, second = out.getvalue().splitlines()
    assert "[info     ] chat.turn" in first and "run_id=r1" in first
    assert "[warning  ] Retrying request" in second


@pytest.mark.parametrize("level", ["loud", "", "verbose"])
def test_an_unknown_level_is_refused_naming_the_choices(level: str) -> None:
    with pytest.raises(ValueError, match=r"is not one of debug\|info\|warning\|error\|off"):
        configure_logging(level, stream=io.StringIO())
