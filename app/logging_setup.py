"""structlog configuration for the process entry points (serve, chat, memory-service).

One event per action, ids and counts only — never record text or secrets. Logs go to stderr so a
terminal surface keeps stdout for answers.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(level: str = "info", *, json: bool | None = None, stream: TextIO | None = None) -> None:
    """JSON lines when not on a terminal (or `json=True`), a readable console format otherwise."""
    out = stream if stream is not None else sys.stderr
    as_json = json if json is not None else not out.isatty()
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if as_json:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS.get(level.lower(), logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    # The SDKs log through the standard library; keep them at warning on the same stream.
    logging.basicConfig(stream=out, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
