"""One Slack thread as the dispatcher's Surface: a visible status while the agent works, the run's
thinking steps (app/slack/steps.py), the answer streamed into the thread (a plain message where
streaming is refused), long answers split."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from app.slack.feedback import feedback_block
from app.slack.format import (
    POST_TEXT_LIMIT,
    STREAM_TEXT_LIMIT,
    defuse_mentions,
    markdown_to_mrkdwn,
    split_message,
)
from app.slack.provenance import citation_block
from app.slack.steps import StepStream
from app.steps import Step
from commands.provenance import Permalinks

log = structlog.get_logger("slack")

DEFAULT_LOADING_MESSAGES = (
    "Reading the thread…",
    "Thinking it through…",
    "Checking what I know…",
    "Writing the answer…",
)
# How much Markdown the SDK's chat stream buffers before each chat.appendStream call.
STREAM_BUFFER = 600
# Slack's cap on a section block's text.
SECTION_TEXT_LIMIT = 3000
# The reaction shown on the person's message when the assistant thread status is not available.
WORKING_REACTION = "hourglass_flowing_sand"
# How a stream call fails: Slack's refusal (a 429 past the retries too), or no answer in time / no
# connection, which the SDK raises as they come. A started stream is then finished by chat.update.
STREAM_ERRORS = (SlackClientError, TimeoutError, aiohttp.ClientError)


@dataclass(frozen=True, slots=True)
class ReplyOptions:
    """How replies look and travel; from the `slack` settings."""

    stream: bool = True
    loading_messages: tuple[str, ...] = DEFAULT_LOADING_MESSAGES
    working_reaction: str = WORKING_REACTION
    thinking_steps: bool = True  # the memory read and tool calls as task cards in the streamed answer


@dataclass(slots=True)
class _State:
    status_mode: str | None = None  # "assistant" | "reaction" | "off"
    stream_refused: bool = False
    replies: int = 0
    reply_ts: list[str] = field(default_factory=list)
    run_id: str | None = None  # the run being answered: its answer carries the feedback buttons
    cited: int = 0  # memory records the run read: the citation line under the answer


RunListener = Callable[[str, tuple[str, ...]], None]


class SlackThreadSurface:
    """Replies into one thread (`thread_ts`) of one conversation, on behalf of one person's message.

    Status: `assistant.threads.setStatus` with rotating loading messages; when Slack refuses it (not an
    assistant-enabled app, an old workspace) a reaction on the person's message instead. Replies: the
    streaming API (`chat.startStream` / `appendStream` / `stopStream`, which render Markdown) and, when
    that is refused, `chat.postMessage` with the answer converted to mrkdwn and split under the limit.
    """

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        channel: str,
        thread_ts: str,
        message_ts: str,
        team_id: str | None,
        user_id: str | None,
        options: ReplyOptions = ReplyOptions(),
        on_run: RunListener | None = None,
        on_posted: Callable[[str, str], None] | None = None,
        permalinks: Permalinks | None = None,
        named: frozenset[str] = frozenset(),
    ) -> None:
        self._client = client
        # The people the answer may always notify: the asker and those their message mentions.
        self._named = named | ({user_id} if user_id else frozenset())
        self._on_run = on_run
        self._on_posted = on_posted  # (ts, text) of each message posted: the thread cache keeps it
        self.channel = channel
        self.thread_ts = thread_ts
        self.message_ts = message_ts
        self._team_id = team_id
        self._user_id = user_id
        self._options = options
        self._state = _State()
        self._steps = StepStream(
            self._open_stream,
            channel=channel,
            permalinks=permalinks,
            enabled=options.stream and options.thinking_steps,
            named=self._named,
        )

    @property
    def replies_sent(self) -> int:
        return self._state.replies

    @property
    def reply_ts(self) -> tuple[str, ...]:
        return tuple(self._state.reply_ts)

    def note_run(self, run_id: str, memory_record_ids: tuple[str, ...]) -> None:
        """The dispatcher says which run the next reply answers (and which records it read)."""
        self._state.run_id = run_id
        self._state.cited = len(memory_record_ids)
        if self._on_run is not None:
            self._on_run(run_id, memory_record_ids)

    def show_step(self, step: Step) -> None:
        """A task card in the answer's stream, sent in order in the background."""
        self._steps.show(step)

    def show_plan(self, title: str) -> None:
        self._steps.plan(title)

    def _closing_blocks(self) -> list[dict[str, Any]]:
        """What goes under the last message of an answer: the feedback buttons of its run."""
        run_id = self._state.run_id
        if not run_id:
            return []
        cited = [citation_block(run_id, self._state.cited)] if self._state.cited else []
        return [*cited, feedback_block(run_id)]

    async def set_status(self, text: str) -> None:
        """Best effort: a status that cannot be shown never stops the answer."""
        state = self._state
        if state.status_mode in (None, "assistant"):
            try:
                await self._client.assistant_threads_setStatus(
                    channel_id=self.channel,
                    thread_ts=self.thread_ts,
                    status=text,
                    loading_messages=list(self._options.loading_messages) or None,
                )
                state.status_mode = "assistant"
                return
            except SlackClientError as error:
                log.info("slack.status_fallback", channel=self.channel, error=_error_code(error))
                if state.status_mode == "assistant":
                    return
        if state.status_mode is None:
            state.status_mode = "off"
            try:
                await self._client.reactions_add(
                    channel=self.channel, timestamp=self.message_ts, name=self._options.working_reaction
                )
                state.status_mode = "reaction"
            except SlackClientError as error:
                if _error_code(error) == "already_reacted":
                    state.status_mode = "reaction"
                else:
                    log.info("slack.status_unavailable", channel=self.channel, error=_error_code(error))

    async def send_reply(self, text: str) -> None:
        """Deliver one answer (Markdown). Raises only when Slack refuses every way of posting it."""
        if not text.strip():
            log.info("slack.reply_empty", channel=self.channel, thread_ts=self.thread_ts)
            return
        text = defuse_mentions(text, self._named)
        opened = await self._steps.take()  # the stream the steps started: the answer goes under them
        if self._options.stream and not self._state.stream_refused:
            parts = split_message(text, STREAM_TEXT_LIMIT)
            for index, part in enumerate(parts):
                stream = opened if index == 0 else None
                if not await self._stream_part(part, last=index == len(parts) - 1, stream=stream):
                    await self._post_markdown("\n\n".join(parts[index:]), closing=True)
                    return
            return
        await self._post_markdown(text, closing=True)

    async def post_notice(self, text: str) -> None:
        """A short plain message (a ⚠️ line, a hint): never streamed, always mrkdwn."""
        await self._post_markdown(text)

    async def finish(self) -> None:
        """Take the status down: remove the reaction; clear an assistant status nobody replaced."""
        await self._steps.close()
        mode = self._state.status_mode
        try:
            if mode == "reaction":
                await self._client.reactions_remove(
                    channel=self.channel, timestamp=self.message_ts, name=self._options.working_reaction
                )
            elif mode == "assistant" and self._state.replies == 0:
                await self._client.assistant_threads_setStatus(
                    channel_id=self.channel, thread_ts=self.thread_ts, status=""
                )
        except SlackClientError as error:
            log.info("slack.status_clear_failed", channel=self.channel, error=_error_code(error))

    async def _open_stream(self, display_mode: str | None = None) -> Any:
        """The SDK's chat stream (nothing is sent before its first flush); `display_mode` is how its
        task cards show ("plan" or Slack's default timeline)."""
        extra = {"task_display_mode": display_mode} if display_mode else {}
        return await self._client.chat_stream(
            channel=self.channel,
            thread_ts=self.thread_ts,
            recipient_team_id=self._team_id,
            recipient_user_id=self._user_id,
            buffer_size=STREAM_BUFFER,
            **extra,
        )

    async def _stream_part(self, markdown: str, *, last: bool = False, stream: Any = None) -> bool:
        """Stream one message's worth of Markdown (into `stream` when the steps opened one); False
        when Slack refused to start a stream."""
        if stream is None:
            stream = await self._open_stream()
        try:
            for piece in _stream_pieces(markdown):
                await stream.append(markdown_text=piece)
            closing = self._closing_blocks() if last else []
            await stream.stop(blocks=closing or None)
        except STREAM_ERRORS as error:
            if stream.ts is None:
                self._state.stream_refused = True
                log.info("slack.stream_refused", channel=self.channel, error=_error_code(error))
                return False
            # The stream started and broke mid-way: put the whole part into that message, with the
            # feedback and Why? buttons the stream's stop would have carried.
            log.warning("slack.stream_broken", channel=self.channel, ts=stream.ts, error=_error_code(error))
            await self._replace_message(stream.ts, markdown, closing=self._closing_blocks() if last else [])
            return True
        self._record_reply(stream.ts, markdown)
        return True

    async def _replace_message(self, ts: str, markdown: str, *, closing: list[dict[str, Any]]) -> None:
        """The broken stream's message rewritten whole; `closing` (the buttons) goes under the last
        message of the part, whether that is the updated one or one posted after it."""
        pieces = split_message(markdown_to_mrkdwn(markdown), POST_TEXT_LIMIT)
        blocks = _answer_blocks(pieces[0], closing) if closing and len(pieces) == 1 else None
        try:
            await self._client.chat_update(channel=self.channel, ts=ts, text=pieces[0], blocks=blocks)
        except SlackClientError as error:
            log.warning("slack.update_failed", channel=self.channel, ts=ts, error=_error_code(error))
            await self._post_pieces(pieces, closing=closing)
            return
        self._record_reply(ts, pieces[0])
        await self._post_pieces(pieces[1:], closing=closing)

    async def _post_markdown(self, markdown: str, *, closing: bool = False) -> None:
        pieces = split_message(markdown_to_mrkdwn(markdown), POST_TEXT_LIMIT)
        await self._post_pieces(pieces, closing=self._closing_blocks() if closing else [])

    async def _post_pieces(self, pieces: list[str], *, closing: list[dict[str, Any]] | None = None) -> None:
        for index, piece in enumerate(pieces):
            extra: dict[str, Any] = {}
            if closing and index == len(pieces) - 1:
                extra["blocks"] = _answer_blocks(piece, closing)
            response = await self._client.chat_postMessage(
                channel=self.channel, thread_ts=self.thread_ts, text=piece, unfurl_links=False, **extra
            )
            self._record_reply(_ts_of(response), piece)

    def _record_reply(self, ts: str | None, text: str) -> None:
        self._state.replies += 1
        if ts:
            self._state.reply_ts.append(ts)
            if self._on_posted is not None:
                self._on_posted(ts, text)


def _answer_blocks(text: str, closing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message's text as sections with the buttons under them (a message with blocks shows
    the blocks, not its `text`)."""
    return [*(_mrkdwn_section(part) for part in split_message(text, SECTION_TEXT_LIMIT)), *closing]


def _mrkdwn_section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _stream_pieces(markdown: str) -> list[str]:
    """Line-sized pieces, so the stream grows the way a person reads it."""
    pieces = [line + "\n" for line in markdown.split("\n")]
    pieces[-1] = pieces[-1][:-1]  # the text's own end has no line break
    return [piece for piece in pieces if piece]


def _ts_of(response: Any) -> str | None:
    try:
        ts = response.get("ts")
    except AttributeError:
        return None
    return str(ts) if ts else None


def _error_code(error: BaseException) -> str:
    if isinstance(error, SlackApiError):
        try:
            return str(error.response.get("error") or type(error).__name__)
        except AttributeError:
            return type(error).__name__
    return type(error).__name__
