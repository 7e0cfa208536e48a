"""Browsing memory page by page, for a view only the viewer sees (Slack's App Home).

Surface-agnostic: which scopes a person may browse (their own; admins also the org and any channel),
the same whole-token filter as `memory list`, and the read rule (memory/visibility.py) with the
viewer as the only reader. Under review, admins also get what waits for them (`waiting`), and anyone
the current text of a record they may edit (`editable`, to prefill an editor). Changing anything is
not here: forget, edit, approve and reject go through their commands (commands/memory.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import structlog

from commands.access import curation_refusal, parse_id_word, scope_key_of
from commands.list_filter import widened_filter
from commands.memory import MemoryCommands
from commands.registry import Caller
from commands.replaced import Replaced, as_shown, replaced_records
from memory.rules.scorer import query_tokens
from memory.rules.visibility import Reader, may_show
from memory.stores.contract import MemoryStore
from memory.types import MAX_LIMIT, MemoryRecord

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


@dataclass(frozen=True, slots=True)
class ReviewQueue:
    """What waits for an admin's review in the scopes the view names, newest first."""

    records: tuple[MemoryRecord, ...] = ()
    hidden: int = 0  # learned in a private conversation: `memory pending` there lists them
    more: bool = False  # a scope had more waiting than one read returns
    problem: str | None = None  # a sentence for the viewer instead of records
    replaces: Mapping[str, Replaced] = field(default_factory=dict)  # by pending id: what it supersedes


class MemoryBrowser:
    """Pages of records for one viewer; admins (settings `admins`) may browse the shared scopes."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        memory_enabled: bool,
        organization: str | None,
        admins: Iterable[str],
        review: bool = False,
    ) -> None:
        self._store = store
        self.enabled = memory_enabled
        self.review = review and memory_enabled  # `memory.review = "shared"`: shared writes wait
        self._org_key = scope_key_of("org", organization)
        # The admin rule is memory forget's own (one place decides who curates shared scopes).
        self._commands = MemoryCommands(
            store=store, memory_enabled=memory_enabled, organization=organization, admins=admins
        )

    def is_admin(self, viewer: str) -> bool:
        return self._commands.is_admin(_caller(viewer))

    @property
    def curates(self) -> bool:
        """The store keeps versions and a review queue (`memory edit` and the review work on it)."""
        return self.enabled and self._store.curation() is not None

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
            viewer=scope_key_of("user", request.viewer),
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

    async def waiting(self, viewer: str, channel: str | None) -> ReviewQueue | None:
        """For an admin under review, the records waiting in the org and in `channel` (the one the
        view shows, platform-namespaced); None for everyone else (no review section at all)."""
        if not self.review or not self.is_admin(viewer):
            return None
        store = self._store.curation()
        if store is None:
            return ReviewQueue(problem="⚠️ This memory store cannot hold records for review.")
        keys = [key for key in (self._org_key, scope_key_of("channel", channel)) if key]
        reader = Reader(audience="self", user_id=viewer, conversation_id=None)
        try:
            found = await asyncio.gather(*(store.pending(key, MAX_LIMIT) for key in keys))
            shown = [[r for r in records if may_show(r, reader)] for records in found]
            targets = await asyncio.gather(
                *(replaced_records(store, key, records) for key, records in zip(keys, shown, strict=True))
            )
        except Exception as error:
            log.warning("memory.review_browse_failed", scopes=len(keys), error=type(error).__name__)
            return ReviewQueue(problem=f"⚠️ Couldn't read what waits for review ({type(error).__name__}).")
        window = [record for records in found for record in records]
        visible = sorted((record for records in shown for record in records), key=lambda r: -r.created_at)
        log.info(
            "memory.review_browse",
            viewer=scope_key_of("user", viewer),
            scopes=len(keys),
            count=len(visible),
            hidden=len(window) - len(visible),
        )
        return ReviewQueue(
            tuple(visible),
            hidden=len(window) - len(visible),
            more=any(len(records) >= MAX_LIMIT for records in found),
            replaces=as_shown({k: v for each in targets for k, v in each.items()}, reader),
        )

    async def editable(self, viewer: str, raw_id: str) -> MemoryRecord | str:
        """The active or pending record `viewer` may edit (their own; a shared one if they are an
        admin) and may see here, to prefill an editor; else the sentence why not (🚫 or ⚠️ first).
        The edit itself is `memory edit`, which decides again."""
        parsed = parse_id_word(raw_id)
        store = self._store.curation()
        if parsed is None or store is None or not self.enabled:
            return "🚫 That is not a record I can edit here."
        scope, record_id = parsed
        refusal = curation_refusal(
            scope, _caller(viewer), admin=self.is_admin(viewer), org_key=self._org_key, verb="edit"
        )
        if refusal is not None:
            return f"🚫 {refusal}"
        try:
            found = [r for r in await store.fetch(scope, [record_id]) if r.status == "active"]
            if not found and self.review:  # pending records are never fetched; only admins see them
                found = [r for r in await store.pending(scope, MAX_LIMIT) if r.id == record_id]
        except Exception as error:
            log.warning("memory.edit_lookup_failed", id=record_id, error=type(error).__name__)
            return f"⚠️ Couldn't read that record: the store failed ({type(error).__name__})."
        if not found:
            return f"🚫 There is no record {record_id} to edit (it may have been changed or forgotten)."
        if not may_show(found[0], Reader(audience="self", user_id=viewer, conversation_id=None)):
            return "🚫 That record was learned in a private conversation: edit it there with `memory edit`."
        return found[0]

    def _key(self, scope: BrowseScope, request: BrowseRequest) -> str | None:
        if scope == "me":
            return scope_key_of("user", request.viewer)
        if scope == "org":
            return self._org_key
        return scope_key_of("channel", request.channel)


def _caller(viewer: str) -> Caller:
    return Caller(user_id=viewer, channel_id=None, channel_visibility="dm", thread_key="", surface="")
