"""Event claims: "act on this key once", shared by every process that shares a store. Pure.

Several bot replicas behind one Slack app can each be handed the same event (a retry that reaches
another replica, or the twin delivery of one message under two event types). The first process to
claim the event's key acts on it; every later claim of the key, by any process, is refused until the
claim expires. A claim is a key and a time-to-live, nothing more: no text of the event is stored.
"""

from __future__ import annotations

import math

MAX_CLAIM_KEY_CHARS = 200
# Far longer than Slack keeps retrying (its last retry comes minutes after the first delivery).
MAX_CLAIM_TTL_SECONDS = 7 * 86_400.0
# Expired claims a claim removes on its way (each claim adds one row, so the table stays bounded).
PURGE_BATCH = 16


def validate_claim(key: object, ttl_seconds: object, *, ttl_field: str = "ttl_seconds") -> tuple[str, float]:
    """The claim's key and time-to-live, or ValueError naming the field that is wrong (`ttl_field`:
    the time-to-live's name where it came from, e.g. the wire's `ttlSeconds`)."""
    if not isinstance(key, str) or not key or len(key) > MAX_CLAIM_KEY_CHARS:
        raise ValueError(f"key must be a string of 1 to {MAX_CLAIM_KEY_CHARS} characters")
    if not key.isprintable() or any(character.isspace() for character in key):
        raise ValueError("key must not contain whitespace or control characters")
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
        raise ValueError(f"{ttl_field} must be a number")
    ttl = float(ttl_seconds)
    if not math.isfinite(ttl) or not 0 < ttl <= MAX_CLAIM_TTL_SECONDS:
        raise ValueError(f"{ttl_field} must be more than 0 and at most {MAX_CLAIM_TTL_SECONDS:.0f}")
    return key, ttl
