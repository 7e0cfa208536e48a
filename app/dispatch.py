"""The dispatcher: the one path from "a message arrived" to "the answer was sent".

    request context (reader, scopes) ─► command fast path ─► agent selection ─►
    run context: repo resolution (task) ─► the scopes with the repo's (task) ─┐
                 └► memory read (starts now, takes the run context) ─────────┴►
    block folded onto the front of the system prompt ─► agent loop ─► surface.send_reply ─►
    post-run steps ─► active-run slot released (outer finally)

Memory off (the default) means no read at all: the provider request is byte-identical to a dispatcher
built with no memory objects. A model or tool-loop failure becomes a ⚠️ reply, never silence.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from app.agent.agents import Agent, AgentRegistry, Selection, missing_model_message
from app.agent.providers.base import Message, Provider, ProviderError, Usage
from app.agent.providers.registry import ProviderRegistry
from app.agent.runner import RunEvent, RunResult, run_agent
from app.agent.tools import ToolContext
from app.incoming import IncomingMessage, message_time
from app.run_context import RequestContext, RunContext, request_context, start_run
from app.run_memory import audit_read, read_for_run
from app.steps import plan_title, recall_step, show_plan, show_step, step_observer
from app.surface import Surface
from commands.registry import Caller, CommandHandler
from config.settings import ConfigError, Settings
from memory.context import MemoryRead
from memory.rules.redact import redact_secrets
from memory.rules.scope import RequestScopes
from memory.rules.visibility import Reader
from memory.stores.contract import MemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import Origin
from ops.metrics import Metrics
from ops.tracing import annotate, span

log = structlog.get_logger("dispatch")

CLOSED_REPLY = "⚠️ I'm restarting right now — please send that again in a minute."
MODEL_FAILED_REPLY = "⚠️ The model call failed ({detail}). Please try again."
EMPTY_ANSWER_REPLY = "⚠️ The model returned an empty answer. Please try again."
INTERNAL_ERROR_REPLY = "⚠️ Something went wrong while answering ({detail}). Please try again."
COMMAND_FAILED_REPLY = "⚠️ That command failed ({detail})."
NO_REPO_REPLY = (
    "The {agent} agent works on a GitHub repository, and I couldn't tell which one. "
    "Name it in your message (`--repo owner/name` or a GitHub URL), or configure a default repo for this "
    "channel."
)


class RepoUnavailable(RuntimeError):
    """Raise from a repo resolver when a repo-bound agent cannot run; `str(error)` is the reply sent."""


RepoResolver = Callable[[IncomingMessage, Agent | None], Awaitable[str | None]]


CallerFactory = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class CompletedRun:
    """Everything a post-run step (reflection, a review post, a live view) needs about a finished run."""

    message: IncomingMessage
    agent: str
    model_ref: str
    repo: str | None
    scopes: RequestScopes | None
    run_id: str
    tool_calls: int
    history_turns: int
    request_text: str
    answer: str
    usage: Usage
    events: tuple[RunEvent, ...]
    memory_records: int = 0
    # The (origin, conversation) labels of the memory block's records: what the run was shown.
    memory_labels: tuple[tuple[Origin, str | None], ...] = ()
    # When the conversation it answered happened (epoch seconds): the message's time, else the run's.
    observed_at: float | None = None
    # Who read the reply (the dispatcher's, built once); None: a step derives it from `message`.
    reader: Reader | None = None


PostRunStep = Callable[[CompletedRun], object]


@dataclass(frozen=True, slots=True)
class AgentRun:
    """What a custom agent runner gets: an agent whose run is not the tool loop (e.g. `review`)."""

    message: IncomingMessage
    agent: Agent
    provider: Provider
    model: str
    system: str  # memory block + instructions + the bound repo, exactly as the tool loop would get it
    text: str  # the request with the agent word removed
    repo: str | None
    run_id: str


AgentRunner = Callable[[AgentRun], Awaitable[RunResult]]

OutcomeStatus = Literal["answered", "command", "refused", "failed", "closed"]


@dataclass(frozen=True, slots=True)
class DispatchOutcome:
    status: OutcomeStatus
    reply: str | None
    run_id: str | None = None
    agent: str | None = None
    completed: CompletedRun | None = None
    receipt: Any = None  # an inline run's audit record (a command that changed state)


@dataclass(frozen=True, slots=True)
class _Run:
    """One agent run once planned: the selection, its run id, and the model that answers."""

    request: RequestContext
    selection: Selection
    run_id: str
    model_ref: str
    provider: Provider
    model: str
    at: float  # the run's time (the dispatcher's clock when it was planned)

    @property
    def message(self) -> IncomingMessage:
        return self.request.message

    @property
    def agent(self) -> Agent:
        return self.selection.agent


def _observed_at(message: IncomingMessage, at: float) -> float:
    sent = message_time(message)
    return at if sent is None else sent


def fold_memory_block(block: str | None, instructions: str) -> str:
    """The block leads the system prompt; without a block the prompt is exactly the instructions."""
    return f"{block}\n\n{instructions}" if block else instructions


def _new_run_id() -> str:
    return f"run_{uuid.uuid4().hex[:16]}"


class Dispatcher:
    """Built once per process with explicit dependencies; `dispatch` is called once per message."""

    def __init__(
        self,
        *,
        settings: Settings,
        providers: ProviderRegistry,
        agents: AgentRegistry,
        memory_store: MemoryStore | None = None,
        commands: CommandHandler | None = None,
        repo_resolver: RepoResolver | None = None,
        post_run: Sequence[PostRunStep] = (),
        make_caller: CallerFactory | None = None,
        new_run_id: Callable[[], str] = _new_run_id,
        agent_runners: Mapping[str, AgentRunner] | None = None,
        clock: Callable[[], float] = time.time,
        metrics: Metrics | None = None,
    ) -> None:
        self._settings = settings
        self._metrics = metrics  # the bot's /metrics: its memory reads
        self._providers = providers
        self._agents = agents
        self._memory_enabled = settings.memory.enabled
        if self._memory_enabled and not settings.organization:
            raise ConfigError(
                "config error: organization is required when memory.enabled = true "
                "(set organization in the config file or SWITCHBOARD_ORGANIZATION)"
            )
        # Memory off → the Null store, and no read is ever attempted.
        self.memory_store: MemoryStore = (
            memory_store if self._memory_enabled and memory_store is not None else NullMemoryStore()
        )
        self._commands = commands
        self._repo_resolver: RepoResolver = repo_resolver or self._channel_repo
        self._post_run: list[PostRunStep] = list(post_run)
        self._make_caller: CallerFactory = make_caller or Caller
        self._new_run_id = new_run_id
        self._agent_runners = dict(agent_runners or {})
        self._clock = clock
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- lifecycle surface --

    @property
    def active_run_count(self) -> int:
        return self._active

    @property
    def pending_task_count(self) -> int:
        return len(self._tasks)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def agents(self) -> AgentRegistry:
        return self._agents

    def add_post_run(self, step: PostRunStep) -> None:
        self._post_run.append(step)

    def track(self, awaitable: Awaitable[Any]) -> asyncio.Task[Any]:
        """Keep a background task (e.g. a post-run job) alive and visible to the shutdown drain."""
        task = asyncio.ensure_future(awaitable)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def close(self) -> None:
        """Stop taking messages; runs in flight go on."""
        self._closed = True

    async def wait_idle(self) -> None:
        """Until no dispatch is active and every tracked task has finished."""
        while True:
            await self._idle.wait()
            if not self._tasks:
                return
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- the flow --

    async def dispatch(self, message: IncomingMessage, surface: Surface) -> DispatchOutcome:
        if self._closed:
            await _send(surface, CLOSED_REPLY)
            return DispatchOutcome("closed", CLOSED_REPLY)
        self._active += 1
        self._idle.clear()
        try:
            with span("dispatch", {"switchboard.surface": message.surface}) as dispatch_span:
                outcome = await self._dispatch(message, surface)
                dispatch_span.set_attribute("switchboard.outcome", outcome.status)
                return outcome
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    async def _dispatch(self, message: IncomingMessage, surface: Surface) -> DispatchOutcome:
        request = request_context(self._settings.organization, message)
        if self._commands is not None:
            handled = await self._command(request, surface)
            if handled is not None:
                return handled
        planned = await self._plan(request, surface)
        if isinstance(planned, DispatchOutcome):
            return planned
        return await self._run(planned, surface)

    # -- steps --

    async def _plan(self, request: RequestContext, surface: Surface) -> _Run | DispatchOutcome:
        """Which agent answers, under which run id, on which model; a missing model fails here."""
        message = request.message
        selection = self._agents.select(message)
        agent = selection.agent
        run_id = self._new_run_id()
        annotate({"switchboard.run_id": run_id, "switchboard.agent": agent.name})
        log.info(
            "dispatch.start",
            run_id=run_id,
            agent=agent.name,
            selected_by=selection.by,
            surface=message.surface,
            history_turns=len(message.history),
        )
        if agent.model_ref is None:
            detail = missing_model_message(agent)
            return await _fail(surface, run_id, agent, f"⚠️ {detail[:1].upper()}{detail[1:]}.")
        try:
            provider, model = self._providers.resolve(agent.model_ref)
        except (ValueError, LookupError, ProviderError) as error:
            return await _fail(surface, run_id, agent, _model_failed(error))
        return _Run(request, selection, run_id, agent.model_ref, provider, model, self._clock())

    async def _run(self, run: _Run, surface: Surface) -> DispatchOutcome:
        """The repo and the memory read start together; the agent runs once both are in."""
        agent = run.agent
        context = start_run(run.request, self._resolve_repo(run.message, agent))
        memory_task = (
            asyncio.create_task(
                read_for_run(
                    self.memory_store, self._settings, context, run.selection.text, run.at, self._metrics
                )
            )
            if self._memory_enabled
            else None
        )
        started = time.monotonic()
        try:
            await _status(surface, "Thinking…")
            repo, refusal = await _bound_repo(context.repo, agent)
            if refusal is not None:
                return await _refuse(surface, run.run_id, agent, refusal)
            await context.scopes  # resolved with the repo: done once here, for the read and the run's record
            show_plan(surface, plan_title(agent, repo, own_runner=agent.name in self._agent_runners))
            read = await memory_task if memory_task is not None else None
            if read is not None:
                self.track(audit_read(self.memory_store, run.run_id, context, read, self._clock))
                show_step(surface, recall_step(read.records))
            result = await self._agent_loop(run, repo, read, surface)
        except ProviderError as error:
            log.warning(
                "dispatch.model_failed", run_id=run.run_id, status=error.status, provider=error.provider
            )
            return await _fail(surface, run.run_id, agent, _model_failed(error))
        except Exception as error:
            log.exception("dispatch.failed", run_id=run.run_id, error=type(error).__name__)
            return await _fail(
                surface, run.run_id, agent, INTERNAL_ERROR_REPLY.format(detail=type(error).__name__)
            )
        finally:
            await _settle(memory_task, *context.tasks())
        return await self._deliver(run, surface, context, repo, read, result, started)

    async def _agent_loop(
        self, run: _Run, repo: str | None, read: MemoryRead | None, surface: Surface
    ) -> RunResult:
        """The agent's own runner when it has one (e.g. `review`), else the tool loop, whose tool calls
        the surface shows as steps."""
        agent = run.agent
        system = fold_memory_block(read.block if read is not None else None, agent.instructions)
        if repo is not None and agent.repo_bound:
            system = f"{system}\n\nThe repository for this run: {repo}"
        custom = self._agent_runners.get(agent.name)
        if custom is not None:
            text = run.selection.text
            return await custom(
                AgentRun(run.message, agent, run.provider, run.model, system, text, repo, run.run_id)
            )
        tools = agent.tools_for(ToolContext(message=run.message, run_id=run.run_id, repo=repo))
        return await run_agent(
            run.provider,
            model=run.model,
            system=system,
            messages=_conversation(run.message, run.selection.text),
            tools=tools,
            max_tokens=agent.max_tokens,
            max_turns=agent.max_turns,
            on_event=step_observer(surface),
        )

    async def _deliver(
        self,
        run: _Run,
        surface: Surface,
        context: RunContext,
        repo: str | None,
        read: MemoryRead | None,
        result: RunResult,
        started: float,
    ) -> DispatchOutcome:
        """The answer goes out, then the post-run steps; an empty answer is a failure."""
        message, run_id, agent = run.message, run.run_id, run.agent
        completed = CompletedRun(
            message=message,
            agent=agent.name,
            model_ref=run.model_ref,
            repo=repo,
            scopes=context.scopes.result(),  # awaited before the agent ran
            run_id=run_id,
            tool_calls=result.tool_call_count,
            history_turns=len(message.history),
            request_text=run.selection.text,
            answer=result.answer,
            usage=result.usage,
            events=result.events,
            memory_records=len(read.records) if read is not None else 0,
            memory_labels=tuple((r.origin, r.origin_conversation) for r in read.records) if read else (),
            observed_at=_observed_at(message, run.at),
            reader=context.reader,
        )
        has_block = read is not None and read.block is not None
        _log_run(completed, result, time.monotonic() - started, has_block)
        if not result.answer.strip():
            return await _fail(surface, run_id, agent, EMPTY_ANSWER_REPLY)
        _note_run(surface, run_id, read)
        if not await _send(surface, result.answer, run_id=run_id):
            return DispatchOutcome("failed", result.answer, run_id, agent.name, completed)
        await _after_reply(self._post_run, completed)
        return DispatchOutcome("answered", result.answer, run_id, agent.name, completed)

    async def _command(self, request: RequestContext, surface: Surface) -> DispatchOutcome | None:
        assert self._commands is not None
        message = request.message
        caller = self._make_caller(
            user_id=message.user_id,
            channel_id=message.channel_id,
            channel_visibility=message.channel_visibility,
            thread_key=message.thread_key,
            surface=message.surface,
            thread_repo=lambda: self._resolve_repo(message, None),
            reader=request.reader,
        )
        try:
            reply = await self._commands.handle(message.text, caller)
        except Exception as error:
            log.exception("dispatch.command_failed", error=type(error).__name__)
            text = COMMAND_FAILED_REPLY.format(detail=type(error).__name__)
            await _send(surface, text)
            return DispatchOutcome("failed", text)
        if reply is None:
            return None
        run_id = None
        if reply.receipt is not None:  # an inline run: it gets a run id and its receipt is recorded
            run_id = self._new_run_id()
            log.info("dispatch.inline_run", run_id=run_id, surface=message.surface, **reply.receipt.as_dict())
        log.info("dispatch.command", surface=message.surface, ok=getattr(reply, "ok", True), run_id=run_id)
        await _send(surface, reply.text, markdown=getattr(reply, "markdown", True))
        return DispatchOutcome("command", reply.text, run_id=run_id, receipt=reply.receipt)

    async def _resolve_repo(self, message: IncomingMessage, agent: Agent | None) -> str | None:
        """The repo of an agent's run, or (no agent) the thread's for a command that asks for it.

        Only a repo-bound agent has a repo: a general run neither reads nor writes `repo:` records,
        and never asks the resolver (which would bind the thread to a repository). A resolver failure
        is no repo; only RepoUnavailable (the resolver's own verdict) refuses a run, and a command
        reads it as no repo."""
        if agent is not None and not agent.repo_bound:
            return None
        try:
            return await self._repo_resolver(message, agent)
        except RepoUnavailable:
            if agent is None:
                return None
            raise
        except Exception as error:
            log.warning("dispatch.repo_failed", error=type(error).__name__)
            return None

    async def _channel_repo(self, message: IncomingMessage, agent: Agent | None) -> str | None:
        channel = self._settings.channel(message.channel_id)
        return channel.repo if channel is not None else None


async def _after_reply(steps: Sequence[PostRunStep], completed: CompletedRun) -> None:
    """Post-run steps run while the slot is still held; each is isolated from the others."""
    for step in steps:
        try:
            result = step(completed)
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            log.warning(
                "dispatch.post_run_failed",
                run_id=completed.run_id,
                step=getattr(step, "__name__", type(step).__name__),
                error=type(error).__name__,
            )


async def _fail(surface: Surface, run_id: str, agent: Agent, text: str) -> DispatchOutcome:
    await _send(surface, text, run_id=run_id)
    return DispatchOutcome("failed", text, run_id, agent.name)


def _model_failed(error: Exception) -> str:
    """The ⚠️ line for a failed model call, seen by everyone in the thread: the provider's own message
    (a gateway may echo the key it refused) with every credential redacted."""
    return MODEL_FAILED_REPLY.format(detail=redact_secrets(str(error)))


async def _refuse(surface: Surface, run_id: str, agent: Agent, text: str) -> DispatchOutcome:
    log.info("dispatch.refused", run_id=run_id, agent=agent.name, reason="repo_unavailable")
    await _send(surface, text, run_id=run_id)
    return DispatchOutcome("refused", text, run_id, agent.name)


def _conversation(message: IncomingMessage, text: str) -> tuple[Message, ...]:
    """The thread's history, then the request. The memory block is never part of this."""
    turns = [Message(turn.role, turn.text) for turn in message.history if turn.text.strip()]
    return (*turns, Message("user", text))


async def _status(surface: Surface, text: str) -> None:
    try:
        await surface.set_status(text)
    except Exception as error:  # a status is a courtesy; it never stops a run
        log.info("dispatch.status_failed", error=type(error).__name__)


def _note_run(surface: Surface, run_id: str, read: MemoryRead | None) -> None:
    """A surface that puts per-answer controls under the reply (Slack's feedback buttons) learns which
    run it answers and which memory records that run read; others have no `note_run`."""
    note = getattr(surface, "note_run", None)
    if note is not None:
        note(run_id, tuple(record.id for record in read.records) if read is not None else ())


async def _send(surface: Surface, text: str, *, run_id: str | None = None, markdown: bool = True) -> bool:
    """`markdown=False`: text already laid out for a terminal (the `memory list` table), which a
    surface that renders Markdown shows as it is (its `send_plain`)."""
    plain = None if markdown else getattr(surface, "send_plain", None)
    try:
        await (plain(text) if plain is not None else surface.send_reply(text))
    except Exception as error:
        log.error("dispatch.reply_failed", run_id=run_id, error=type(error).__name__)
        return False
    return True


async def _bound_repo(repo_task: Awaitable[str | None], agent: Agent) -> tuple[str | None, str | None]:
    """The run's repo, and why a repo-bound agent cannot run (the refusal's text) or None."""
    try:
        repo = await repo_task
    except RepoUnavailable as error:
        if agent.repo_bound:
            return None, str(error)
        repo = None
    if agent.repo_bound and repo is None:
        return None, NO_REPO_REPLY.format(agent=agent.name)
    return repo, None


async def _settle(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel what is still running (a refused run's memory read) and collect every outcome."""
    pending = [task for task in tasks if task is not None]
    for task in pending:
        if not task.done():
            task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def _log_run(completed: CompletedRun, result: RunResult, seconds: float, has_block: bool) -> None:
    log.info(
        "dispatch.run",
        run_id=completed.run_id,
        agent=completed.agent,
        model_ref=completed.model_ref,
        repo=completed.repo,
        turns=result.turns,
        tool_calls=completed.tool_calls,
        input_tokens=completed.usage.input_tokens,
        output_tokens=completed.usage.output_tokens,
        memory_block=has_block,
        memory_records=completed.memory_records,
        stopped=result.stopped,
        seconds=round(seconds, 3),
    )
