"""Block Kit pieces every App Home view shares: inert text, and one record's text and details.

Record text is always a `plain_text` object (Slack never parses it as mrkdwn, so a remembered
`<!channel>` or `<https://evil|click>` stays literal), on one line, cut to fit; the only mrkdwn is the
link to the source thread, whose URL comes from Slack (`chat.getPermalink`) and is escaped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memory.rules.scorer import clean_memory_field
from memory.types import MemoryRecord

RECORD_TEXT_LIMIT = 2900  # a section's text is at most 3000 characters
# Slack refuses a view whose `plain_text_input` allows more than this (`max_length` is 1–3000).
INPUT_LIMIT = 3000
# Slack refuses a view of more than 100 blocks.
MAX_BLOCKS = 100


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": False}


def record_text(record: MemoryRecord, limit: int = RECORD_TEXT_LIMIT) -> str:
    """The record's text as inert plain text: one line, control characters gone, cut to `limit`."""
    text = clean_memory_field(record.text) or "(empty)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def escape_mrkdwn(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def day(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d")


def record_context(record: MemoryRecord, link: str | None, lead: str) -> dict[str, Any]:
    """`<lead> · <id>` and, when Slack gave one, a link to the thread it was learned in."""
    elements: list[dict[str, Any]] = [plain(f"{lead} · {record.id}")]
    if link:
        elements.append({"type": "mrkdwn", "text": f"<{escape_mrkdwn(link)}|source thread>"})
    return {"type": "context", "elements": elements}


def button(action_id: str, label: str, value: str, style: str | None = None) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "button", "action_id": action_id, "text": plain(label), "value": value}
    return element | ({"style": style} if style else {})
