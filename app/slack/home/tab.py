"""The App Home memory browser: publish the viewer's page, and answer its buttons.

Reading goes through commands/browse.py (the read rule with the viewer as the only reader); a Forget
goes through the command registry as `memory forget <id>` — the same authorization, receipt and
`memory.forget` event as typing it — and the tab is re-published. Approve and Reject (the review
section admins get under `memory.review = "shared"`) are `memory approve <id>` / `memory reject <id>`
the same way. "Add to memory" and Edit open a modal whose submission goes through the registry as
`memory remember` / `memory edit <id> -- <text>`. Links to source threads come from
`chat.getPermalink`, cached.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from app.slack.agent_view import set_suggested_prompts
from app.slack.events import SURFACE, SlackIdentity, user_team
from app.slack.home.edit import EDIT_ACTION, edit_modal, edit_submission, editable_here
from app.slack.home.review import APPROVE_ACTION, MOST_SHOWN, REJECT_ACTION
from app.slack.home.view import (
    ADD_ACTION,
    CHANNEL_ACTION,
    FORGET_ACTION,
    PAGE_ACTION,
    SCOPE_ACTION,
    SEARCH_ACTION,
    HomeState,
    add_modal,
    add_submission,
    clean_query,
    decode_state,
    home_view,
    memory_off_view,
)
from app.slack.people import People
from app.slack.state import TtlCache
from app.slack.tasks import Spawn
from commands.browse import BrowseRequest, MemoryBrowser
from commands.registry import CommandHandler
from memory.rules.engine import parse_record_id
from memory.rules.scope import scope_kind
from memory.types import MemoryRecord

log = structlog.get_logger("slack")

# The tab's actions as a "thread" (the source a note added here records): the same for everyone, so
# a shared record never names the person who added it outside the curation log, which their erasure
# renames.
HOME_THREAD = f"{SURFACE}:home"
_RECORD_ID = re.compile(r"^mem:[A-Za-z0-9:_./@-]{1,300}$")
_CHANNEL_ID = re.compile(r"^[CDG][A-Z0-9]{1,30}$")
_TS = re.compile(r"^[0-9]{6,12}\.[0-9]{1,9}$")
# A click on one record → the command it runs on that record's id.
_RECORD_VERBS = {FORGET_ACTION: "forget", APPROVE_ACTION: "approve", REJECT_ACTION: "reject"}


def thread_location(thread_key: str) -> tuple[str, str] | None:
    """`slack:C0123:1700000000.000100` (or `slack:T…:C…:ts`) → (channel, ts); None for other surfaces."""
    parts = thread_key.split(":")
    if len(parts) < 3 or parts[0] != SURFACE:
        return None
    channel, ts = parts[-2], parts[-1]
    return (channel, ts) if _CHANNEL_ID.match(channel) and _TS.match(ts) else None


class Permalinks:
    """Source-thread links, cached (a failure is cached briefly too, so a page never hammers Slack)."""

    def __init__(self, client: AsyncWebClient, *, ttl: float = 24 * 3600, max_size: int = 5_000) -> None:
        self._client = client
        self._cache: TtlCache[str] = TtlCache(ttl=ttl, max_size=max_size)
        self._misses: TtlCache[bool] = TtlCache(ttl=300, max_size=max_size)

    async def links(self, thread_keys: Sequence[str]) -> dict[str, str]:
        wanted = sorted(set(thread_keys))
        found = await asyncio.gather(*(self._link(key) for key in wanted))
        return {key: url for key, url in zip(wanted, found, strict=True) if url}

    async def _link(self, thread_key: str) -> str | None:
        cached = self._cache.get(thread_key)
        if cached is not None:
            return cached
        location = thread_location(thread_key)
        if location is None or thread_key in self._misses:
            return None
        try:
            response = await self._client.chat_getPermalink(channel=location[0], message_ts=location[1])
        except SlackClientError as error:
            log.info("slack.permalink_failed", channel=location[0], error=type(error).__name__)
            self._misses.put(thread_key, True)
            return None
        url = str(response.get("permalink") or "")
        if not url.startswith("https://") and not url.startswith("http://"):
            self._misses.put(thread_key, True)
            return None
        self._cache.put(thread_key, url)
        return url

    async def permalink(self, thread_key: str) -> str | None:
        """One source thread's link (commands/provenance.py's `Permalinks`: `memory why`, Why?)."""
        return await self._link(thread_key)


class HomeTab:
    """Publishes and updates each person's home tab."""

    def __init__(
        self,
        *,
        client: AsyncWebClient,
        browser: MemoryBrowser | None,
        registry: CommandHandler | None,
        caller_factory: Callable[..., Any],
        identity: SlackIdentity,
        people: People,
    ) -> None:
        self._client = client
        self._people = people
        self._browser = browser
        self._registry = registry
        self._caller_factory = caller_factory
        self._identity = identity
        self._permalinks = Permalinks(client)

    def opened(
        self, body: Mapping[str, Any], event: Mapping[str, Any], team_id: str | None, spawn: Spawn
    ) -> None:
        """`app_home_opened`: the Home tab gets its page, the Messages tab (the Agent messaging
        experience's DM) gets the suggested prompts."""
        user = str(event.get("user") or "")
        team_id = body.get("team_id") or team_id
        tab = event.get("tab")
        log.info("slack.event", event_id=body.get("event_id"), event_type="app_home_opened", tab=tab)
        if not user:
            return
        if tab == "home":
            home = self.publish(team_id, user, HomeState(), user_team=user_team(event, team_id), body=body)
            spawn(home, name="slack-home-publish")
        elif tab == "messages" and event.get("channel"):
            spawn(set_suggested_prompts(self._client, str(event["channel"])), name="slack-prompts")

    async def publish(
        self,
        team_id: str | None,
        user: str,
        state: HomeState,
        notice: str | None = None,
        *,
        user_team: str | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        """The tab for `user` of team `user_team` (their own; None: the workspace `team_id`), from the
        payload `body` that asked for it (an event's envelope, a click)."""
        browser = self._browser
        waiting: tuple[MemoryRecord, ...] = ()
        if browser is None or not browser.enabled:
            view = memory_off_view()
            count = 0
        else:
            viewer = self._identity.user(user_team or team_id, user) or ""
            payload = body if body is not None else {"user_team": user_team}
            admin = await self._curator(browser, payload, viewer, user, team_id)
            if not admin:
                state = HomeState(page=state.page, query=state.query)  # people browse only their own
            channel = self._identity.channel(team_id, state.channel)
            request = BrowseRequest(
                viewer=viewer, scope=state.scope, channel=channel, page=state.page, query=state.query
            )
            page, review = await asyncio.gather(
                browser.page(request),
                browser.waiting(viewer, channel if state.scope == "channel" else None) if admin else _none(),
            )
            state = HomeState(
                page.scope, state.channel if page.scope == "channel" else None, page.page, state.query
            )
            waiting = review.records[:MOST_SHOWN] if review is not None else ()
            links = await self._permalinks.links([r.source_thread_key for r in (*waiting, *page.records)])
            view = home_view(
                page,
                state,
                admin=admin,
                links=links,
                notice=notice,
                review=review,
                editable=browser.curates,
            )
            count = len(page.records)
        try:
            await self._client.views_publish(user_id=user, view=view)
        except SlackClientError as error:
            log.warning("slack.home_publish_failed", user=user, error=type(error).__name__)
            return
        log.info(
            "slack.home_published",
            user=user,
            scope=state.scope,
            page=state.page,
            records=count,
            waiting=len(waiting),
        )

    async def _curator(
        self,
        browser: MemoryBrowser,
        payload: Mapping[str, Any],
        viewer: str,
        user: str,
        team_id: str | None,
    ) -> bool:
        """An admin who may see and curate the shared scopes here. An outsider (a guest, another
        organization's member) never is, even when named an admin: their tab is theirs alone."""
        if not browser.is_admin(viewer):
            return False
        return not await self._people.outsider(payload, payload, user, team_id)

    async def on_action(self, body: Mapping[str, Any], action: Mapping[str, Any]) -> None:
        """One click or search in the tab (already acknowledged)."""
        user, team_id = _clicker(body)
        viewer_team = user_team(body, team_id)  # channels are the workspace's; the viewer is their team's
        if not user:
            log.warning("slack.home_action_refused", reason="no_user")
            return
        state = decode_state((body.get("view") or {}).get("private_metadata"))
        action_id = str(action.get("action_id") or "")
        if action_id in _RECORD_VERBS:
            record_id = str(action.get("value") or "")
            verb = _RECORD_VERBS[action_id]
            await self._on_record(body, team_id, viewer_team, user, state, verb, record_id)
            return
        if action_id == ADD_ACTION:
            await self._open_add(body, viewer_team, user, state)
            return
        if action_id == EDIT_ACTION:
            await self._open_edit(body, team_id, viewer_team, user, state, str(action.get("value") or ""))
            return
        if action_id.startswith(PAGE_ACTION):
            value = str(action.get("value") or "0")
            state = HomeState(state.scope, state.channel, int(value) if value.isdigit() else 0, state.query)
        elif action_id == SEARCH_ACTION:
            state = HomeState(state.scope, state.channel, 0, clean_query(action.get("value")))
        elif action_id.startswith(SCOPE_ACTION):
            state = HomeState("org" if action.get("value") == "org" else "me", None, 0, None)
        elif action_id == CHANNEL_ACTION:
            channel = str(action.get("selected_conversation") or "")
            if not _CHANNEL_ID.match(channel):
                log.warning("slack.home_action_refused", user=user, reason="bad_channel")
                return
            state = HomeState("channel", channel, 0, None)
        await self.publish(team_id, user, state, user_team=viewer_team, body=body)

    async def _open_add(
        self, body: Mapping[str, Any], viewer_team: str | None, user: str, state: HomeState
    ) -> None:
        """The "Add to memory" modal; only admins get its scope choice (the command checks again)."""
        browser = self._browser
        trigger = str(body.get("trigger_id") or "")
        if browser is None or not browser.enabled or not trigger:
            log.warning("slack.home_action_refused", user=user, reason="add_unavailable")
            return
        viewer = self._identity.user(viewer_team, user) or ""
        admin = await self._curator(browser, body, viewer, user, _clicker(body)[1])
        try:
            await self._client.views_open(trigger_id=trigger, view=add_modal(state, admin=admin))
        except SlackClientError as error:
            log.warning("slack.home_add_open_failed", user=user, error=type(error).__name__)

    async def on_add(self, body: Mapping[str, Any], view: Mapping[str, Any]) -> None:
        """The submitted modal (already acknowledged): `memory remember`, then the tab re-drawn."""
        user, team_id = _clicker(body)
        if not user or self._registry is None:
            log.warning("slack.home_action_refused", reason="add_without_user")
            return
        viewer_team = user_team(body, team_id)
        text, scope = add_submission(view)
        # The tab is no conversation. A note for oneself is private to its owner (`dm`: never in a
        # public channel's prompt); an admin's note for the organization was written for everyone in
        # it, like the terminal's words (the gate, not this surface, keeps it from landing wider). An
        # outsider's words are never the organization's: as from their DM, the gate keeps them theirs.
        personal = scope == "me" or await self._people.outsider(body, body, user, team_id)
        caller = self._caller_factory(
            user_id=self._identity.user(viewer_team, user),
            channel_id=None,
            channel_visibility="dm" if personal else "machine",
            thread_key=HOME_THREAD,
            surface=SURFACE,
        )
        reply = await self._registry.handle(f"memory remember --scope {scope} -- {text}", caller)
        outcome = getattr(getattr(reply, "receipt", None), "outcome", None)
        log.info("slack.home_add", user=user, scope=scope, outcome=outcome)
        notice = reply.text if reply is not None else None
        state = decode_state(view.get("private_metadata"))
        await self.publish(team_id, user, state, notice=notice, user_team=viewer_team, body=body)

    async def _open_edit(
        self,
        body: Mapping[str, Any],
        team_id: str | None,
        viewer_team: str | None,
        user: str,
        state: HomeState,
        record_id: str,
    ) -> None:
        """The Edit modal, prefilled with the record's text; the tab shows why when there is none
        (not the viewer's to edit, no longer there, too long for Slack's text box)."""
        browser = self._browser
        trigger = str(body.get("trigger_id") or "")
        if browser is None or not browser.enabled or not trigger:
            log.warning("slack.home_action_refused", user=user, reason="edit_unavailable")
            return
        found = await browser.editable(self._identity.user(viewer_team, user) or "", record_id)
        if isinstance(found, str) or not editable_here(found):
            reason = "edit_refused" if isinstance(found, str) else "edit_too_long"
            log.warning("slack.home_action_refused", user=user, reason=reason, id=record_id[:320])
            notice = found if isinstance(found, str) else _too_long(found.id)
            await self.publish(team_id, user, state, notice=notice, user_team=viewer_team, body=body)
            return
        try:
            await self._client.views_open(trigger_id=trigger, view=edit_modal(found, state))
        except SlackClientError as error:
            log.warning("slack.home_edit_open_failed", user=user, error=type(error).__name__)

    async def on_edit(self, body: Mapping[str, Any], view: Mapping[str, Any]) -> None:
        """The submitted Edit modal (already acknowledged): `memory edit`, then the tab re-drawn."""
        user, team_id = _clicker(body)
        if not user:
            log.warning("slack.home_action_refused", reason="edit_without_user")
            return
        submitted = edit_submission(view)
        await self._on_record(
            body,
            team_id,
            user_team(body, team_id),
            user,
            submitted.state,
            "edit",
            submitted.record_id,
            submitted.text,
        )

    async def _on_record(
        self,
        body: Mapping[str, Any],
        team_id: str | None,
        viewer_team: str | None,
        user: str,
        state: HomeState,
        verb: str,
        record_id: str,
        text: str | None = None,
    ) -> None:
        """`memory <verb> <id>` (an edit: `-- <text>`) through the registry, as if typed, then the tab
        re-drawn with its answer; the command decides who may, and says why not."""
        if not _RECORD_ID.match(record_id) or self._registry is None:
            log.warning("slack.home_action_refused", user=user, reason="bad_record_id", verb=verb)
            refusal = f"🚫 That is not a record id I can {verb}."
            await self.publish(team_id, user, state, notice=refusal, user_team=viewer_team, body=body)
            return
        if _shared(record_id) and await self._people.outsider(body, body, user, team_id):
            log.warning("slack.home_action_refused", user=user, reason="outsider_curation", verb=verb)
            refusal = f"🚫 {record_id} is the organization's: only its own members curate it."
            await self.publish(team_id, user, state, notice=refusal, user_team=viewer_team, body=body)
            return
        caller = self._caller_factory(
            user_id=self._identity.user(viewer_team, user),
            channel_id=None,
            channel_visibility=_record_visibility(verb, record_id),
            thread_key=HOME_THREAD,
            surface=SURFACE,
        )
        command = f"memory {verb} {record_id}" + (f" -- {text}" if text is not None else "")
        reply = await self._registry.handle(command, caller)
        outcome = getattr(getattr(reply, "receipt", None), "outcome", None)
        if outcome == "refused":  # e.g. a crafted click on another person's record
            log.warning("slack.home_action_refused", user=user, reason=f"{verb}_refused", id=record_id)
        log.info(f"slack.home_{verb}", user=user, id=record_id, outcome=outcome)
        notice = reply.text if reply is not None else None
        await self.publish(team_id, user, state, notice=notice, user_team=viewer_team, body=body)


def _clicker(body: Mapping[str, Any]) -> tuple[str, str | None]:
    """Who clicked or submitted (their user id) and the workspace it came through."""
    person = body.get("user") or {}
    team = str((body.get("team") or {}).get("id") or person.get("team_id") or "") or None
    return str(person.get("id") or ""), team


def _too_long(record_id: str) -> str:
    return (
        f"🚫 {record_id} is longer than Slack's text box holds: edit it with "
        f"`memory edit {record_id} -- <new text>`."
    )


async def _none() -> None:
    return None


def _shared(record_id: str) -> bool:
    """A record of a shared scope (the org, a repo, a channel): no one person's own."""
    parsed = parse_record_id(record_id)
    return parsed is not None and scope_kind(parsed[0]) != "user"


def _record_visibility(verb: str, record_id: str) -> str:
    """The tab is seen by the viewer alone (`dm`), except where an admin rewrites a shared record: the
    new words are written for the scope's audience, as the Add modal's org notes are (`machine`)."""
    return "machine" if verb == "edit" and _shared(record_id) else "dm"
