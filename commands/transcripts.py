"""The terminal person's saved chat threads (`<data_dir>/chat/<thread>.json`): where they live, and
their erasure when that person is erased.

`switchboard chat` speaks as `user:cli:local` and nobody else (besides the bot), so every thread there is
theirs: erasing the person deletes the whole files (and any half-written temporary one).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol

import structlog

from memory.rules.person import TERMINAL_PERSON

log = structlog.get_logger("memory")

CHAT_DIRECTORY = "chat"


def chat_directory(data_dir: str | Path) -> Path:
    return Path(data_dir) / CHAT_DIRECTORY


def thread_path(directory: Path, thread: str) -> Path:
    return directory / f"{thread}.json"


def temporary_path(path: Path) -> Path:
    """Where a thread is written before it replaces the old file (so a crash never leaves half a file)."""
    return path.with_name(f".{path.name}.tmp")


class Transcripts(Protocol):
    """A person's saved conversations outside the memory store."""

    async def erase(self, person_key: str) -> int:
        """Delete every transcript of this person; how many."""
        ...


class ChatTranscripts:
    """The terminal's threads under one data directory."""

    def __init__(self, data_dir: str | Path) -> None:
        self.directory = chat_directory(data_dir)

    async def erase(self, person_key: str) -> int:
        if person_key != TERMINAL_PERSON:
            return 0
        erased = await asyncio.to_thread(self._erase)
        log.info("memory.transcripts_erased", person=person_key, erased=erased)
        return erased

    def _erase(self) -> int:
        if not self.directory.is_dir():
            return 0
        erased = 0
        for path in sorted(self.directory.glob("*.json")):
            path.unlink(missing_ok=True)
            erased += 1
        for path in self.directory.glob(".*.json.tmp"):
            path.unlink(missing_ok=True)
        return erased
