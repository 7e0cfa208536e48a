"""What a run shows of its work while it answers: the memory it recalled and each tool call, as
steps a surface may display (Slack's task cards in the streamed answer). A surface without
`show_step` gets none of this; a step is a courtesy and never stops a run.

The recall step lists exactly the records of the memory block (already filtered for whoever reads
the reply), and its sources are the threads those records were learned in. A tool step's title is
the tool and its first argument; the model chooses both, so they are cleaned and cut, and the step
ids are ours, never the model's call ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

import structlog

from app.agent.agents import Agent
from app.agent.runner import RunEvent, ToolCalled, ToolReturned
from memory.types import MemoryRecord

log = structlog.get_logger("dispatch")

StepStatus = Literal["pending", "in_progress", "complete", "error"]

RECALL_STEP = "memory-recall"
TITLE_LIMIT = 80
ARGUMENT_LIMIT = 60
OUTPUT_LIMIT = 200  # Slack caps a task's output at 256 characters

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True, slots=True)
class StepSource:
    """A thread a step drew on (the surface links it: a Slack permalink) and how the link reads."""

    thread_key: str
    label: str


@dataclass(frozen=True, slots=True)
class Step:
    id: str
    title: str
    status: StepStatus
    output: str | None = None
    sources: tuple[StepSource, ...] = ()


class ShowsSteps(Protocol):
    """A surface that displays steps as they happen (both calls return at once)."""

    def show_step(self, step: Step) -> None: ...

    def show_plan(self, title: str) -> None: ...


def recall_step(records: Sequence[MemoryRecord]) -> Step | None:
    """The step "Recalled 3 notes", linking the threads they were learned in (block order, each
    thread once); None when the block is empty."""
    if not records:
        return None
    noun = "note" if len(records) == 1 else "notes"
    learned: dict[str, float] = {}
    for record in records:
        key = record.source_thread_key
        learned[key] = min(learned.get(key, record.created_at), record.created_at)
    sources = tuple(StepSource(key, f"Thread of {_day(at)}") for key, at in learned.items())
    return Step(RECALL_STEP, f"Recalled {len(records)} {noun}", "complete", sources=sources)


class ToolSteps:
    """Turns the run's tool events into steps: in progress when called, complete or error when back."""

    def __init__(self, show: Callable[[Step], None]) -> None:
        self._show = show
        self._ids: dict[tuple[int, str], str] = {}
        self._titles: dict[str, str] = {}

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, ToolCalled):
            step_id = f"tool-{len(self._ids) + 1}"
            self._ids[(event.turn, event.call.id)] = step_id
            self._titles[step_id] = tool_title(event.call.name, event.call.arguments)
            self._show(Step(step_id, self._titles[step_id], "in_progress"))
        elif isinstance(event, ToolReturned):
            known = self._ids.get((event.turn, event.call.id))
            if known is None:
                return
            result = event.result
            status: StepStatus = "error" if result.is_error else "complete"
            output = tool_output(result.content, status)
            self._show(Step(known, self._titles[known], status, output=output))


def tool_title(name: str, arguments: object) -> str:
    """`read_file app/main.py`: the tool and its first plain argument, one line, cut."""
    title = _one_line(name)[:TITLE_LIMIT] or "tool"
    argument = _first_argument(arguments)
    if argument:
        title = f"{title} {_cut(argument, ARGUMENT_LIMIT)}"
    return _cut(title, TITLE_LIMIT)


def tool_output(content: str, status: StepStatus) -> str:
    """A short line: the error's first line, or how much came back (never the content itself)."""
    if status == "error":
        first = next((line for line in content.splitlines() if line.strip()), "error")
        return _cut(_one_line(first), OUTPUT_LIMIT)
    lines = len(content.splitlines())
    if lines > 1:
        return f"{lines} lines"
    return f"{len(content)} characters" if content else "nothing returned"


def step_observer(surface: object) -> Callable[[RunEvent], None] | None:
    """The run's event observer that shows each tool call on `surface`, or None (it shows no steps)."""
    show = getattr(surface, "show_step", None)
    return ToolSteps(show) if callable(show) else None


def show_step(surface: object, step: Step | None) -> None:
    show = getattr(surface, "show_step", None)
    if step is None or not callable(show):
        return
    try:
        show(step)
    except Exception as error:  # a step is a courtesy; it never stops a run
        log.info("dispatch.step_failed", error=type(error).__name__)


def plan_title(agent: Agent, repo: str | None, *, own_runner: bool) -> str | None:
    """A repo-bound agent's multi-step run (the tool loop, not its own runner, with tools on a repo)
    shows its steps together in a plan with this title; any other run, a timeline (None)."""
    has_tools = bool(agent.tools) or agent.toolset is not None
    if repo is None or not agent.repo_bound or not has_tools or own_runner:
        return None
    return f"Working in {repo}"


def show_plan(surface: object, title: str | None) -> None:
    """Before the first step: the steps show together as a plan titled `title` (None: no plan)."""
    plan = getattr(surface, "show_plan", None)
    if title is not None and callable(plan):
        try:
            plan(title)
        except Exception as error:
            log.info("dispatch.step_failed", error=type(error).__name__)


def _first_argument(arguments: object) -> str | None:
    if not isinstance(arguments, Mapping):
        return None
    for value in arguments.values():
        if isinstance(value, bool):
            continue
        if isinstance(value, str | int | float) and str(value).strip():
            return _one_line(str(value))
    return None


def _day(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d")


def _one_line(text: str) -> str:
    return " ".join(_UNPRINTABLE.sub(" ", text).split())


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
