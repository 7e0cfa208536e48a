"""The review digest in Slack: one DM to an admin saying what waits for review, with a link to the
App Home where the review section is (app/slack/home/review.py).

The DM carries counts, scopes and dates only (memory/rules/review_digest.py), never a record's text.
A channel scope is named as a channel mention (`<#C0123>`): Slack itself shows its name only to
those who may see the channel, and "a private channel" to anyone else.

The DM's conversation comes from `conversations.open` (scope `im:write`); the link is Slack's App
Home deep link, `slack://app?team=T…&id=A…&tab=home`, whose app id comes from `auth.test` or, where
that does not say it, `bots.info` (scope `users:read`). Without an app id the DM still goes out, and
says where to look.
"""

from __future__ import annotations

import re
import time
from urllib.parse import urlencode

import structlog
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from app.slack.events import SURFACE
from memory.rules.review_digest import PendingDigest, age_words

log = structlog.get_logger("slack")

_ADMIN = re.compile(rf"^user:{SURFACE}:(?:(T[A-Z0-9]+):)?([UW][A-Z0-9]+)$")
_CHANNEL_SCOPE = re.compile(rf"^channel:{SURFACE}:(?:T[A-Z0-9]+:)?([CG][A-Z0-9]+)$")
_SCOPES_SHOWN = 10


def home_link(team_id: str, app_id: str) -> str:
    """Slack's deep link to the app's Home tab in one workspace."""
    return "slack://app?" + urlencode({"team": team_id, "id": app_id, "tab": "home"})


def digest_text(digest: PendingDigest, now: float, link: str | None) -> str:
    """The DM: how many wait, where, the oldest's age and expiry, and where to review them."""
    many = "record waits" if digest.total == 1 else "records wait"
    floor = "At least " if digest.at_least else ""
    lines = [f":inbox_tray: {floor}{digest.total} {many} for your review in shared memory:"]
    lines += [f"• {_scope_name(key)}: {count}" for key, count in digest.scopes[:_SCOPES_SHOWN]]
    if len(digest.scopes) > _SCOPES_SHOWN:
        lines.append(f"• and {len(digest.scopes) - _SCOPES_SHOWN} more scopes")
    expiry = _date(digest.expires_at)
    lines.append(
        f"The oldest has waited {age_words(now - digest.oldest_at)}; unless someone reviews it, it "
        f"expires in {age_words(digest.expires_at - now)} ({expiry})."
    )
    where = f"<{link}|App Home>" if link else "App Home (my Home tab)"
    lines.append(f"Approve, edit or reject them in the review section of my {where}.")
    return "\n".join(lines)


def _scope_name(scope_key: str) -> str:
    channel = _CHANNEL_SCOPE.match(scope_key)
    if channel:
        return f"<#{channel.group(1)}>"
    escaped = scope_key.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"`{escaped}`"


def _date(epoch: float) -> str:
    """Slack's date token: shown in the reader's own time zone, the UTC text where it cannot be."""
    fallback = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))
    return f"<!date^{int(epoch)}^{{date_short_pretty}} {{time}}|{fallback}>"


class SlackDigestSender:
    """Reaches the Slack admins (`user:slack:U…`, `user:slack:T…:U…`) by DM."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._home: tuple[str, str] | None = None  # (team id, app id) once known

    def reaches(self, admin: str) -> bool:
        return _ADMIN.match(admin) is not None

    async def send(self, admin: str, digest: PendingDigest, now: float) -> None:
        matched = _ADMIN.match(admin)
        if matched is None:
            raise ValueError("not a Slack admin")
        team, user = matched.group(1), matched.group(2)
        link = await self._link(team)
        opened = await self._client.conversations_open(users=user)
        channel = str((opened.get("channel") or {}).get("id") or "")
        if not channel:
            raise SlackClientError("conversations.open returned no channel")
        text = digest_text(digest, now, link)
        await self._client.chat_postMessage(channel=channel, text=text, unfurl_links=False)
        log.info("slack.review_digest_sent", channel=channel, waiting=digest.total, link=link is not None)

    async def _link(self, team: str | None) -> str | None:
        """The App Home link, in the admin's own workspace where their id names one."""
        if self._home is None:
            try:
                self._home = await self._app_home()
            except SlackClientError as error:
                log.warning("slack.home_link_failed", error=type(error).__name__)
                return None
        if self._home is None:
            return None
        return home_link(team or self._home[0], self._home[1])

    async def _app_home(self) -> tuple[str, str] | None:
        identity = await self._client.auth_test()
        team, app = str(identity.get("team_id") or ""), str(identity.get("app_id") or "")
        bot = str(identity.get("bot_id") or "")
        if not app and bot:  # auth.test does not always say the app: the bot's record does
            info = await self._client.bots_info(bot=bot)
            app = str((info.get("bot") or {}).get("app_id") or "")
        if not team or not app:
            log.warning("slack.home_link_failed", error="no_app_id" if team else "no_team_id")
            return None
        return team, app
