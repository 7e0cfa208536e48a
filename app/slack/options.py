"""The Slack adapter's knobs (the `slack` settings section maps onto these)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.slack.surface import ReplyOptions


@dataclass(frozen=True, slots=True)
class SlackOptions:
    """How the adapter answers and how long it remembers what it has seen."""

    multi_workspace: bool = False
    allow_bots: bool = False
    history_max_turns: int = 40
    history_max_chars: int = 24_000
    reply: ReplyOptions = field(default_factory=ReplyOptions)
    slash_command: str = "/memory"
    dedupe_ttl_seconds: float = 6 * 3600
    dedupe_max_entries: int = 50_000
    thread_memory_ttl_seconds: float = 7 * 24 * 3600
    thread_memory_max_entries: int = 20_000
    # A channel's visibility from conversations.info is trusted this long: a conversion inside the
    # window is caught by the next message event's channel_type (which refreshes the entry), not later.
    channel_cache_ttl_seconds: float = 60
    # Whether a person is a guest or of another organization (users.info) is trusted this long; Slack's
    # `user_change` event (a guest made a member, or the reverse) drops the entry at once.
    person_cache_ttl_seconds: float = 600
    not_a_bot_thread_ttl_seconds: float = 60
