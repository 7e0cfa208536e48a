"""Browsing memory page by page, for a view only the viewer sees (Slack's App Home).

Surface-agnostic: which scopes a person may browse (their own; admins also the org and any channel),
the same whole-token filter as `memory list`, and the read rule (memory/visibility.py) with the
viewer as the only reader. Forgetting is not here: it goes through `memory forget` (commands/memory.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import structlog

from commands.list_filter import widened_filter
from commands.memory import MemoryCommands
from commands.registry import Caller
from memory.rules.scope import derive_scope_key
from memory.rules.scorer import query_tokens
from memory.rules.visibility import Reader, may_show
from memory.types import MAX_LIMIT, MemoryRecord, MemoryStore

log = structlog.get_logger("memory")

PAGE_SIZE = 20
# The store lists at most MAX_LIMIT newest records in one call; the pages are cut from those.
BROWSE_WINDOW = MAX_LIMIT

BrowseScope = Literal["me", "org", "channel"]


@dataclass(frozen=True, slots=True)
class BrowseRequest:
    viewer: str  # platform-namespaced, e.g. `slack:U0123`
    scope: BrowseScope = "me"
    channel: str | None = None  # platform-namespaced channel id for scope "channel"
    page: int = 0
    query: str | None = None


@dataclass(frozen=True, slots=True)
class BrowsePage:
    """One page of what the viewer may see in one scope, newest first."""

    scope: BrowseScope
    scope_key: str | None
    records: tuple[MemoryRecord, ...] = ()
    page: int = 0
    has_previous: bool = False
    has_next: bool = False
    hidden: int = 0  # records the read rule keeps off this view (learned in a private conversation)
    capped: bool = False  # the store window was full: older records are reachable by searching
    problem: str | None = None  # a sentence for the viewer instead of records


class MemoryBrowser:
    """Pages of records for one viewer; admins (settings `admins`) may browse the shared scopes."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        memory_enabled: bool,
        organization: str | None,
        admins: Iterable[str],
    ) -> None:
        self._store = store
        self.enabled = memory_enabled
        self._org_key = _scope_key("org", organization)
        # The admin rule is memory forget's own (one place decides who curates shared scopes).
        self._commands = MemoryCommands(
            store=store, memory_enabled=memory_enabled, organization=organization, admins=admins
        )

    def is_admin(self, viewer: str) -> bool:
        caller = Caller(user_id=viewer, channel_id=None, channel_visibility="dm", thread_key="", surface="")
        return self._commands.is_admin(caller)

    async def page(self, request: BrowseRequest) -> BrowsePage:
        scope = request.scope if request.scope == "me" or self.is_admin(request.viewer) else "me"
        key = self._key(scope, request)
        if key is None:
            missing = "a channel picked" if scope == "channel" else "an organization configured"
            return BrowsePage(scope, None, problem=f"There is no {scope} scope to show without {missing}.")
        if request.query is not None and not query_tokens(request.query):
            return BrowsePage(
                scope, key, problem="That search has no words to match (records match on whole words)."
            )
        try:
            query = widened_filter(request.query) if request.query is not None else None
            window = await self._store.list(key, BROWSE_WINDOW, query=query)
        except Exception as error:
            log.warning("memory.browse_failed", scope_key=key, error=type(error).__name__)
            return BrowsePage(
                scope, key, problem=f"⚠️ Couldn't read memory: the store failed ({type(error).__name__})."
            )
        reader = Reader(audience="self", user_id=request.viewer, conversation_id=None)
        visible = [record for record in window if may_show(record, reader)]
        last_page = max(0, (len(visible) - 1) // PAGE_SIZE)
        page = min(max(0, request.page), last_page)
        shown = tuple(visible[page * PAGE_SIZE : (page + 1) * PAGE_SIZE])
        log.info(
            "memory.browse",
            viewer=_scope_key("user", request.viewer),
            scope_key=key,
            page=page,
            count=len(shown),
            hidden=len(window) - len(visible),
            filtered=request.query is not None,
        )
        return BrowsePage(
            scope,
            key,
            shown,
            page=page,
            has_previous=page > 0,
            has_next=page < last_page,
            hidden=len(window) - len(visible),
            capped=len(window) >= BROWSE_WINDOW,
        )

    def _key(self, scope: BrowseScope, request: BrowseRequest) -> str | None:
        if scope == "me":
            return _scope_key("user", request.viewer)
        if scope == "org":
            return self._org_key
        return _scope_key("channel", request.channel)


def _scope_key(kind: Literal["user", "org", "channel"], value: str | None) -> str | None:
    if not value:
        return None
    try:
        return derive_scope_key(kind, value)
    except ValueError:
        return None
