"""Slack's feedback buttons under each answer, and what a click means.

The buttons carry only `<positive|negative>:<run id>`; which memory records that run read is kept on
this side (a bounded ledger), so a crafted click cannot make the log claim other records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from app.slack.state import TtlCache

log = structlog.get_logger("slack")

FEEDBACK_ACTION = "answer_feedback"
Verdict = Literal["positive", "negative"]
_VALUE = re.compile(r"^(positive|negative):(run_[A-Za-z0-9]{1,64})$")


def feedback_block(run_id: str) -> dict[str, Any]:
    """A `context_actions` block with 👍 / 👎 for one run's answer."""
    return {
        "type": "context_actions",
        "block_id": f"feedback:{run_id}",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION,
                "positive_button": {
                    "text": {"type": "plain_text", "text": "👍"},
                    "accessibility_label": "This answer was helpful",
                    "value": f"positive:{run_id}",
                },
                "negative_button": {
                    "text": {"type": "plain_text", "text": "👎"},
                    "accessibility_label": "This answer was not helpful",
                    "value": f"negative:{run_id}",
                },
            }
        ],
    }


@dataclass(frozen=True, slots=True)
class FeedbackClick:
    run_id: str
    verdict: Verdict


def parse_feedback(action: Mapping[str, Any]) -> FeedbackClick | None:
    """The click's run and verdict; None for a value this bot never put on a button."""
    match = _VALUE.match(str(action.get("value") or ""))
    if match is None:
        return None
    verdict: Verdict = "positive" if match.group(1) == "positive" else "negative"
    return FeedbackClick(run_id=match.group(2), verdict=verdict)


def log_feedback(body: Mapping[str, Any], action: Mapping[str, Any], runs: TtlCache[tuple[str, ...]]) -> None:
    """One click, logged with the records its run read as this side remembers them (ids only)."""
    click = parse_feedback(action)
    user = str((body.get("user") or {}).get("id") or "")
    if click is None:
        log.warning("slack.feedback_refused", user=user, reason="unknown_value")
        return
    records = runs.get(click.run_id)
    log.info(
        "answer.feedback",
        run_id=click.run_id,
        value=click.verdict,
        memory_record_ids=list(records) if records is not None else None,
        user=user,
        channel=str((body.get("channel") or {}).get("id") or "") or None,
    )
