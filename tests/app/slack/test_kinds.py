"""The kinds the bot says it handles are the events manifest.yml subscribes to: a subscription the bot
had no listener for would be acked and dropped as malformed, a listener without one never called."""

from __future__ import annotations

from pathlib import Path

from app.slack.kinds import HANDLED_EVENTS, handled, payload_kind

ROOT = Path(__file__).resolve().parents[3]


def _manifest_bot_events() -> set[str]:
    lines = (ROOT / "manifest.yml").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "bot_events:")
    events = set()
    for line in lines[start + 1 :]:
        item = line.split("#")[0].strip()
        if not item:
            continue  # a comment line inside the list
        if not item.startswith("- "):
            break
        events.add(item[2:].split(".")[0])  # message.channels → the `message` event
    return events


def test_the_handled_events_are_the_manifests_bot_events() -> None:
    assert _manifest_bot_events() == HANDLED_EVENTS


def test_a_kind_that_is_not_of_slacks_shape_is_logged_as_unknown() -> None:
    assert payload_kind({"type": "Robert'); DROP TABLE"}) == "unknown"
    assert payload_kind({"type": "event_callback", "event": {"type": "app_mention"}}) == "app_mention"


def test_an_event_is_handled_by_its_event_type_not_an_interactions() -> None:
    assert handled({"type": "event_callback", "event": {"type": "message"}})
    assert not handled({"type": "event_callback", "event": {"type": "block_actions"}})
    assert handled({"type": "block_actions"})
