"""settle_heap: what a server does to its collector once it is built (ops/heap.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ops.heap import SERVER_THRESHOLDS, settle_heap


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_objects_alive_at_start_up_leave_the_collectors_generations(restored_collector: None) -> None:
    survivors = [[n] for n in range(100)]  # lists: objects the collector tracks
    assert all(gc.is_tracked(item) for item in survivors)

    settle_heap()

    walked = {id(item) for item in gc.get_objects()}  # what a full collection would walk
    assert gc.get_freeze_count() >= len(survivors)
    assert not any(id(item) in walked for item in survivors)


def test_the_youngest_generation_is_collected_far_less_often(restored_collector: None) -> None:
    settle_heap()

    assert gc.get_threshold() == SERVER_THRESHOLDS
    assert SERVER_THRESHOLDS[0] > 20 * 700  # CPython's default
