"""One `complete(request)` shape that every model provider speaks, the agent loop and reflection alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: a name, what it does, and a JSON schema for its input."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Message:
    """A provider-neutral conversation message.

    A user message carries `text` (or `tool_results` answering the previous assistant turn); an
    assistant message carries `text` and/or `tool_calls`.
    """

    role: Literal["user", "assistant"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None


class ProviderError(RuntimeError):
    """A model call failed (status, transport, refusal); the dispatcher turns it into a ⚠️ reply."""

    def __init__(self, message: str, *, status: int | None = None, provider: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.provider = provider


class Provider(Protocol):
    async def complete(self, request: CompletionRequest) -> Completion: ...
