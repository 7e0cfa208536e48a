"""The PostgreSQL store's CPU-heavy read steps run off the event loop.

A retrieve catches the scope's index up (a first read decodes the whole scope, vectors included),
takes the cosines and scores the whole scope with numpy: done on the loop's thread, each would stall
every other request the process serves. The test watches (a profiler hook on every thread, nothing
replaced) which thread runs each step of a real retrieve against the real server.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from memory.ranking.fusion import DEFAULT_RANKING
from memory.stores.postgres.store import PostgresMemoryStore
from memory.types import MemoryCandidate
from tests.memory.embedders import ConceptEmbedder
from tests.memory.postgres_support import TempSchema, unique_application_name

SCOPE = "org:acme"
# (module file suffix, function name) of the steps that must not run on the loop's thread.
HEAVY_STEPS = {
    ("memory/stores/postgres/index.py", "apply"),
    ("memory/ranking/scope_index.py", "select"),
    ("memory/ranking/fusion.py", "score_with_feedback"),
    ("memory/ranking/fusion.py", "centered_cosines"),
}


class StepWatcher:
    """Records the thread of every call to one of the heavy steps."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_name in {name for _, name in HEAVY_STEPS} and any(
            code.co_filename.endswith(path) and code.co_name == name for path, name in HEAVY_STEPS
        ):
            self.seen.append((code.co_name, threading.get_ident()))


@pytest.fixture
def watcher() -> Iterator[StepWatcher]:
    watching = StepWatcher()
    sys.setprofile(watching)
    threading.setprofile(watching)  # threads started from now on: the loop's executor is one
    try:
        yield watching
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


async def test_the_scope_index_load_cosines_and_scoring_run_off_the_event_loop(
    schema: TempSchema, watcher: StepWatcher
) -> None:
    store = PostgresMemoryStore(
        schema.dsn,
        clock=time.time,
        ranking=DEFAULT_RANKING,
        embedder=ConceptEmbedder(),
        application_name=unique_application_name(),
    )
    try:
        texts = [f"Deploys of service {n} go through make ship from main" for n in range(40)]
        await store.write(SCOPE, [MemoryCandidate(kind="fact", text=t, source_thread_key="t") for t in texts])
        loop_thread = threading.get_ident()
        found = await store.retrieve(SCOPE, "how do deploys of service 7 go", 8)
    finally:
        await store.aclose()
    assert found, "the retrieve found nothing, so it never ranked"
    steps = {name for name, _ in watcher.seen}
    assert steps == {name for _, name in HEAVY_STEPS}, f"not every heavy step ran: {sorted(steps)}"
    on_loop = sorted({name for name, thread in watcher.seen if thread == loop_thread})
    assert on_loop == [], f"ran on the event loop's thread: {on_loop}"
