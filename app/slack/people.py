"""Who is asking, as memory reads them: a member of the organization, or an outsider.

An outsider is read like a member of another organization wherever they ask: a reply to them shows
only what was learned in the conversation they are in, never the organization's own records, and what
they teach stays there (the conversation reads as `external`, memory/rules/visibility.py). Two kinds:

- a member of another organization (Slack Connect): their own team is not the workspace's — the
  payload's `user_team` / `user.team_id` when it names one, else `users.info`'s `team_id`;
- a guest of the workspace: `users.info` marks them `is_restricted` (a multi-channel guest) or
  `is_ultra_restricted` (a single-channel guest).

Inside an Enterprise Grid org the teams are the org's own workspaces: there only the guest flags count.
What `users.info` said is cached per person for a few minutes (it is Tier 4: 100+ calls a minute). A
person it cannot tell about (an error, Slack unreachable) is read as an outsider: that shows less,
never more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from app.incoming import ChannelVisibility
from app.slack.conversations import Conversations
from app.slack.events import from_another_organization
from app.slack.state import TtlCache

log = structlog.get_logger("slack")


# How long a person `users.info` could not tell about reads as an outsider before it is asked again.
FAILURE_TTL_SECONDS = 30.0


class People:
    """Whether the person behind a payload is an outsider, from the payload and `users.info`."""

    def __init__(
        self, client: AsyncWebClient, *, ttl_seconds: float, failure_ttl_seconds: float = FAILURE_TTL_SECONDS
    ) -> None:
        self._client = client
        self._outsiders: TtlCache[bool] = TtlCache(ttl=ttl_seconds, max_size=20_000)
        # A lookup that failed reads as an outsider only briefly: a member is not read as one (and what
        # they teach not kept narrow) for the whole `ttl_seconds` over one error or rate limit.
        self._unknown: TtlCache[bool] = TtlCache(ttl=min(failure_ttl_seconds, ttl_seconds), max_size=20_000)

    async def outsider(
        self, body: Mapping[str, Any], payload: Mapping[str, Any], user: str | None, workspace: str | None
    ) -> bool:
        """True for a member of another organization or a guest of the workspace (see the module)."""
        if from_another_organization(body, payload, workspace):
            return True
        if not user:
            return False
        key = f"{workspace}:{user}"  # one person may be a member of one workspace, a guest of another
        cached = self._outsiders.get(key)
        if cached is not None:
            return cached
        if key in self._unknown:
            return True
        found = await self._look_up(body, user, workspace)
        if found is None:  # fail closed, and ask again soon
            self._unknown.put(key, True)
            return True
        self._outsiders.put(key, found)
        return found

    def forget(self, workspace: str | None, user: str) -> None:
        """Slack said this person changed (`user_change`): the next payload asks again."""
        self._outsiders.discard(f"{workspace}:{user}")
        self._unknown.discard(f"{workspace}:{user}")

    async def _look_up(self, body: Mapping[str, Any], user: str, workspace: str | None) -> bool | None:
        """What `users.info` says, or None when it cannot say (an error, no user in the answer)."""
        try:
            response = await self._client.users_info(user=user)
        except SlackClientError as error:
            log.warning("slack.user_info_failed", user=user, error=type(error).__name__)
            return None
        person = response.get("user")
        if not isinstance(person, Mapping):
            log.warning("slack.user_info_failed", user=user, error="no_user")
            return None
        guest = person.get("is_restricted") is True or person.get("is_ultra_restricted") is True
        # The same rule as a payload's own team: `users.info` names it where the payload does not.
        elsewhere = from_another_organization(body, {"user_team": person.get("team_id")}, workspace)
        log.info("slack.person", user=user, guest=guest, other_organization=elsewhere)
        return guest or elsewhere


async def asker_visibility(
    people: People,
    conversations: Conversations,
    payload: Mapping[str, Any],
    *,
    user: str | None,
    workspace: str | None,
    channel: str | None,
) -> ChannelVisibility | None:
    """The visibility a reply only its asker sees (a slash command's, *Why?*'s) is read under: the
    channel's, or `external` for an outsider wherever they ask (a DM with the bot too)."""
    outsider = await people.outsider(payload, payload, user, workspace)
    if not channel:
        return "external" if outsider else None
    return await conversations.visibility(channel, None, outsider)
