"""The App Home tab's Block Kit: pure functions from a page of records to a `views.publish` view.

Record text is always inert plain text (app/slack/home/blocks.py). The view's `private_metadata`
carries only where the viewer is (app/slack/home/state.py); every action re-checks what that viewer
may see, so a crafted state shows nothing more. An admin under review gets "Waiting for review" on
top (app/slack/home/review.py), in what the page's own blocks leave of Slack's 100.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.slack.home.blocks import (
    INPUT_LIMIT,
    MAX_BLOCKS,
    button,
    day,
    plain,
    record_context,
    record_text,
)
from app.slack.home.edit import EDIT_ACTION
from app.slack.home.review import APPROVE_ACTION, REJECT_ACTION, review_blocks
from app.slack.home.state import HomeState, clean_query, decode_state
from commands.browse import BrowsePage, BrowseScope, ReviewQueue
from memory.rules.scorer import clean_memory_field
from memory.types import MemoryRecord

__all__ = ["HomeState", "clean_query", "decode_state"]  # where the tab's handlers have always found them

FORGET_ACTION = "home_forget"
PAGE_ACTION = "home_page"
SEARCH_ACTION = "home_search"
SCOPE_ACTION = "home_scope"
CHANNEL_ACTION = "home_channel"
ADD_ACTION = "home_add"
HOME_ACTIONS = (
    FORGET_ACTION,
    PAGE_ACTION,
    SEARCH_ACTION,
    SCOPE_ACTION,
    CHANNEL_ACTION,
    ADD_ACTION,
    EDIT_ACTION,
    APPROVE_ACTION,
    REJECT_ACTION,
)
RECORD_BLOCK = "home_record_"  # + the record's place on the page
# The "Add to memory" modal: its callback id and the inputs its submission carries.
ADD_VIEW = "home_add_modal"
ADD_TEXT_BLOCK, ADD_TEXT = "home_add_text", "text"
ADD_SCOPE_BLOCK, ADD_SCOPE = "home_add_scope", "scope"
ADD_SCOPES = (("me", "Only me"), ("org", "The whole organization"))

MEMORY_OFF_HELP = (
    "🔕 Memory is off, so I remember nothing between threads. To turn it on, set `enabled = true` "
    "under `[memory]` and an `organization` in switchboard.toml (or SWITCHBOARD_MEMORY__ENABLED=true "
    "and SWITCHBOARD_ORGANIZATION), then restart the bot."
)
TITLES: dict[BrowseScope, str] = {
    "me": "What I remember about you",
    "org": "What I remember for the whole organization",
    "channel": "What I remember about a channel",
}


def _record_blocks(
    index: int, record: MemoryRecord, link: str | None, *, editable: bool
) -> list[dict[str, Any]]:
    forget = button(FORGET_ACTION, "Forget", record.id, "danger") | {
        "confirm": {
            "title": plain("Forget this record?"),
            "text": plain("I will stop using it in answers. This cannot be undone from Slack."),
            "confirm": plain("Forget"),
            "deny": plain("Keep it"),
            "style": "danger",
        },
    }
    # The tab lists only what its viewer may forget (their own; the shared scopes for admins), and
    # whoever may forget a record may edit it too.
    buttons = [button(EDIT_ACTION, "Edit", record.id), forget] if editable else [forget]
    return [
        {"type": "section", "block_id": f"{RECORD_BLOCK}{index}", "text": plain(record_text(record))},
        record_context(record, link, f"{record.kind} · {day(record.created_at)}"),
        {"type": "actions", "elements": buttons},
    ]


def _scope_controls(state: HomeState) -> dict[str, Any]:
    select: dict[str, Any] = {
        "type": "conversations_select",
        "action_id": CHANNEL_ACTION,
        "placeholder": plain("A channel's memory"),
        "filter": {"include": ["public", "private"], "exclude_bot_users": True},
    }
    if state.scope == "channel" and state.channel:
        select["initial_conversation"] = state.channel
    buttons = [
        {"type": "button", "action_id": f"{SCOPE_ACTION}_{word}", "text": plain(label), "value": word}
        | ({"style": "primary"} if state.scope == word else {})
        for word, label in (("me", "About me"), ("org", "Organization"))
    ]
    return {"type": "actions", "block_id": "home_scopes", "elements": [*buttons, select]}


def _search_box(state: HomeState) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": SEARCH_ACTION,
        "placeholder": plain("Words to look for (whole words, like `memory list`)"),
        "dispatch_action_config": {"trigger_actions_on": ["on_enter_pressed"]},
    }
    if state.query:
        element["initial_value"] = state.query
    return {
        "type": "input",
        "block_id": f"home_search:{state.scope}:{state.channel or ''}",
        "dispatch_action": True,
        "optional": True,
        "label": plain("Search"),
        "element": element,
    }


def _pager(page: BrowsePage) -> dict[str, Any] | None:
    buttons = []
    if page.has_previous:
        buttons.append(
            {
                "type": "button",
                "action_id": f"{PAGE_ACTION}_previous",
                "text": plain("◀ Previous"),
                "value": str(page.page - 1),
            }
        )
    if page.has_next:
        buttons.append(
            {
                "type": "button",
                "action_id": f"{PAGE_ACTION}_next",
                "text": plain("Next ▶"),
                "value": str(page.page + 1),
            }
        )
    return {"type": "actions", "block_id": "home_pager", "elements": buttons} if buttons else None


def _add_button() -> dict[str, Any]:
    button = {"type": "button", "action_id": ADD_ACTION, "text": plain("Add to memory"), "value": "add"}
    return {"type": "actions", "block_id": "home_add", "elements": [button]}


def add_modal(state: HomeState, *, admin: bool) -> dict[str, Any]:
    """The "Add to memory" modal (`views.open`): a text and, for admins, the scope it goes into. Its
    `private_metadata` is where the viewer was, so the tab is re-drawn there after the submission."""
    text = {
        "type": "input",
        "block_id": ADD_TEXT_BLOCK,
        "label": plain("What should I remember?"),
        "element": {
            "type": "plain_text_input",
            "action_id": ADD_TEXT,
            "multiline": True,
            "max_length": INPUT_LIMIT,
            "placeholder": plain("One fact, e.g. Deploys go through make ship from main."),
        },
    }
    blocks = [text]
    if admin:
        options = [{"text": plain(label), "value": word} for word, label in ADD_SCOPES]
        scope = {
            "type": "radio_buttons",
            "action_id": ADD_SCOPE,
            "options": options,
            "initial_option": options[0],
        }
        blocks.append({"type": "input", "block_id": ADD_SCOPE_BLOCK, "label": plain("For"), "element": scope})
    return {
        "type": "modal",
        "callback_id": ADD_VIEW,
        "title": plain("Add to memory"),
        "submit": plain("Remember"),
        "close": plain("Cancel"),
        "private_metadata": state.encode(),
        "blocks": blocks,
    }


def add_submission(view: Mapping[str, Any]) -> tuple[str, str]:
    """The submitted modal's (text, scope word); a missing or unknown scope is `me` (a crafted `org`
    from a non-admin still reaches the command, which refuses it)."""
    values = (view.get("state") or {}).get("values") or {}
    text = ((values.get(ADD_TEXT_BLOCK) or {}).get(ADD_TEXT) or {}).get("value")
    option = ((values.get(ADD_SCOPE_BLOCK) or {}).get(ADD_SCOPE) or {}).get("selected_option") or {}
    scope = next((word for word, _ in ADD_SCOPES if word == option.get("value")), "me")
    return (text if isinstance(text, str) else ""), scope


def home_view(
    page: BrowsePage,
    state: HomeState,
    *,
    admin: bool,
    links: Mapping[str, str],
    notice: str | None = None,
    review: ReviewQueue | None = None,
    editable: bool = False,
) -> dict[str, Any]:
    """The whole home tab for one page of one scope: the outcome of the last action first, then
    (admins under review) what waits for them, then the page. `editable`: records get Edit."""
    blocks: list[dict[str, Any]] = []
    if notice:
        blocks.append({"type": "context", "elements": [plain(clean_memory_field(notice)[:2900])]})
    browse = _page_blocks(page, state, admin=admin, links=links, editable=editable)
    if review is not None:
        blocks.extend(review_blocks(review, links, budget=MAX_BLOCKS - len(blocks) - len(browse)))
    blocks.extend(browse)
    return {"type": "home", "private_metadata": state.encode(), "blocks": blocks}


def _page_blocks(
    page: BrowsePage, state: HomeState, *, admin: bool, links: Mapping[str, str], editable: bool
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "header", "text": plain(TITLES[page.scope])}]
    if admin:
        blocks.append(_scope_controls(state))
    blocks.append(_search_box(state))
    blocks.append(_add_button())
    if page.problem:
        blocks.append({"type": "section", "text": plain(page.problem)})
    elif not page.records:
        empty = "Nothing matches that search." if state.query else "Nothing remembered here yet."
        blocks.append({"type": "section", "text": plain(empty)})
    for index, record in enumerate(page.records):
        blocks.extend(_record_blocks(index, record, links.get(record.source_thread_key), editable=editable))
    notes = []
    if page.hidden:
        many = "record" if page.hidden == 1 else "records"
        notes.append(f"{page.hidden} {many} learned in a private conversation are only listed there.")
    if page.capped:
        notes.append("Only the newest records are paged here; search to reach older ones.")
    if notes:
        blocks.append({"type": "context", "elements": [plain(" ".join(notes))]})
    pager = _pager(page)
    if pager is not None:
        blocks.append(pager)
    return blocks


def memory_off_view() -> dict[str, Any]:
    return {
        "type": "home",
        "blocks": [
            {"type": "header", "text": plain(TITLES["me"])},
            {"type": "section", "text": {"type": "mrkdwn", "text": MEMORY_OFF_HELP}},
        ],
    }
