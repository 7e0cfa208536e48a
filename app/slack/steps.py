"""Thinking steps in a streamed Slack answer: `task_update` chunks (and a `plan_update` for a plan)
sent with `chat.startStream` / `chat.appendStream` as the run goes, before the answer's text.

The first step starts the stream; the answer's Markdown then goes into that same message. Steps are
sent in order by one background sender, so a tool call's step never waits on Slack; the steps shown
while a call is under way go out together in the next. Where steps cannot
be shown — the installed slack_sdk has no chunk models, or Slack refuses a chunk (an old workspace:
`invalid_arguments`, `invalid_chunks`, an unknown chunk type) — steps stop quietly and the answer
goes out as it would without them: the status line, then the text.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import structlog

from app.slack.format import defuse_mentions
from app.steps import Step, StepSource
from commands.provenance import Permalinks, source_link

log = structlog.get_logger("slack")

# The SDK's chunk models (slack_sdk ≥ 3.40); without them no chunk is ever sent.
CHUNK_MODULE = "slack_sdk.models.messages.chunk"
ELEMENTS_MODULE = "slack_sdk.models.blocks.block_elements"
MAX_SOURCES = 10
# Slack documents no cap on the chunks of one call; a call carries at most this many task updates.
MAX_CHUNKS_PER_CALL = 20


def chunk_models() -> tuple[ModuleType, ModuleType] | None:
    """The SDK's chunk and source-element models, or None where this slack_sdk has none."""
    try:
        chunks = importlib.import_module(CHUNK_MODULE)
        elements = importlib.import_module(ELEMENTS_MODULE)
    except ImportError:
        return None
    if not hasattr(chunks, "TaskUpdateChunk") or not hasattr(elements, "UrlSourceElement"):
        return None
    return chunks, elements


class StepStream:
    """The steps of one answer and the stream they opened (handed to the answer's text)."""

    def __init__(
        self,
        open_stream: Any,  # () -> awaitable AsyncChatStream, given the display mode
        *,
        channel: str,
        permalinks: Permalinks | None,
        enabled: bool,
        named: frozenset[str] = frozenset(),
    ) -> None:
        self._open_stream = open_stream
        # A card is addressed to nobody: it keeps only the mentions the asker typed (no cap of its own).
        self._named = named
        self._channel = channel
        self._permalinks = permalinks
        self._models = chunk_models() if enabled else None
        self._stream: Any = None
        self._mode: str | None = None
        self._plan_title: str | None = None
        self._queue: list[Step] = []
        self._sender: asyncio.Task[None] | None = None

    @property
    def on(self) -> bool:
        return self._models is not None

    def plan(self, title: str) -> None:
        """Show the steps together in a plan titled `title` (only before the first step)."""
        if self._models is not None and self._stream is None and self._sender is None:
            self._mode, self._plan_title = "plan", title

    def show(self, step: Step) -> None:
        if self._models is None:
            return
        self._queue.append(step)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._drain())

    async def take(self) -> Any:
        """After every step went out: the stream they started, for the answer to continue (None when
        none did). Steps shown later are not sent."""
        if self._sender is not None:
            await self._sender
        self._models = None
        stream, self._stream = self._stream, None
        return stream if stream is not None and stream.ts is not None else None

    async def close(self) -> None:
        """End a stream the steps opened that no answer took over (the run failed on the way)."""
        stream = await self.take()
        if stream is None:
            return
        try:
            await stream.stop()
        except Exception as error:
            log.info("slack.steps_close_failed", channel=self._channel, error=type(error).__name__)

    async def _drain(self) -> None:
        """Sends what waits, in order, one call at a time: the steps shown while a call was under way
        go out together in the next (each task once, in its latest state), so a run of many tool
        calls costs Slack a few calls, not two per tool."""
        while self._queue and self._models is not None:
            batch, self._queue = self._queue[:MAX_CHUNKS_PER_CALL], self._queue[MAX_CHUNKS_PER_CALL:]
            latest: dict[str, Step] = {}
            for step in batch:
                latest[step.id] = step  # a task keeps its first place and takes its latest state
            await self._send(list(latest.values()))
        self._queue.clear()

    async def _send(self, steps: Sequence[Step]) -> None:
        assert self._models is not None
        try:
            chunks = [await self._task_chunk(step) for step in steps]
            if self._stream is None:
                self._stream = await self._open_stream(self._mode)
                if self._plan_title:
                    chunks.insert(0, self._models[0].PlanUpdateChunk(title=self._plan_title))
            await self._stream.append(chunks=chunks)
        except Exception as error:  # steps are a courtesy: the answer goes out without them
            self._models = None
            if self._stream is not None and self._stream.ts is None:
                self._stream = None  # never started: the answer streams as it would have
            log.info("slack.steps_refused", channel=self._channel, error=_code(error))

    async def _task_chunk(self, step: Step) -> Any:
        assert self._models is not None
        chunks, elements = self._models
        sources = await self._sources(step.sources, elements)
        return chunks.TaskUpdateChunk(
            id=step.id,
            title=defuse_mentions(step.title, self._named, cap=0),
            status=step.status,
            output=defuse_mentions(step.output, self._named, cap=0) if step.output else step.output,
            sources=sources or None,
        )

    async def _sources(self, sources: Sequence[StepSource], elements: ModuleType) -> list[Any]:
        """Each source thread as a url element: its permalink, as the *Why?* answer links it."""
        wanted = list(sources)[:MAX_SOURCES]
        links = await asyncio.gather(*(source_link(self._permalinks, s.thread_key) for s in wanted))
        return [
            elements.UrlSourceElement(url=link, text=source.label)
            for source, link in zip(wanted, links, strict=True)
            if link
        ]


def _code(error: BaseException) -> str:
    response = getattr(error, "response", None)
    try:
        return str(response.get("error")) if response is not None else type(error).__name__
    except AttributeError:
        return type(error).__name__
