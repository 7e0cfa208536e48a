"""The README is the front door: what it tells a newcomer to set up matches what the project declares."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def manifest_bot_events() -> list[str]:
    """The `- event` lines under `bot_events:` in manifest.yml, comments dropped."""
    lines = (ROOT / "manifest.yml").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "bot_events:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    events: list[str] = []
    for line in lines[start + 1 :]:
        stripped = line.split("#", 1)[0].strip()
        if line.strip() and not line.strip().startswith("#") and len(line) - len(line.lstrip()) <= indent:
            break
        if stripped.startswith("- "):
            events.append(stripped[2:].strip())
    return events


def readme_step(number: int) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^{number}\. (.*?)(?=^{number + 1}\. )", text, re.M | re.S)
    assert match, f"README has no step {number}"
    return match.group(1)


def test_step_one_names_every_event_the_manifest_subscribes_to() -> None:
    events = manifest_bot_events()
    assert "app_mention" in events and "channel_deleted" in events
    step = readme_step(1)
    assert [event for event in events if f"`{event}`" not in step] == []


def test_every_span_the_tracing_paragraph_names_is_one_the_code_starts() -> None:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    paragraph = text[text.index("**Tracing.**") : text.index("**Metrics.**")]
    named = set(re.findall(r"`([a-z]+(?:\.[a-z_]+)+|dispatch)`", paragraph)) - {"opentelemetry-api"}
    sources = [path for package in ("app", "memory") for path in (ROOT / package).rglob("*.py")]
    code = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    started = set(re.findall(r'\bspan\(\s*"([^"]+)"', code))
    assert named >= {"slack.event", "chat.turn", "memory.retrieve"}
    assert sorted(named - started) == []
