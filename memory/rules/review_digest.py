"""What an admin is told about the review queue: counts, scopes and dates, never a record's words. Pure.

Under `memory.review = "shared"` reflection's org, repo and channel facts wait as pending records until
an admin approves them, and expire unseen after `review_days`. The digest says how many wait, in which
scopes, how old the oldest is and when it expires. It carries no text of any record, so where the
digest is read (an admin's DM) can never show words that were typed somewhere narrower: the read rule
(`may_show`) never has to be weighed for it.

"At most one digest per window per admin" is a shared claim (memory/rules/claims.py) whose key names
the admin and whose time-to-live is the window: the first process to claim it sends, every other
process (another replica, or this one after a restart) is refused until the window has passed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memory.types import MemoryRecord

DAY_SECONDS = 86_400.0
HOUR_SECONDS = 3_600.0
DIGEST_CLAIM_PREFIX = "memory:review_digest:"


@dataclass(frozen=True, slots=True)
class PendingDigest:
    """The review queue in numbers: `scopes` is (scope key, how many wait there), most first."""

    total: int
    scopes: tuple[tuple[str, int], ...]
    oldest_at: float
    expires_at: float
    at_least: bool = False  # a scope had more waiting than one read returns: `total` is a floor


def summarize_pending(
    waiting: Mapping[str, Sequence[MemoryRecord]], review_days: float, *, read_limit: int
) -> PendingDigest | None:
    """The digest of what waits (pending records only, by scope), or None when nothing does."""
    counts = {
        key: sum(1 for record in records if record.status == "pending") for key, records in waiting.items()
    }
    pending = [record for records in waiting.values() for record in records if record.status == "pending"]
    if not pending:
        return None
    oldest = min(record.created_at for record in pending)
    ranked = sorted(((key, n) for key, n in counts.items() if n), key=lambda item: (-item[1], item[0]))
    return PendingDigest(
        total=len(pending),
        scopes=tuple(ranked),
        oldest_at=oldest,
        expires_at=oldest + review_days * DAY_SECONDS,
        at_least=any(len(records) >= read_limit for records in waiting.values()),
    )


def digest_claim_key(admin_key: str) -> str:
    """The claim that stands for "this admin was sent a digest in the current window".

    A hash of the admin's key, not the key: the claims table then holds no id of a person, so an
    erasure of the admin leaves nothing readable there.
    """
    return DIGEST_CLAIM_PREFIX + hashlib.sha256(admin_key.encode("utf-8")).hexdigest()[:40]


def window_seconds(hours: float) -> float:
    return hours * HOUR_SECONDS


def age_words(seconds: float) -> str:
    """A person's reading of an age or a remaining time: `40 minutes`, `5 hours`, `3 days`."""
    seconds = max(0.0, seconds)
    if seconds < 2 * HOUR_SECONDS:
        minutes = max(1, round(seconds / 60))
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    if seconds < 2 * DAY_SECONDS:
        return f"{round(seconds / HOUR_SECONDS)} hours"
    return f"{round(seconds / DAY_SECONDS)} days"
