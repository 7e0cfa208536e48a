"""The curation shapes of the memory service's wire: curation entries, record versions, actors, edit text.

Each round-trips through its own (de)serializer pair, leaves unset optionals out (never `null`), and
refuses a malformed value with a WireError naming the field.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest

from memory.types import MAX_TEXT_CHARS, CurationEntry, MemoryRecord, Origin, OriginLabel, RecordVersion
from memory.wire import (
    WireError,
    actor_from_wire,
    entry_from_wire,
    entry_to_wire,
    epoch_from_wire,
    record_from_wire,
    record_to_wire,
    text_from_wire,
    typed_in_from_wire,
    typed_in_to_wire,
    version_from_wire,
    version_to_wire,
)

APPROVED = CurationEntry("mem:org:acme:1", "org:acme", "approved", "user:slack:U1", 1_800_000_000.0)
EDITED = CurationEntry(
    "mem:org:acme:1", "org:acme", "edited", "user:slack:U1", 1_800_000_100.0, related_id="mem:org:acme:2"
)


def test_a_curation_entry_round_trips_in_camel_case() -> None:
    wire = entry_to_wire(EDITED)
    assert wire == {
        "recordId": "mem:org:acme:1",
        "scopeKey": "org:acme",
        "action": "edited",
        "actor": "user:slack:U1",
        "at": 1_800_000_100.0,
        "relatedId": "mem:org:acme:2",
    }
    assert entry_from_wire(wire) == EDITED


def test_an_entry_without_a_related_record_leaves_related_id_out() -> None:
    wire = entry_to_wire(APPROVED)
    assert "relatedId" not in wire
    assert entry_from_wire(wire) == APPROVED


def test_a_version_round_trips_with_its_entries() -> None:
    version = RecordVersion(
        id="mem:org:acme:1",
        scope_key="org:acme",
        status="superseded",
        created_at=1_799_999_000.0,
        text="we deploy with make ship",
        source_run_id="run-7",
        erased_reason=None,
        entries=(APPROVED, EDITED),
        supersedes="mem:org:acme:0",
    )
    wire = version_to_wire(version)
    assert wire["sourceRunId"] == "run-7" and "erasedReason" not in wire
    assert wire["supersedes"] == "mem:org:acme:0"
    assert [entry["action"] for entry in wire["entries"]] == ["approved", "edited"]
    assert version_from_wire(wire) == version


def test_an_erased_version_has_no_text_on_the_wire_and_reads_back_as_none() -> None:
    version = RecordVersion("mem:org:acme:3", "org:acme", "forgotten", 1.0, None, None, "rejected", ())
    wire = version_to_wire(version)
    assert "text" not in wire and "sourceRunId" not in wire and "supersedes" not in wire
    assert wire["erasedReason"] == "rejected"
    assert version_from_wire(wire) == version


def _entry(**overrides: Any) -> dict[str, Any]:
    return {**entry_to_wire(EDITED), **overrides}


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("approved", "entry"),
        (_entry(action="liked"), "entry.action"),
        (_entry(action=["approved"]), "entry.action"),
        (_entry(recordId=""), "entry.recordId"),
        (_entry(recordId="m" * 201), "entry.recordId"),
        (_entry(scopeKey=None), "entry.scopeKey"),
        (_entry(actor=""), "entry.actor"),
        (_entry(actor=7), "entry.actor"),
        (_entry(actor="user:\ud800"), "entry.actor"),
        (_entry(at="now"), "entry.at"),
        (_entry(at=-1), "entry.at"),
        (_entry(at=True), "entry.at"),
        (_entry(at=40_000_000_000), "entry.at"),
        (_entry(relatedId=5), "entry.relatedId"),
    ],
)
def test_a_malformed_entry_is_refused_naming_the_field(value: object, field: str) -> None:
    with pytest.raises(WireError) as caught:
        entry_from_wire(value)
    assert str(caught.value).startswith(field), caught.value


def _version(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": "mem:org:acme:1",
        "scopeKey": "org:acme",
        "status": "active",
        "createdAt": 1.0,
        "entries": [],
    }
    return {**base, **overrides}


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (_version(status="waiting"), "versions[0].status"),
        (_version(status=None), "versions[0].status"),
        (_version(id=""), "versions[0].id"),
        (_version(createdAt="yesterday"), "versions[0].createdAt"),
        (_version(text=3), "versions[0].text"),
        (_version(entries=None), "versions[0].entries"),
        (_version(entries=[{"action": "approved"}]), "versions[0].entries[0]"),
        (_version(erasedReason="bored"), "reason"),
    ],
)
def test_a_malformed_version_is_refused_naming_the_field(value: object, field: str) -> None:
    with pytest.raises(WireError) as caught:
        version_from_wire(value, "versions[0]")
    assert str(caught.value).startswith(field), caught.value


@pytest.mark.parametrize("actor", ["user:slack:U1", "machine", "system", "run:abc-123"])
def test_an_actor_is_any_short_non_empty_string(actor: str) -> None:
    assert actor_from_wire(actor) == actor


@pytest.mark.parametrize("actor", [None, "", "a" * 201, ["machine"]])
def test_a_missing_empty_or_over_long_actor_is_refused(actor: object) -> None:
    with pytest.raises(WireError, match=r"^actor"):
        actor_from_wire(actor)


@pytest.mark.parametrize("text", ["", "   ", None, 4, "t" * (MAX_TEXT_CHARS + 1), "a \ud83d b"])
def test_edit_text_is_refused_like_a_candidates_naming_the_field(text: object) -> None:
    with pytest.raises(WireError, match=r"^text"):
        text_from_wire(text, "text")


def test_edit_text_at_the_cap_is_accepted() -> None:
    assert text_from_wire("t" * MAX_TEXT_CHARS, "text") == "t" * MAX_TEXT_CHARS


@pytest.mark.parametrize("value", [-0.5, float("inf"), "1", False, 32_503_680_001])
def test_an_epoch_outside_0_to_the_year_3000_is_refused(value: object) -> None:
    with pytest.raises(WireError, match=r"^olderThan must be epoch seconds"):
        epoch_from_wire(value, "olderThan")


def test_every_origin_label_round_trips_through_the_wire() -> None:
    """`external` (a channel shared with another organization) too: the HTTP store carries every label
    this version writes (an older client drops a record whose label it does not know, never widens it)."""
    for origin in get_args(Origin):
        record = MemoryRecord(
            "mem:channel:slack:C7:1",
            "channel:slack:C7",
            "fact",
            "a fact",
            "slack:C7:1.0",
            1_800_000_000.0,
            origin=origin,
            origin_conversation="slack:C7",
        )
        assert record_from_wire(record_to_wire(record)) == record, origin
        label: OriginLabel = (origin, "slack:C7")
        assert typed_in_from_wire(typed_in_to_wire(label)) == label, origin
