"""Where a viewer is in the App Home (scope, channel, page, search): the only thing a view carries
between actions. Every action re-checks what that viewer may see, so a crafted state shows nothing more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import get_args

from commands.browse import BrowseScope
from memory.rules.scorer import clean_memory_field

QUERY_LIMIT = 200
_SCOPES: tuple[BrowseScope, ...] = get_args(BrowseScope)


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
    scope: BrowseScope = next((word for word in _SCOPES if word == data.get("s")), "me")
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
