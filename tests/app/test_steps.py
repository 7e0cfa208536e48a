"""The steps a run shows: the recall step from the block's records, a tool call's title and output,
and the ids the steps carry (ours, never the model's call ids)."""

from __future__ import annotations

from app.agent.providers.base import ToolCall, ToolResult
from app.agent.runner import ToolCalled, ToolReturned
from app.steps import RECALL_STEP, Step, StepSource, ToolSteps, recall_step, tool_output, tool_title
from memory.types import MemoryRecord

DAY = 1_764_547_200.0  # 2025-12-01 00:00 UTC


def record(n: int, thread: str, at: float = DAY) -> MemoryRecord:
    return MemoryRecord(f"mem:org:acme:{n}", "org:acme", "fact", f"note {n}", thread, at)


def test_the_recall_step_counts_the_block_records_and_names_each_thread_once_in_block_order() -> None:
    records = [record(1, "slack:C2:2.0"), record(2, "slack:C1:1.0", DAY - 86_400), record(3, "slack:C2:2.0")]
    step = recall_step(records)
    assert step == Step(
        RECALL_STEP,
        "Recalled 3 notes",
        "complete",
        sources=(
            StepSource("slack:C2:2.0", "Thread of 2025-12-01"),
            StepSource("slack:C1:1.0", "Thread of 2025-11-30"),
        ),
    )


def test_one_recalled_note_is_singular_and_an_empty_block_is_no_step() -> None:
    one = recall_step([record(1, "slack:C1:1.0")])
    assert one is not None and one.title == "Recalled 1 note"
    assert recall_step([]) is None


def test_a_tool_title_is_the_tool_and_its_first_plain_argument_on_one_line_cut_short() -> None:
    assert tool_title("read_file", {"path": "src/app.py", "ref": "main"}) == "read_file src/app.py"
    assert tool_title("get_issue", {"number": 12}) == "get_issue 12"
    assert tool_title("list_directory", {}) == "list_directory"
    assert tool_title("search_code", {"query": "a\nb\x1b[31m"}) == "search_code a b [31m"
    long = tool_title("search_code", {"query": "x" * 500})
    assert len(long) <= 80 and long.endswith("…")


def test_a_tool_output_is_a_size_or_the_error_first_line_never_the_content() -> None:
    assert tool_output("header\nsecret line\n", "complete") == "2 lines"
    assert tool_output("secret", "complete") == "6 characters"
    assert tool_output("", "complete") == "nothing returned"
    assert tool_output("\nerror: no such file\ndetails", "error") == "error: no such file"
    assert len(tool_output("error: " + "y" * 900, "error")) <= 200


def test_tool_events_become_steps_with_our_ids_in_progress_then_complete_or_error() -> None:
    shown: list[Step] = []
    steps = ToolSteps(shown.append)
    first, second = ToolCall("toolu_<script>", "read_file", {"path": "a.py"}), ToolCall("x", "nope", {})
    steps(ToolCalled(1, first))
    steps(ToolCalled(1, second))
    steps(ToolReturned(1, first, ToolResult(first.id, "a.py\nprint()"), 0.1))
    steps(ToolReturned(1, second, ToolResult(second.id, "error: no tool named 'nope'", is_error=True), 0.1))
    assert [(s.id, s.title, s.status, s.output) for s in shown] == [
        ("tool-1", "read_file a.py", "in_progress", None),
        ("tool-2", "nope", "in_progress", None),
        ("tool-1", "read_file a.py", "complete", "2 lines"),
        ("tool-2", "nope", "error", "error: no tool named 'nope'"),
    ]
