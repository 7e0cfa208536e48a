"""The App Home tab's Block Kit: pure functions from a page of records to a `views.publish` view.

Record text is always a `plain_text` object (Slack never parses it as mrkdwn, so a remembered
`<!channel>` or `<https://evil|click>` stays literal), on one line, cut to fit. The view's
`private_metadata` carries only where the viewer is (scope, channel, page, search); every action
re-checks what that viewer may see, so a crafted state shows nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from commands.browse import BrowsePage, BrowseScope
from memory.rules.scorer import clean_memory_field
from memory.types import MAX_TEXT_CHARS, MemoryRecord

FORGET_ACTION = "home_forget"
PAGE_ACTION = "home_page"
SEARCH_ACTION = "home_search"
SCOPE_ACTION = "home_scope"
CHANNEL_ACTION = "home_channel"
ADD_ACTION = "home_add"
HOME_ACTIONS = (FORGET_ACTION, PAGE_ACTION, SEARCH_ACTION, SCOPE_ACTION, CHANNEL_ACTION, ADD_ACTION)
# The "Add to memory" modal: its callback id and the inputs its submission carries.
ADD_VIEW = "home_add_modal"
ADD_TEXT_BLOCK, ADD_TEXT = "home_add_text", "text"
ADD_SCOPE_BLOCK, ADD_SCOPE = "home_add_scope", "scope"
ADD_SCOPES = (("me", "Only me"), ("org", "The whole organization"))

RECORD_TEXT_LIMIT = 2900  # a section's text is at most 3000 characters
QUERY_LIMIT = 200
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


@dataclass(frozen=True, slots=True)
class HomeState:
    """Where the viewer is; the only thing kept in the view between actions."""

    scope: BrowseScope = "me"
    channel: str | None = None  # Slack's own channel id (C…), as the conversations select gives it
    page: int = 0
    query: str | None = None

    def encode(self) -> str:
        return json.dumps({"s": self.scope, "c": self.channel, "p": self.page, "q": self.query})


def decode_state(raw: object) -> HomeState:
    """A view's `private_metadata` back to a state; anything odd falls back to the viewer's own page."""
    try:
        data = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    scope: BrowseScope = next((word for word in TITLES if word == data.get("s")), "me")
    channel = data.get("c") if isinstance(data.get("c"), str) else None
    raw_page = data.get("p")
    page = raw_page if isinstance(raw_page, int) and not isinstance(raw_page, bool) else 0
    query = data.get("q") if isinstance(data.get("q"), str) else None
    return HomeState(scope=scope, channel=channel, page=max(0, page), query=clean_query(query))


def clean_query(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    text = clean_memory_field(value)[:QUERY_LIMIT].strip()
    return text or None


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": False}


def record_text(record: MemoryRecord) -> str:
    """The record's text as inert plain text: one line, control characters gone, cut to fit."""
    text = clean_memory_field(record.text) or "(empty)"
    return text if len(text) <= RECORD_TEXT_LIMIT else text[: RECORD_TEXT_LIMIT - 1] + "…"


def _escape_mrkdwn(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _record_blocks(record: MemoryRecord, link: str | None) -> list[dict[str, Any]]:
    date = datetime.fromtimestamp(record.created_at, tz=UTC).strftime("%Y-%m-%d")
    forget = {
        "type": "button",
        "action_id": FORGET_ACTION,
        "text": _plain("Forget"),
        "style": "danger",
        "value": record.id,
        "confirm": {
            "title": _plain("Forget this record?"),
            "text": _plain("I will stop using it in answers. This cannot be undone from Slack."),
            "confirm": _plain("Forget"),
            "deny": _plain("Keep it"),
            "style": "danger",
        },
    }
    context: list[dict[str, Any]] = [_plain(f"{record.kind} · {date} · {record.id}")]
    if link:
        context.append({"type": "mrkdwn", "text": f"<{_escape_mrkdwn(link)}|source thread>"})
    return [
        {"type": "section", "text": _plain(record_text(record)), "accessory": forget},
        {"type": "context", "elements": context},
    ]


def _scope_controls(state: HomeState) -> dict[str, Any]:
    select: dict[str, Any] = {
        "type": "conversations_select",
        "action_id": CHANNEL_ACTION,
        "placeholder": _plain("A channel's memory"),
        "filter": {"include": ["public", "private"], "exclude_bot_users": True},
    }
    if state.scope == "channel" and state.channel:
        select["initial_conversation"] = state.channel
    buttons = [
        {"type": "button", "action_id": f"{SCOPE_ACTION}_{word}", "text": _plain(label), "value": word}
        | ({"style": "primary"} if state.scope == word else {})
        for word, label in (("me", "About me"), ("org", "Organization"))
    ]
    return {"type": "actions", "block_id": "home_scopes", "elements": [*buttons, select]}


def _search_box(state: HomeState) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": SEARCH_ACTION,
        "placeholder": _plain("Words to look for (whole words, like `memory list`)"),
        "dispatch_action_config": {"trigger_actions_on": ["on_enter_pressed"]},
    }
    if state.query:
        element["initial_value"] = state.query
    return {
        "type": "input",
        "block_id": f"home_search:{state.scope}:{state.channel or ''}",
        "dispatch_action": True,
        "optional": True,
        "label": _plain("Search"),
        "element": element,
    }


def _pager(page: BrowsePage) -> dict[str, Any] | None:
    buttons = []
    if page.has_previous:
        buttons.append(
            {
                "type": "button",
                "action_id": f"{PAGE_ACTION}_previous",
                "text": _plain("◀ Previous"),
                "value": str(page.page - 1),
            }
        )
    if page.has_next:
        buttons.append(
            {
                "type": "button",
                "action_id": f"{PAGE_ACTION}_next",
                "text": _plain("Next ▶"),
                "value": str(page.page + 1),
            }
        )
    return {"type": "actions", "block_id": "home_pager", "elements": buttons} if buttons else None


def _add_button() -> dict[str, Any]:
    button = {"type": "button", "action_id": ADD_ACTION, "text": _plain("Add to memory"), "value": "add"}
    return {"type": "actions", "block_id": "home_add", "elements": [button]}


def add_modal(state: HomeState, *, admin: bool) -> dict[str, Any]:
    """The "Add to memory" modal (`views.open`): a text and, for admins, the scope it goes into. Its
    `private_metadata` is where the viewer was, so the tab is re-drawn there after the submission."""
    text = {
        "type": "input",
        "block_id": ADD_TEXT_BLOCK,
        "label": _plain("What should I remember?"),
        "element": {
            "type": "plain_text_input",
            "action_id": ADD_TEXT,
            "multiline": True,
            "max_length": MAX_TEXT_CHARS,
            "placeholder": _plain("One fact, e.g. Deploys go through make ship from main."),
        },
    }
    blocks = [text]
    if admin:
        options = [{"text": _plain(label), "value": word} for word, label in ADD_SCOPES]
        scope = {
            "type": "radio_buttons",
            "action_id": ADD_SCOPE,
            "options": options,
            "initial_option": options[0],
        }
        blocks.append(
            {"type": "input", "block_id": ADD_SCOPE_BLOCK, "label": _plain("For"), "element": scope}
        )
    return {
        "type": "modal",
        "callback_id": ADD_VIEW,
        "title": _plain("Add to memory"),
        "submit": _plain("Remember"),
        "close": _plain("Cancel"),
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
) -> dict[str, Any]:
    """The whole home tab for one page of one scope."""
    blocks: list[dict[str, Any]] = [{"type": "header", "text": _plain(TITLES[page.scope])}]
    if admin:
        blocks.append(_scope_controls(state))
    blocks.append(_search_box(state))
    blocks.append(_add_button())
    if notice:
        blocks.append({"type": "context", "elements": [_plain(clean_memory_field(notice)[:2900])]})
    if page.problem:
        blocks.append({"type": "section", "text": _plain(page.problem)})
    elif not page.records:
        empty = "Nothing matches that search." if state.query else "Nothing remembered here yet."
        blocks.append({"type": "section", "text": _plain(empty)})
    for record in page.records:
        blocks.append({"type": "divider"})
        blocks.extend(_record_blocks(record, links.get(record.source_thread_key)))
    notes = []
    if page.hidden:
        many = "record" if page.hidden == 1 else "records"
        notes.append(f"{page.hidden} {many} learned in a private conversation are only listed there.")
    if page.capped:
        notes.append("Only the newest records are paged here; search to reach older ones.")
    if notes:
        blocks.append({"type": "context", "elements": [_plain(" ".join(notes))]})
    pager = _pager(page)
    if pager is not None:
        blocks.append(pager)
    return {"type": "home", "private_metadata": state.encode(), "blocks": blocks}


def memory_off_view() -> dict[str, Any]:
    return {
        "type": "home",
        "blocks": [
            {"type": "header", "text": _plain(TITLES["me"])},
            {"type": "section", "text": {"type": "mrkdwn", "text": MEMORY_OFF_HELP}},
        ],
    }
