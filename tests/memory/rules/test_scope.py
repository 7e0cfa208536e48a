import pytest

from memory.rules.scope import (
    RequestScopes,
    ScopeError,
    derive_scope_key,
    dm_channel_scope,
    is_dm_conversation,
    list_scope_keys,
    request_scope_keys,
    scope_kind,
    validate_scope_key,
)


def test_derive_scope_key_org_comes_from_the_configured_organization() -> None:
    assert derive_scope_key("org", "acme") == "org:acme"


def test_derive_scope_key_refuses_an_org_scope_without_an_organization() -> None:
    with pytest.raises(ScopeError, match="organization"):
        derive_scope_key("org", None)
    with pytest.raises(ScopeError):
        derive_scope_key("org", "  ")


def test_derive_scope_key_derives_the_user_scope_key_from_the_namespaced_id() -> None:
    assert derive_scope_key("user", "slack:U0123") == "user:slack:U0123"


def test_derive_scope_key_refuses_a_user_scope_without_a_user_id() -> None:
    with pytest.raises(ScopeError, match="user id"):
        derive_scope_key("user", "")


def test_derive_scope_key_repo_and_channel() -> None:
    assert derive_scope_key("repo", "owner/name") == "repo:owner/name"
    assert derive_scope_key("channel", "slack:C0123") == "channel:slack:C0123"
    with pytest.raises(ScopeError):
        derive_scope_key("repo", None)
    with pytest.raises(ScopeError):
        derive_scope_key("channel", None)
    with pytest.raises(ScopeError):
        derive_scope_key("repo", "not a repo")


def test_request_scope_keys_is_org_only_without_identity() -> None:
    scopes = request_scope_keys("acme")
    assert scopes == RequestScopes(org="org:acme")
    assert list_scope_keys(scopes) == ["org:acme"]


def test_request_scope_keys_is_org_plus_own_user() -> None:
    scopes = request_scope_keys("acme", user_id="slack:U1")
    assert list_scope_keys(scopes) == ["org:acme", "user:slack:U1"]


def test_request_scope_keys_adds_repo_and_channel_keys_and_lists_org_repo_channel_user() -> None:
    scopes = request_scope_keys("acme", user_id="slack:U1", channel_id="slack:C1", repo="o/r")
    assert list_scope_keys(scopes) == ["org:acme", "repo:o/r", "channel:slack:C1", "user:slack:U1"]


def test_request_scope_keys_refuses_a_missing_organization() -> None:
    with pytest.raises(ScopeError):
        request_scope_keys(None, user_id="slack:U1")


@pytest.mark.parametrize("key", ["", "a b", "a\tb", "x\x00", "x\x7f", "k" * 201, "org:\udcff"])
def test_validate_scope_key_refuses_bad_keys_naming_the_rule(key: str) -> None:
    with pytest.raises(ValueError, match="scope key"):
        validate_scope_key(key)


def test_scope_kind() -> None:
    assert scope_kind("user:slack:U1") == "user"
    assert scope_kind("nothing") == ""


@pytest.mark.parametrize("conversation", ["slack:D0123ABC", "slack:T0TEAM:D0123ABC"])
def test_a_dm_has_no_channel_scope(conversation: str) -> None:
    """Issue 23: a DM's channel scope would be shared with no owner; what a DM teaches is the person's."""
    assert is_dm_conversation(conversation)
    scopes = request_scope_keys("acme", user_id="slack:U1", channel_id=conversation)
    assert scopes.channel is None and scopes.user == "user:slack:U1"
    with pytest.raises(ScopeError, match="DM has no channel scope"):
        derive_scope_key("channel", conversation)
    assert dm_channel_scope(f"channel:{conversation}") == conversation


@pytest.mark.parametrize(
    "conversation",
    ["slack:C0123", "slack:G0123", "slack:T0TEAM:C0123", "cli:local", "slack:d0123", "D0123", None],
)
def test_a_channel_or_group_keeps_its_channel_scope(conversation: str | None) -> None:
    assert not is_dm_conversation(conversation)
    if conversation is not None and conversation.startswith("slack:") and conversation[6] in "CGT":
        assert request_scope_keys("acme", channel_id=conversation).channel == f"channel:{conversation}"
    assert dm_channel_scope(f"user:{conversation}") is None
