"""The agent loop: model turn → tool calls → tool results → … until a final answer or the turn budget.

The loop is a stream of run events; everything else (the tool-call count the reflection gate reads, the
token usage, a live view) is derived from that stream. A tool that raises becomes an error result the
model sees; a provider failure propagates as ProviderError for the dispatcher to turn into a ⚠️ reply.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import structlog

from app.agent.providers.base import (
    CompletionRequest,
    Message,
    Provider,
    ToolCall,
    ToolResult,
    Usage,
)
from app.agent.tools import Tool
from ops.tracing import span

log = structlog.get_logger("runner")

DEFAULT_MAX_TURNS = 16
DEFAULT_MAX_TOKENS = 4096
MAX_TOOL_RESULT_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class ModelTurn:
    turn: int
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    stop_reason: str | None
    kind: Literal["model_turn"] = "model_turn"


@dataclass(frozen=True, slots=True)
class ToolCalled:
    turn: int
    call: ToolCall
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolReturned:
    turn: int
    call: ToolCall
    result: ToolResult
    seconds: float
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class Final:
    text: str
    turns: int
    usage: Usage
    reason: Literal["answer", "turn_budget"]
    kind: Literal["final"] = "final"


RunEvent = ModelTurn | ToolCalled | ToolReturned | Final


def count_tool_calls(events: Iterable[RunEvent]) -> int:
    return sum(1 for event in events if isinstance(event, ToolCalled))


def total_usage(events: Iterable[RunEvent]) -> Usage:
    total = Usage()
    for event in events:
        if isinstance(event, ModelTurn):
            total = total + event.usage
    return total


@dataclass(frozen=True, slots=True)
class RunResult:
    answer: str
    events: tuple[RunEvent, ...]
    messages: tuple[Message, ...] = field(default=())

    @property
    def tool_call_count(self) -> int:
        return count_tool_calls(self.events)

    @property
    def usage(self) -> Usage:
        return total_usage(self.events)

    @property
    def turns(self) -> int:
        return sum(1 for event in self.events if isinstance(event, ModelTurn))

    @property
    def stopped(self) -> Literal["answer", "turn_budget"]:
        final = self.events[-1]
        return final.reason if isinstance(final, Final) else "answer"


async def stream_run(
    provider: Provider,
    *,
    model: str,
    system: str,
    messages: Sequence[Message],
    tools: Sequence[Tool] = (),
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_turns: int = DEFAULT_MAX_TURNS,
    transcript: list[Message] | None = None,
) -> AsyncIterator[RunEvent]:
    """Yield the run's events; the last one is always a Final. `transcript` collects the exchange."""
    conversation = list(messages)
    by_name = {t.name: t for t in tools}
    specs = tuple(t.spec for t in tools)
    usage = Usage()
    last_text = ""
    for turn in range(1, max_turns + 1):
        request = CompletionRequest(
            model=model, system=system, messages=tuple(conversation), tools=specs, max_tokens=max_tokens
        )
        completion = await provider.complete(request)
        usage = usage + completion.usage
        last_text = completion.text or last_text
        yield ModelTurn(
            turn, completion.text, completion.tool_calls, completion.usage, completion.stop_reason
        )
        conversation.append(Message("assistant", completion.text, tool_calls=completion.tool_calls))
        if not completion.tool_calls:
            _keep(transcript, conversation)
            yield Final(completion.text, turn, usage, "answer")
            return
        for call in completion.tool_calls:
            yield ToolCalled(turn, call)
        started = time.monotonic()
        results = await asyncio.gather(*(_call_tool(by_name, call) for call in completion.tool_calls))
        seconds = time.monotonic() - started
        for call, result in zip(completion.tool_calls, results, strict=True):
            yield ToolReturned(turn, call, result, seconds)
        conversation.append(Message("user", tool_results=tuple(results)))
    _keep(transcript, conversation)
    note = f"(I stopped after {max_turns} model turns without finishing; ask me to continue.)"
    yield Final(f"{last_text}\n\n{note}" if last_text else note, max_turns, usage, "turn_budget")


async def run_agent(
    provider: Provider,
    *,
    model: str,
    system: str,
    messages: Sequence[Message],
    tools: Sequence[Tool] = (),
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_turns: int = DEFAULT_MAX_TURNS,
    on_event: Callable[[RunEvent], None] | None = None,
) -> RunResult:
    """Run the loop to its end; `on_event` sees every event as it happens (it must not raise)."""
    events: list[RunEvent] = []
    transcript: list[Message] = []
    stream = stream_run(
        provider,
        model=model,
        system=system,
        messages=messages,
        tools=tools,
        max_tokens=max_tokens,
        max_turns=max_turns,
        transcript=transcript,
    )
    async for event in stream:
        events.append(event)
        if on_event is not None:
            try:
                on_event(event)
            except Exception as error:  # an observer never breaks a run
                log.warning("runner.observer_failed", error=type(error).__name__)
    final = events[-1]
    answer = final.text if isinstance(final, Final) else ""
    return RunResult(answer=answer, events=tuple(events), messages=tuple(transcript))


async def _call_tool(tools: dict[str, Tool], call: ToolCall) -> ToolResult:
    """One tool call under a `tool.call` span: its name and outcome, never its arguments or result.

    The model chooses the name and the call id, so a poisoned transcript could put any text there: the
    span gets the name only when it is one of the run's tools ("unknown" otherwise), and no id.
    """
    name = call.name if call.name in tools else "unknown"
    with span("tool.call", {"gen_ai.tool.name": name}) as call_span:
        result = await _run_tool(tools, call)
        call_span.set_attribute("switchboard.tool.error", result.is_error)
        return result


async def _run_tool(tools: dict[str, Tool], call: ToolCall) -> ToolResult:
    found = tools.get(call.name)
    if found is None:
        known = ", ".join(sorted(tools)) or "none"
        return ToolResult(call.id, f"error: no tool named {call.name!r} (available: {known})", is_error=True)
    try:
        content = await found.handler(call.arguments)
    except Exception as error:
        log.info("runner.tool_failed", tool=call.name, error=type(error).__name__)
        return ToolResult(call.id, f"error: {type(error).__name__}: {error}", is_error=True)
    if not isinstance(content, str):
        content = str(content)
    if len(content) > MAX_TOOL_RESULT_CHARS:
        cut = len(content) - MAX_TOOL_RESULT_CHARS
        content = content[:MAX_TOOL_RESULT_CHARS] + f"\n…[{cut} more characters cut]"
    return ToolResult(call.id, content)


def _keep(transcript: list[Message] | None, conversation: list[Message]) -> None:
    if transcript is not None:
        transcript[:] = conversation
