"""The seam between the reflection pass and the authorization policy.

Reflection (memory/) asks a gate before every write; the policy that answers lives in the app
(app/policy.py), so the memory core never imports the app. These are the only shapes they share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

WRITE_ACTION = "memory:write"


@dataclass(frozen=True, slots=True)
class MemoryScopeResource:
    """A scope a reflection wants to write, and where the run that produced the facts came from.

    `origin_visibility` is the run's stamped channel visibility (`public`, `private`, `dm`, `mpim`,
    `machine`) or None when the surface could not tell; the policy treats None as private.
    """

    key: str
    kind: str
    origin_visibility: str | None


class WriteDecision(Protocol):
    """The policy's answer: allowed (perhaps narrowed to another scope key) or not, with a reason token."""

    @property
    def allowed(self) -> bool: ...

    @property
    def narrowed_to(self) -> str | None: ...

    @property
    def reason(self) -> str: ...


class WriteGate(Protocol):
    """`authorize(actor, "memory:write", resource)` with the run's actor already bound."""

    def __call__(self, resource: MemoryScopeResource) -> WriteDecision: ...
