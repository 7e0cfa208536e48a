"""Shared pieces for the runtime tests: settings pointed at the fake model server, a recording surface."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.incoming import ChannelVisibility, HistoryTurn, IncomingMessage
from config.settings import Settings
from tests.fakes.model_server import FakeModelServer

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_REF = "anthropic/test-model"


def settings_for(fake: FakeModelServer, **overrides: Any) -> Settings:
    """Every agent on the fake Anthropic server, no SDK retries; `overrides` are top-level sections."""
    data: dict[str, Any] = {
        "model": MODEL_REF,
        "models": {"anthropic": {"base_url": fake.base_url, "max_retries": 0}},
        "secrets": {"anthropic_api_key": "test-key"},
    }
    data.update(overrides)
    return Settings.model_validate(data)


class RecordingSurface:
    def __init__(self, *, fail_reply: bool = False) -> None:
        self.statuses: list[str] = []
        self.replies: list[str] = []
        self._fail_reply = fail_reply

    async def set_status(self, text: str) -> None:
        self.statuses.append(text)

    async def send_reply(self, text: str) -> None:
        if self._fail_reply:
            raise ConnectionError("surface down")
        self.replies.append(text)


def message(
    text: str,
    *,
    user: str | None = "slack:U1",
    channel: str | None = "slack:C1",
    history: tuple[tuple[str, str], ...] = (),
    thread: str = "slack:C1:1700000000.000100",
    visibility: ChannelVisibility | None = "public",
) -> IncomingMessage:
    return IncomingMessage(
        text=text,
        thread_key=thread,
        surface="slack",
        user_id=user,
        channel_id=channel,
        channel_visibility=visibility,
        history=tuple(HistoryTurn(role, body) for role, body in history),  # type: ignore[arg-type]
    )


def subprocess_env(extra: Mapping[str, str]) -> dict[str, str]:
    """A hermetic environment for `python -m app …`: no inherited keys, base URLs or config."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONUNBUFFERED": "1",
        "HOME": str(extra.get("HOME", "/nonexistent")),
        "LANG": "C.UTF-8",
    }
    env.update(extra)
    return env


def app_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "app", *args]
