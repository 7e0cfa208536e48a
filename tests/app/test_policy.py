"""The write gate's policy table: narrow by origin, never widen, never to repo or org."""

from __future__ import annotations

import dataclasses

import pytest

from app.policy import POLICY_TABLE, Actor, Decision, Rule, authorize, reflection_actor
from memory.rules.scope import RequestScopes
from memory.rules.write_gate import WRITE_ACTION, MemoryScopeResource

ORG = "org:acme"
REPO = "repo:acme/api"
CHANNEL = "channel:slack:C1"
USER = "user:slack:UA"

FULL = Actor(principal=USER, memberships=frozenset({CHANNEL, REPO}))


def write(
    resource_key: str, origin: str | None, actor: Actor = FULL, conversation: str | None = "slack:C1"
) -> Decision:
    """A fact learned in `conversation` (by default the run's own channel, slack:C1)."""
    kind = resource_key.split(":", 1)[0]
    resource = MemoryScopeResource(resource_key, kind, origin, origin_conversation=conversation)
    return authorize(actor, WRITE_ACTION, resource)


def test_reflection_actor_is_the_runs_user_holding_its_channel_and_repo() -> None:
    scopes = RequestScopes(org=ORG, repo=REPO, channel=CHANNEL, user=USER)
    assert reflection_actor(scopes) == FULL
    assert reflection_actor(RequestScopes(org=ORG)) == Actor(principal=None, memberships=frozenset())


@pytest.mark.parametrize("origin", ["public", "machine"])
@pytest.mark.parametrize("key", [ORG, REPO, CHANNEL, USER])
def test_public_and_machine_origins_keep_every_routed_scope(origin: str, key: str) -> None:
    assert write(key, origin) == Decision(allowed=True, reason="granted")


@pytest.mark.parametrize("origin", ["dm", "mpim"])
def test_an_org_write_from_a_dm_is_narrowed_to_the_users_scope(origin: str) -> None:
    decision = write(ORG, origin)
    assert decision == Decision(True, f"narrowed_{origin}_org_to_user", narrowed_to=USER)


def test_an_org_write_from_a_private_origin_is_narrowed_to_the_channel() -> None:
    decision = write(ORG, "private")
    assert decision == Decision(True, "narrowed_private_org_to_channel", narrowed_to=CHANNEL)


@pytest.mark.parametrize("origin", [None, "weird"])
def test_an_org_write_from_an_unknown_origin_is_narrowed_to_the_user(origin: str | None) -> None:
    """Unknown is read as dm (its owner alone): the user's scope, never a channel nobody owns."""
    decision = write(ORG, origin)
    assert decision == Decision(True, "narrowed_unknown_org_to_user", narrowed_to=USER)


@pytest.mark.parametrize("origin", ["dm", "unknown"])
def test_an_owner_only_fact_is_never_written_to_a_channel_scope(origin: str) -> None:
    """Even a channel scope the actor holds, learned in that very conversation (an old DM's channel
    scope): a DM has no shared scope, and nobody but its owner may read such a fact."""
    actor = Actor(principal=None, memberships=frozenset({"channel:slack:D1"}))
    assert not write(ORG, origin, actor, conversation="slack:D1").allowed
    assert not write("channel:slack:D1", origin, actor, conversation="slack:D1").allowed


def test_a_private_origin_without_a_channel_falls_to_the_user() -> None:
    actor = Actor(principal=USER, memberships=frozenset({REPO}))
    assert write(ORG, "private", actor).narrowed_to == USER


def test_a_narrowed_write_never_lands_in_the_repo() -> None:
    # The actor holds only the repo: there is nowhere no wider than the origin, so it is denied.
    actor = Actor(principal=None, memberships=frozenset({REPO}))
    decision = write(ORG, "private", actor)
    assert decision == Decision(False, "denied_private_org_no_narrower_scope")


@pytest.mark.parametrize(
    ("origin", "narrowed"), [("dm", USER), ("mpim", USER), ("private", CHANNEL), (None, USER)]
)
def test_a_repo_write_from_a_non_public_origin_is_narrowed_like_org(
    origin: str | None, narrowed: str
) -> None:
    decision = write(REPO, origin)
    assert decision.allowed and decision.narrowed_to == narrowed


@pytest.mark.parametrize("origin", ["public", "dm", "mpim", "private", None, "machine"])
def test_user_writes_are_granted_as_routed_from_any_origin(origin: str | None) -> None:
    assert write(USER, origin) == Decision(True, "granted")


@pytest.mark.parametrize("origin", ["public", "mpim", "private", "machine"])
def test_channel_writes_are_granted_as_routed_from_any_origin_its_members_may_read(origin: str) -> None:
    assert write(CHANNEL, origin) == Decision(True, "granted")


@pytest.mark.parametrize(
    ("key", "token"),
    [
        ("user:slack:UB", "denied_user_not_held"),
        ("channel:slack:C2", "denied_channel_not_held"),
        ("repo:acme/other", "denied_repo_not_held"),
    ],
)
def test_a_scope_the_actor_does_not_hold_is_refused_never_moved(key: str, token: str) -> None:
    for origin in ("public", "dm", "private"):
        assert write(key, origin) == Decision(False, token)


@pytest.mark.parametrize(
    ("origin", "learned_in"),
    [("dm", "slack:D1"), ("private", "slack:G1"), ("mpim", "slack:G2"), ("unknown", None), ("private", None)],
)
def test_a_non_public_fact_learned_in_another_conversation_is_narrowed_from_the_channel_to_the_user(
    origin: str, learned_in: str | None
) -> None:
    """A DM or private-channel fact restated in this run's channel must not land in its scope."""
    decision = write(CHANNEL, origin, conversation=learned_in)
    assert decision == Decision(True, f"narrowed_{origin}_channel_to_user", narrowed_to=USER)
    org = write(ORG, origin, conversation=learned_in)
    assert org.narrowed_to == USER


def test_a_public_fact_from_another_channel_is_granted_in_this_one() -> None:
    assert write(CHANNEL, "public", conversation="slack:C9") == Decision(True, "granted")


def test_a_foreign_private_fact_without_a_user_has_nowhere_to_go() -> None:
    actor = Actor(principal=None, memberships=frozenset({CHANNEL}))
    decision = write(CHANNEL, "private", actor, conversation="slack:G1")
    assert decision == Decision(False, "denied_private_channel_no_narrower_scope")


def test_an_action_without_a_row_is_denied() -> None:
    resource = MemoryScopeResource(ORG, "org", "public")
    assert authorize(FULL, "memory:erase", resource) == Decision(False, "denied_no_rule")


def test_the_table_drives_the_answer() -> None:
    # A table that grants org from private origins too: the same request is now granted as routed.
    open_table = (*POLICY_TABLE, Rule(WRITE_ACTION, "org", "anyone", frozenset({"private"})))
    resource = MemoryScopeResource(ORG, "org", "private")
    assert authorize(FULL, WRITE_ACTION, resource, open_table) == Decision(True, "granted")


def test_decisions_are_frozen_values() -> None:
    decision = write(ORG, "dm")
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.allowed = False  # type: ignore[misc]


@pytest.mark.parametrize("key", [ORG, REPO])
def test_a_shared_write_from_a_channel_shared_with_another_organization_is_narrowed_to_that_channel(
    key: str,
) -> None:
    decision = write(key, "external")
    kind = key.split(":", 1)[0]
    assert decision == Decision(True, f"narrowed_external_{kind}_to_channel", narrowed_to=CHANNEL)


def test_a_fact_from_a_shared_channel_is_granted_in_that_channel_and_its_speakers_own_scope() -> None:
    assert write(CHANNEL, "external") == Decision(True, "granted")
    assert write(USER, "external") == Decision(True, "granted")


def test_a_fact_from_a_shared_channel_restated_in_another_channel_falls_to_the_user() -> None:
    decision = write(CHANNEL, "external", conversation="slack:C7")
    assert decision == Decision(True, "narrowed_external_channel_to_user", narrowed_to=USER)
    assert write(ORG, "external", conversation="slack:C7").narrowed_to == USER
