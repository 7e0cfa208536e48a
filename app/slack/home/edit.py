"""The App Home's Edit modal: a record's current text to change; its submission is `memory edit`.

The modal's `private_metadata` carries the record id and where the viewer was in the tab, nothing
else: a crafted id reaches the command, which decides who may edit what.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.slack.home.blocks import INPUT_LIMIT, plain
from app.slack.home.state import HomeState, decode_state
from memory.types import MemoryRecord

EDIT_ACTION = "home_edit"
EDIT_VIEW = "home_edit_modal"
EDIT_TEXT_BLOCK, EDIT_TEXT = "home_edit_text", "text"


@dataclass(frozen=True, slots=True)
class EditSubmission:
    record_id: str
    text: str
    state: HomeState  # where the viewer was, to re-draw the tab there


def edit_modal(record: MemoryRecord, state: HomeState) -> dict[str, Any]:
    """The Edit modal (`views.open`), prefilled with the record's text as it is stored."""
    text = {
        "type": "input",
        "block_id": EDIT_TEXT_BLOCK,
        "label": plain("The record's new text"),
        "element": {
            "type": "plain_text_input",
            "action_id": EDIT_TEXT,
            "multiline": True,
            "max_length": INPUT_LIMIT,
            "initial_value": record.text,
            "focus_on_load": True,
        },
    }
    note = plain(
        f"A new version of {record.id} replaces it in {record.scope_key}; `memory history` keeps both."
    )
    return {
        "type": "modal",
        "callback_id": EDIT_VIEW,
        "title": plain("Edit a record"),
        "submit": plain("Save"),
        "close": plain("Cancel"),
        "private_metadata": json.dumps({"id": record.id, "at": state.encode()}),
        "blocks": [text, {"type": "context", "elements": [note]}],
    }


def edit_submission(view: Mapping[str, Any]) -> EditSubmission:
    """The submitted modal's record id, text and tab state; anything missing is empty (the command
    then answers with its usage)."""
    try:
        meta = json.loads(view.get("private_metadata") or "{}")
    except (TypeError, ValueError):
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    values = (view.get("state") or {}).get("values") or {}
    text = ((values.get(EDIT_TEXT_BLOCK) or {}).get(EDIT_TEXT) or {}).get("value")
    record_id = meta.get("id")
    return EditSubmission(
        record_id if isinstance(record_id, str) else "",
        text if isinstance(text, str) else "",
        decode_state(meta.get("at")),
    )


def editable_here(record: MemoryRecord) -> bool:
    """Slack's text input holds at most INPUT_LIMIT characters; a longer record is edited by command."""
    return len(record.text) <= INPUT_LIMIT
