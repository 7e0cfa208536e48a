"""Who may write what: the policy table, asked before every memory write (never on reads).

Cross-scope leakage is prevented at write time, the only time a fact's origin is known. A row of the
table grants an action on a kind of resource to a holder, for some origins. A memory write with no
row is narrowed to a scope no wider than its origin — a DM is one person's conversation, a private
channel is its members' — and never to a repo or the org: what a private conversation says stays
with its audience.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import partial
from typing import Literal

from memory.rules.scope import RequestScopes, scope_kind
from memory.rules.visibility import OPEN_ORIGINS, origin_from_visibility
from memory.rules.write_gate import WRITE_ACTION, MemoryScopeResource, WriteGate

Holder = Literal["principal", "member", "anyone"]

# Origins whose facts may reach the shared, cross-channel scopes (repo, org).
SHARED_ORIGINS: frozenset[str | None] = frozenset(OPEN_ORIGINS)
# Origins that are one person's (or a small group's) conversation: narrowed to the person first.
PERSONAL_ORIGINS: frozenset[str | None] = frozenset({"dm", "mpim", "unknown"})
# Origins the read rule shows to the record's owner alone: a shared scope has no owner, so a fact from
# one of them is never written to one (it could be read by nobody and forgotten by nobody but admins).
# A DM has no channel scope at all; this keeps an `unknown` fact out of a channel's too. An `external`
# fact (a channel shared with another organization) is written like a private channel's: that
# channel's scope, else its speaker's own, never repo or org, never another channel.
CONVERSATION_ORIGINS: frozenset[str | None] = frozenset({"public", "machine", "private", "mpim", "external"})


@dataclass(frozen=True, slots=True)
class Actor:
    """The run's principal (its user scope key) holding the run's own channel and repo scopes."""

    principal: str | None
    memberships: frozenset[str] = frozenset()

    def holds(self, key: str) -> bool:
        return key == self.principal or key in self.memberships


@dataclass(frozen=True, slots=True)
class Rule:
    """One row: `action` on a `resource_kind` for `holder`, from these origins (None: any origin).

    `same_conversation`: a fact from an origin outside SHARED_ORIGINS is granted only when it was
    learned in the conversation the resource belongs to (a channel scope's own channel).
    """

    action: str
    resource_kind: str
    holder: Holder
    origins: Collection[str | None] | None = None
    same_conversation: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """Allowed as asked, allowed narrowed to another scope key, or denied; `reason` is a log token."""

    allowed: bool
    reason: str
    narrowed_to: str | None = None


POLICY_TABLE: tuple[Rule, ...] = (
    # A person's own scope, from anywhere.
    Rule(WRITE_ACTION, "user", "principal"),
    # The run's own channel, from anywhere learned in that channel that its members may read: its
    # readers are the origin's own audience. A private fact restated in another channel is not (it is
    # narrowed), and neither is a dm or unknown one (shown to its owner alone: their user scope).
    Rule(WRITE_ACTION, "channel", "member", CONVERSATION_ORIGINS, same_conversation=True),
    # The bound repo and the org are read from every channel: only public and machine origins.
    Rule(WRITE_ACTION, "repo", "member", SHARED_ORIGINS),
    Rule(WRITE_ACTION, "org", "anyone", SHARED_ORIGINS),
)


def reflection_actor(scopes: RequestScopes) -> Actor:
    """The actor a run's reflection writes as: its user, holding its channel and repo."""
    return Actor(
        principal=scopes.user,
        memberships=frozenset(key for key in (scopes.channel, scopes.repo) if key is not None),
    )


def write_gate(scopes: RequestScopes) -> WriteGate:
    """The gate a write for this request asks (`memory remember`): the table, as `reflection_actor`."""
    return partial(authorize, reflection_actor(scopes), WRITE_ACTION)


def authorize(
    actor: Actor,
    action: str,
    resource: MemoryScopeResource,
    table: tuple[Rule, ...] = POLICY_TABLE,
) -> Decision:
    """Ask the table; a memory write with no row is narrowed, never widened, never silently dropped."""
    origin = origin_from_visibility(resource.origin_visibility)
    if any(_grants(rule, actor, action, resource, origin) for rule in table):
        return Decision(allowed=True, reason="granted")
    if action != WRITE_ACTION:
        return Decision(allowed=False, reason="denied_no_rule")
    if resource.kind not in ("org", "repo", "channel") or (
        resource.kind in ("repo", "channel") and resource.key not in actor.memberships
    ):
        # Only the origin narrows a write; a scope the actor does not hold (another person's, another
        # channel's, another repo's) is refused outright, never moved.
        return Decision(allowed=False, reason=f"denied_{resource.kind or 'unknown'}_not_held")
    return _narrow(actor, resource, origin, table)


def _grants(rule: Rule, actor: Actor, action: str, resource: MemoryScopeResource, origin: str) -> bool:
    if rule.action != action or rule.resource_kind != resource.kind:
        return False
    if rule.origins is not None and origin not in rule.origins:
        return False
    if rule.same_conversation and origin not in SHARED_ORIGINS and not _learned_in(resource):
        return False
    if rule.holder == "principal":
        return actor.principal is not None and resource.key == actor.principal
    if rule.holder == "member":
        return resource.key in actor.memberships
    return True


def _learned_in(resource: MemoryScopeResource) -> bool:
    """The fact was learned in the conversation whose scope this is (`channel:<its id>`)."""
    conversation = resource.origin_conversation
    return conversation is not None and resource.key == f"channel:{conversation}"


def _narrow(actor: Actor, resource: MemoryScopeResource, origin: str, table: tuple[Rule, ...]) -> Decision:
    """dm/mpim/unknown → the user's scope, else the channel's (granted for mpim only); private and
    external → the channel's, else the user's."""
    channel = next((key for key in sorted(actor.memberships) if scope_kind(key) == "channel"), None)
    order = (actor.principal, channel) if origin in PERSONAL_ORIGINS else (channel, actor.principal)
    for key in order:
        if key is None:
            continue
        narrowed = MemoryScopeResource(
            key, scope_kind(key), resource.origin_visibility, origin_conversation=resource.origin_conversation
        )
        if any(_grants(rule, actor, WRITE_ACTION, narrowed, origin) for rule in table):
            reason = f"narrowed_{origin}_{resource.kind}_to_{narrowed.kind}"
            return Decision(allowed=True, reason=reason, narrowed_to=key)
    return Decision(allowed=False, reason=f"denied_{origin}_{resource.kind}_no_narrower_scope")
