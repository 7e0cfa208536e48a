"""Slack event payloads → the bot's own terms: identities, visibility, addressing, thread history.

Pure functions over the JSON Slack sends; the Slack adapter (app/slack/routing.py and the
listeners) does the I/O around them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from app.incoming import ChannelVisibility, HistoryTurn

SURFACE = "slack"

# `message` subtypes that are still a person talking to the bot; every other subtype (edits, deletions,
# joins, bot_message, …) is not a new message.
CONVERSATIONAL_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})

_CHANNEL_TYPE_VISIBILITY: dict[str, ChannelVisibility] = {
    "channel": "public",
    "group": "private",
    "im": "dm",
    "mpim": "mpim",
}


@dataclass(frozen=True, slots=True)
class SlackIdentity:
    """Platform-namespaced ids: `slack:U…` / `slack:C…`, or `slack:T…:U…` when one app serves several
    workspaces (Slack ids are only unique inside a workspace)."""

    multi_workspace: bool = False

    def _qualify(self, team_id: str | None, local_id: str) -> str:
        if self.multi_workspace and team_id:
            return f"{SURFACE}:{team_id}:{local_id}"
        return f"{SURFACE}:{local_id}"

    def user(self, team_id: str | None, user_id: str | None) -> str | None:
        return self._qualify(team_id, user_id) if user_id else None

    def person(self, payload: Mapping[str, Any], user_id: str | None, workspace: str | None) -> str | None:
        """The one way a surface names the person behind an event, click or command: under their own
        team (`user_team`), so a Slack Connect user's messages, `/memory`, Home tab and Forget agree."""
        return self.user(user_team(payload, workspace), user_id)

    def channel(self, team_id: str | None, channel_id: str | None) -> str | None:
        return self._qualify(team_id, channel_id) if channel_id else None

    def thread_key(self, team_id: str | None, channel_id: str, thread_ts: str) -> str:
        return f"{self._qualify(team_id, channel_id)}:{thread_ts}"


def user_team(payload: Mapping[str, Any], workspace: str | None) -> str | None:
    """The team of the person behind a payload — an event's `user_team`, an interaction's
    `user.team_id` — else the workspace the payload came through (a slash command's `team_id`)."""
    person = payload.get("user")
    for team in (payload.get("user_team"), person.get("team_id") if isinstance(person, Mapping) else None):
        if isinstance(team, str) and team:
            return team
    return workspace


def from_another_organization(
    body: Mapping[str, Any], event: Mapping[str, Any], workspace: str | None
) -> bool:
    """The person behind an event belongs to a team other than the workspace it came through: a member
    of another organization (Slack Connect), whatever the envelope says of the conversation (a DM with
    the bot too). Inside an Enterprise Grid org (the envelope names an enterprise) the teams are the
    org's own workspaces: there the conversation's flags alone decide. (An event's envelope names it
    `enterprise_id`; a click's or a modal's payload, `enterprise`.)"""
    if body.get("enterprise_id") or body.get("enterprise"):
        return False
    team = user_team(event, workspace)
    return bool(team and workspace and team != workspace)


def visibility_from_channel_type(channel_type: object, ext_shared: object = None) -> ChannelVisibility | None:
    """The `channel_type` of a `message` event (`channel`, `group`, `im`, `mpim`), with its envelope's
    `is_ext_shared_channel`: a conversation shared with another organization (Slack Connect) is
    `external` whatever its type, on an event that names no type (an `app_mention`) too. An envelope
    without the flag is read by its type alone (Slack sends it on every event)."""
    if ext_shared is True:
        return "external"
    return _CHANNEL_TYPE_VISIBILITY.get(channel_type) if isinstance(channel_type, str) else None


def visibility_from_conversation(info: Mapping[str, Any]) -> ChannelVisibility | None:
    """The `channel` object of `conversations.info`. Shared with another organization (`is_ext_shared`,
    or `is_pending_ext_shared`: an invitation away from it) comes first: `external`, whatever its
    kind. `is_shared` alone is no other organization (workspaces of one Enterprise Grid org)."""
    if info.get("is_ext_shared") or info.get("is_pending_ext_shared"):
        return "external"
    if info.get("is_im"):
        return "dm"
    if info.get("is_mpim"):
        return "mpim"
    if info.get("is_private") or info.get("is_group"):
        return "private"
    if info.get("is_channel"):
        return "public"
    return None


# Slack's word that a channel's sharing with another organization changed (Slack Connect).
SHARING_EVENTS = (
    "channel_shared",
    "channel_unshared",
    "shared_channel_invite_accepted",
    "shared_channel_invite_approved",
)


def sharing_change(event: Mapping[str, Any]) -> tuple[str, bool] | None:
    """(channel, shared with another organization now) from one of SHARING_EVENTS; None when it names
    no channel. `channel_shared` (another organization joined) and an accepted or approved
    invitation (whose `channel` is an object, not an id) share it; `channel_unshared` says with its
    `is_ext_shared` whether another organization is still in it."""
    channel = event.get("channel")
    if isinstance(channel, Mapping):
        channel = channel.get("id")
    if not isinstance(channel, str) or not channel:
        return None
    if event.get("type") == "channel_unshared":
        return channel, event.get("is_ext_shared") is True
    return channel, True


def visibility_from_slash_channel(channel_id: str, channel_name: str | None) -> ChannelVisibility | None:
    """A slash command's best guess when `conversations.info` cannot see the channel."""
    if channel_name == "directmessage" or channel_id.startswith("D"):
        return "dm"
    if channel_name == "privategroup":
        return "private"
    if channel_name and channel_name.startswith("mpdm-"):
        return "mpim"
    return None


def mention_token(user_id: str) -> re.Pattern[str]:
    return re.compile(rf"<@{re.escape(user_id)}(?:\|[^>]*)?>")


def mentions_user(text: str, user_id: str | None) -> bool:
    return bool(user_id) and mention_token(user_id or "").search(text) is not None


def addressed_to_someone_else(text: str, bot_user_id: str | None) -> bool:
    """`<@U0OTHER> what do you think?` in a bot thread is for that person, not the bot."""
    match = re.match(r"^\s*<@([A-Z0-9]+)(?:\|[^>]*)?>", text)
    return match is not None and match.group(1) != bot_user_id


def strip_leading_mention(text: str, user_id: str | None) -> str:
    """`<@BOT> hello` → `hello` (also `<@BOT|name>:`, `<@BOT>,`); mentions later in the text stay."""
    text = text.strip()
    if not user_id:
        return text
    match = re.match(rf"^<@{re.escape(user_id)}(?:\|[^>]*)?>[\s:,]*", text)
    return text[match.end() :].strip() if match else text


_SLACK_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)\|([^>]*)>")
_SLACK_BARE_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)>")
_SLACK_CHANNEL = re.compile(r"<#(C[A-Z0-9]+)(?:\|([^>]*))?>")
_SLACK_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")


def slack_text_to_plain(text: str) -> str:
    """Slack's wire text → what a person typed: links unwrapped, `&lt;` back to `<`. User mentions
    (`<@U…>`) stay so the model can address people the Slack way."""
    text = _SLACK_LINK.sub(_unwrap_link, text)
    text = _SLACK_BARE_LINK.sub(lambda m: m.group(1), text)
    text = _SLACK_CHANNEL.sub(lambda m: f"#{m.group(2) or m.group(1)}", text)
    text = _SLACK_SPECIAL.sub(lambda m: f"@{m.group(1)}", text)
    return html.unescape(text) if "&" in text else text


def _unwrap_link(match: re.Match[str]) -> str:
    url, label = match.group(1), match.group(2)
    return label if label == url or not label else f"{label} ({url})"


def message_text(event: Mapping[str, Any], bot_user_id: str | None) -> str:
    """The text the bot answers: plain, without the leading mention of the bot."""
    raw = event.get("text")
    return slack_text_to_plain(strip_leading_mention(raw if isinstance(raw, str) else "", bot_user_id))


SkipReason = Literal["self", "bot", "subtype", "no_user", "no_channel"]


def skip_reason(
    event: Mapping[str, Any], *, bot_user_id: str | None, bot_id: str | None, allow_bots: bool
) -> SkipReason | None:
    """Why an event is not a person talking to the bot (None → it is)."""
    if not event.get("channel"):
        return "no_channel"
    user = event.get("user")
    if (bot_user_id and user == bot_user_id) or (bot_id and event.get("bot_id") == bot_id):
        return "self"
    subtype = event.get("subtype")
    if event.get("type") == "message" and subtype not in CONVERSATIONAL_SUBTYPES:
        if subtype == "bot_message" and allow_bots:
            return None if user or event.get("bot_id") else "no_user"
        return "bot" if subtype == "bot_message" else "subtype"
    if event.get("bot_id") and not allow_bots:
        return "bot"
    if not user and not (allow_bots and event.get("bot_id")):
        return "no_user"
    return None


def thread_root(event: Mapping[str, Any]) -> str:
    """The conversation's root ts: a thread's parent, or the message itself when it starts one."""
    return str(event.get("thread_ts") or event.get("ts") or "")


def is_thread_reply(event: Mapping[str, Any]) -> bool:
    thread_ts = event.get("thread_ts")
    return bool(thread_ts) and thread_ts != event.get("ts")


def is_own_message(message: Mapping[str, Any], bot_user_id: str | None, bot_id: str | None) -> bool:
    return bool(
        (bot_user_id and message.get("user") == bot_user_id) or (bot_id and message.get("bot_id") == bot_id)
    )


def thread_has_bot(
    messages: Iterable[Mapping[str, Any]], bot_user_id: str | None, bot_id: str | None
) -> bool:
    return any(is_own_message(message, bot_user_id, bot_id) for message in messages)


def _ts_key(ts: object) -> tuple[int, int]:
    """Slack timestamps compare numerically (`1700000000.000100`), never as floats."""
    seconds, _, fraction = str(ts).partition(".")
    try:
        return int(seconds), int(fraction.ljust(6, "0")[:6])
    except ValueError:
        return (0, 0)


def history_from_replies(
    messages: Iterable[Mapping[str, Any]],
    *,
    current_ts: str,
    bot_user_id: str | None,
    bot_id: str | None,
    max_turns: int,
    max_chars: int,
    asker: str | None = None,
) -> tuple[HistoryTurn, ...]:
    """A thread's earlier messages as model turns: the bot's own as assistant turns, everyone else's as
    user turns, oldest first, each marked when `asker` (the Slack user id of the message being
    answered) wrote it. Only messages before the one being answered count; a long thread keeps its
    newest turns within `max_turns` / `max_chars` and says how many older ones were left out."""
    current = _ts_key(current_ts)
    turns: list[HistoryTurn] = []
    for message in sorted(messages, key=lambda m: _ts_key(m.get("ts"))):
        if _ts_key(message.get("ts")) >= current:
            continue
        subtype = message.get("subtype")
        own = is_own_message(message, bot_user_id, bot_id)
        if not own and subtype not in CONVERSATIONAL_SUBTYPES and subtype != "bot_message":
            continue
        text = message_text(message, bot_user_id).strip()
        if not text:
            continue
        by_asker = (
            not own and asker is not None and message.get("user") == asker and not message.get("bot_id")
        )
        turns.append(HistoryTurn(role="assistant" if own else "user", text=text, by_requester=by_asker))
    kept: list[HistoryTurn] = []
    used = 0
    for turn in reversed(turns):
        if len(kept) >= max_turns or used + len(turn.text) > max_chars:
            break
        kept.append(turn)
        used += len(turn.text)
    kept.reverse()
    omitted = len(turns) - len(kept)
    if omitted:
        note = HistoryTurn(
            role="user",
            text=f"[{omitted} earlier message{'s' if omitted != 1 else ''} of this Slack thread left out "
            "to keep the conversation short]",
        )
        kept.insert(0, note)
    return tuple(kept)
