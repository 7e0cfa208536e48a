"""Tools an agent can call: what the model sees (a ToolSpec) and the code that answers (a handler).

An agent carries static `tools` and, for tools that need the run's context (the bound repo, the
message), a `toolset` factory called once per run with a ToolContext.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.agent.providers.base import ToolSpec
from app.incoming import IncomingMessage

ToolHandler = Callable[[Mapping[str, Any]], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Tool:
    spec: ToolSpec
    handler: ToolHandler

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a per-run toolset may close over."""

    message: IncomingMessage
    run_id: str
    repo: str | None


Toolset = Callable[[ToolContext], Sequence[Tool]]


def tool(name: str, description: str, input_schema: Mapping[str, Any], handler: ToolHandler) -> Tool:
    return Tool(ToolSpec(name=name, description=description, input_schema=input_schema), handler)
