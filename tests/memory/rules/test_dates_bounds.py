"""A record's observation time is bounded: a date no calendar can show never enters, and one already
stored never fails the read of its scope."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memory.rules.engine import validate_candidate
from memory.rules.scorer import day_of
from memory.types import MAX_OBSERVED_AT, MemoryCandidate
from memory.wire import WireError, candidate_from_wire

FAR_FUTURE = 253_402_300_800.0  # year 10000: past what datetime can show


def candidate(**changes: object) -> MemoryCandidate:
    base = MemoryCandidate(kind="fact", text="Deploys go through make ship.", source_thread_key="t1")
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_write_observed_past_the_year_3000_is_refused_naming_the_field() -> None:
    validate_candidate(0, candidate(observed_at=MAX_OBSERVED_AT))
    with pytest.raises(ValueError, match=r"candidates\[0\]\.observed_at must be epoch seconds from 0 to"):
        validate_candidate(0, candidate(observed_at=FAR_FUTURE))


def test_the_wire_refuses_an_observed_at_past_the_year_3000() -> None:
    wire = {"kind": "fact", "text": "x", "sourceThreadKey": "t1", "observedAt": FAR_FUTURE}
    with pytest.raises(WireError, match=r"observedAt must be epoch seconds from 0 to"):
        candidate_from_wire(wire, 0)


def test_a_stored_time_no_calendar_holds_shows_as_undated() -> None:
    assert day_of(1_764_547_200.0) == "2025-12-01"
    assert day_of(FAR_FUTURE) == "undated"
