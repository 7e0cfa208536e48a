"""Retention: how long a scope keeps its records and the read audit keeps its rows. Pure.

`[memory] ttl_days` applies to every scope; `[channels."slack:C…"] memory_ttl_days` overrides it for that
channel's own scope (`channel:slack:C…`). A record expires `ttl` after it was written (`created_at`):
retention bounds how long something learned is kept, and use does not extend it. An expired record is
never returned by a read; the store erases it the next time its scope is written and at start-up (no
scheduled sweeper). The audit keeps its rows `audit_days` (default 30).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DAY_SECONDS = 86_400.0
DEFAULT_AUDIT_DAYS = 30.0


@dataclass(frozen=True, slots=True)
class Retention:
    """`ttl_days` None keeps records until forgotten; `scope_ttl_days` maps scope keys to their own."""

    ttl_days: float | None = None
    scope_ttl_days: Mapping[str, float] = field(default_factory=dict)
    audit_days: float = DEFAULT_AUDIT_DAYS

    def __post_init__(self) -> None:
        for name, value in (("ttl_days", self.ttl_days), ("audit_days", self.audit_days)):
            if value is not None and not value > 0:
                raise ValueError(f"retention {name} must be a positive number of days, got {value!r}")
        for key, value in self.scope_ttl_days.items():
            if not value > 0:
                raise ValueError(f"retention for {key} must be a positive number of days, got {value!r}")

    @property
    def expires(self) -> bool:
        """False when no scope has a ttl: the stores skip every expiry step."""
        return self.ttl_days is not None or bool(self.scope_ttl_days)

    def ttl_seconds(self, scope_key: str) -> float | None:
        days = self.scope_ttl_days.get(scope_key, self.ttl_days)
        return None if days is None else days * DAY_SECONDS

    def cutoff(self, scope_key: str, now: float) -> float | None:
        """Records of this scope created before this time are expired; None: nothing expires."""
        ttl = self.ttl_seconds(scope_key)
        return None if ttl is None else now - ttl

    def audit_cutoff(self, now: float) -> float:
        return now - self.audit_days * DAY_SECONDS


NO_RETENTION = Retention()
