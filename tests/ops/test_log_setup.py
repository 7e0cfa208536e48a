"""Process logging: structlog events and the SDKs' standard-library records share one format."""

from __future__ import annotations

import io
import json
import logging

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
