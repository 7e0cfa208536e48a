"""structlog configuration for the bot's entry points (serve, chat, memory …): one place, one format.

One event per action, ids and counts only — never record text or secrets. Logs go to stderr so a
terminal surface keeps stdout for answers. The terminal commands log nothing unless asked
(`--verbose`, `--log-level`, `SWITCHBOARD_LOG_LEVEL`): their replies already say what happened.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog
from structlog.types import EventDict

OFF = logging.CRITICAL + 1
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "off": OFF,
}
LEVEL_NAMES = "|".join(LEVELS)


def log_level(name: str) -> int:
    """The level a name means; an unknown name is an error naming the choices, never a default."""
    level = LEVELS.get(name.strip().lower())
    if level is None:
        raise ValueError(f"log level {name!r} is not one of {LEVEL_NAMES}")
    return level


def configure_logging(level: str = "info", *, json: bool | None = None, stream: TextIO | None = None) -> None:
    """JSON lines when not on a terminal (or `json=True`), a readable console format otherwise
    (`json=False` always). Raises ValueError for a level that is not in LEVELS."""
    minimum = log_level(level)
    out = stream if stream is not None else sys.stderr
    as_json = json if json is not None else not out.isatty()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    )
    tail: list[Any] = [structlog.processors.format_exc_info, renderer] if as_json else [renderer]
    silence: list[Any] = [_drop] if minimum >= OFF else []
    structlog.configure(
        processors=[*silence, *shared, *tail],
        wrapper_class=structlog.make_filtering_bound_logger(min(minimum, logging.CRITICAL)),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    # The SDKs log through the standard library: the same renderer on the same stream, at warning
    # (or above, when that is asked), so every line on stderr has one format (each a single write,
    # never split by an answer's lines).
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_switchboard", False)]:
        root.removeHandler(old)
    handler._switchboard = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(max(logging.WARNING, minimum))


def _drop(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """`off`: not even a critical event is written."""
    raise structlog.DropEvent
