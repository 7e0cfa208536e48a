"""The review digest's rules: what an admin is told (counts, scopes, dates), and the claim that keeps
it to one per window."""

from __future__ import annotations

from memory.rules.claims import validate_claim
from memory.rules.review_digest import age_words, digest_claim_key, summarize_pending
from memory.types import MemoryRecord

DAY = 86_400.0


def record(n: int, scope: str, created_at: float, status: str = "pending") -> MemoryRecord:
    return MemoryRecord(
        id=f"mem:{scope}:{n}",
        scope_key=scope,
        kind="fact",
        text=f"fact {n}",
        source_thread_key="slack:C1:1700000000.000100",
        created_at=created_at,
        status=status,  # type: ignore[arg-type]
    )


def test_the_digest_counts_pending_records_by_scope_most_first_with_the_oldests_expiry() -> None:
    waiting = {
        "org:acme": [record(1, "org:acme", 500.0), record(2, "org:acme", 900.0)],
        "channel:slack:C1": [
            record(3, "channel:slack:C1", 100.0),
            record(4, "channel:slack:C1", 50.0, "active"),
        ],
        "repo:a/b": [],
    }
    digest = summarize_pending(waiting, 14, read_limit=100)
    assert digest is not None
    assert digest.total == 3
    assert digest.scopes == (("org:acme", 2), ("channel:slack:C1", 1))
    assert (digest.oldest_at, digest.expires_at) == (100.0, 100.0 + 14 * DAY)
    assert digest.at_least is False


def test_nothing_pending_is_no_digest_and_a_full_read_says_at_least() -> None:
    assert summarize_pending({"org:acme": [record(1, "org:acme", 1.0, "active")]}, 14, read_limit=100) is None
    full = summarize_pending({"org:acme": [record(n, "org:acme", 1.0) for n in range(3)]}, 14, read_limit=3)
    assert full is not None and full.at_least


def test_the_claim_key_is_a_valid_claim_the_same_per_admin_and_names_no_person() -> None:
    key = digest_claim_key("user:slack:U0ADMIN")
    assert validate_claim(key, 86_400.0) == (key, 86_400.0)
    assert key == digest_claim_key("user:slack:U0ADMIN") != digest_claim_key("user:slack:U0OTHER")
    assert "U0ADMIN" not in key


def test_ages_read_as_minutes_hours_or_days() -> None:
    assert [age_words(s) for s in (-5, 60, 3 * 3600, 3 * DAY)] == [
        "1 minute",
        "1 minute",
        "3 hours",
        "3 days",
    ]
