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
    """A scope a reflection wants to write, and where the fact was learned.

    `origin_visibility` is the fact's origin label — the run's stamped channel visibility (`public`,
    `private`, `dm`, `mpim`, `machine`), or the narrower label of a record the fact restates — or
    None / `unknown` when the surface could not tell; the policy treats that as private.
    `origin_conversation` is the id of the conversation it was learned in (`slack:C0123`): a channel
    scope only takes a non-public fact learned in that same channel.
    """

    key: str
    kind: str
    origin_visibility: str | None
    origin_conversation: str | None = None


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
