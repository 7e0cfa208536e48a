"""The App Home's "Waiting for review" section: what reflection wrote to a shared scope under
`memory.review = "shared"`, each with Approve / Edit / Reject (the commands decide; these are only
buttons). Only admins are given it, and it fits in what the tab's 100 blocks leave over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.slack.home.blocks import MAX_BLOCKS, button, day, plain, record_context, record_text
from app.slack.home.edit import EDIT_ACTION
from commands.browse import ReviewQueue
from commands.replaced import Replaced
from memory.types import MemoryRecord, Origin

APPROVE_ACTION = "home_approve"
REJECT_ACTION = "home_reject"
REVIEW_TITLE = "Waiting for review"
PENDING_BLOCK = "home_pending_"  # + the record's place in the section
# The header, the "more" note and the divider under the section.
_OVERHEAD = 3
_PER_RECORD = 3  # its text, its details, its buttons
REPLACED_LIMIT = 1500  # the superseded record's text, beside the details in one context block
MOST_SHOWN = (MAX_BLOCKS - _OVERHEAD) // _PER_RECORD  # on an otherwise empty tab

_WHERE: dict[Origin, str] = {
    "public": "a public channel",
    "private": "a private channel",
    "mpim": "a group DM",
    "external": "a channel shared with another organization",
    "dm": "a DM",
    "machine": "the terminal",
    "unknown": "a conversation of unknown kind",
}


def review_blocks(queue: ReviewQueue, links: Mapping[str, str], *, budget: int) -> list[dict[str, Any]]:
    """The section in at most `budget` blocks: as many records as fit, newest first, and a note that
    `memory pending` lists the rest."""
    if budget < _OVERHEAD:
        return []
    blocks: list[dict[str, Any]] = [{"type": "header", "text": plain(REVIEW_TITLE)}]
    room = (budget - _OVERHEAD) // _PER_RECORD
    shown = queue.records[:room]
    for index, record in enumerate(shown):
        replaced = queue.replaces.get(record.id)
        blocks.extend(_pending_blocks(index, record, links.get(record.source_thread_key), replaced))
    notes = []
    if queue.problem:
        notes.append(queue.problem)
    elif not queue.records:
        notes.append("Nothing is waiting for review here.")
    if len(shown) < len(queue.records) or queue.more:
        notes.append("More are waiting than fit here: `memory pending` lists them all.")
    if queue.hidden:
        many = "record" if queue.hidden == 1 else "records"
        notes.append(
            f"{queue.hidden} waiting {many} learned in a private conversation: `memory pending` there."
        )
    if notes:
        blocks.append({"type": "context", "elements": [plain(" ".join(notes))]})
    blocks.append({"type": "divider"})
    return blocks


def _pending_blocks(
    index: int, record: MemoryRecord, link: str | None, replaced: Replaced | None
) -> list[dict[str, Any]]:
    lead = f"{record.scope_key} · {record.kind} · learned {day(record.created_at)} in {_WHERE[record.origin]}"
    reject = button(REJECT_ACTION, "Reject", record.id, "danger") | {
        "confirm": {
            "title": plain("Reject this record?"),
            "text": plain("Its text is erased and it never enters shared memory."),
            "confirm": plain("Reject"),
            "deny": plain("Keep it waiting"),
            "style": "danger",
        }
    }
    elements = [
        button(APPROVE_ACTION, "Approve", record.id, "primary"),
        button(EDIT_ACTION, "Edit", record.id),
        reject,
    ]
    context = record_context(record, link, lead)
    if replaced is not None:  # an admin never approves a change to a record they were not shown
        context["elements"].append(plain(_replaces(replaced)))
    return [
        {"type": "section", "block_id": f"{PENDING_BLOCK}{index}", "text": plain(record_text(record))},
        context,
        {"type": "actions", "elements": elements},
    ]


def _replaces(replaced: Replaced) -> str:
    if replaced.record is None:
        return f"Approving it supersedes {replaced.id} (learned where this tab cannot show it)."
    return f"Approving it supersedes {replaced.id}: {record_text(replaced.record, REPLACED_LIMIT)}"
