"""What the dispatcher needs from a surface (Slack, the terminal): show progress, deliver the answer."""

from __future__ import annotations

from typing import Protocol


class Surface(Protocol):
    async def set_status(self, text: str) -> None:
        """A visible sign that the agent is working (may be a no-op)."""
        ...

    async def send_reply(self, text: str) -> None:
        """Deliver the final answer (Markdown); a surface may stream or split it."""
        ...
