"""A person named in any form they are shown as resolves to the one user scope key the surfaces derive;
anything else is refused. Pseudonyms are random and rename only the person's own mentions."""

from __future__ import annotations

import pytest

from memory.rules.person import (
    PersonError,
    PersonRename,
    draw_pseudonym,
    resolve_person,
    validate_pseudonym,
)
from memory.types import CurationEntry, ReadAudit

SINGLE = "slack:UADMIN"  # an admin's id when the installation serves one workspace
MULTI = "slack:T1:UADMIN"  # … and when it serves several: the id carries the team


@pytest.mark.parametrize(
    "form", ["UBOB", "<@UBOB>", "<@UBOB|bob>", "<@UBOB|Bob Smith>", "slack:UBOB", "user:slack:UBOB", "`UBOB`"]
)
def test_a_slack_id_without_a_team_resolves_in_a_single_workspace(form: str) -> None:
    assert resolve_person(form, caller_id=SINGLE) == "user:slack:UBOB"


@pytest.mark.parametrize(
    "form", ["UBOB", "<@UBOB>", "<@UBOB|bob>", "slack:UBOB", "user:slack:UBOB", " 'UBOB' "]
)
def test_a_slack_id_without_a_team_resolves_in_the_admins_own_workspace(form: str) -> None:
    assert resolve_person(form, caller_id=MULTI) == "user:slack:T1:UBOB"


@pytest.mark.parametrize("form", ["slack:T2:UBOB", "user:slack:T2:UBOB"])
def test_a_slack_id_with_a_team_keeps_its_team(form: str) -> None:
    assert resolve_person(form, caller_id=MULTI) == "user:slack:T2:UBOB"
    assert resolve_person(form, caller_id=SINGLE) == "user:slack:T2:UBOB"


@pytest.mark.parametrize("form", ["cli:local", "user:cli:local"])
def test_the_terminal_person_resolves_from_any_surface(form: str) -> None:
    for caller in (SINGLE, MULTI, "cli:local", None):
        assert resolve_person(form, caller_id=caller) == "user:cli:local"


def test_an_enterprise_grid_user_id_resolves_like_any_other() -> None:
    assert resolve_person("<@W0123>", caller_id=MULTI) == "user:slack:T1:W0123"


def test_a_terminal_admin_without_a_team_reads_a_bare_id_without_one() -> None:
    assert resolve_person("UBOB", caller_id="cli:local") == "user:slack:UBOB"


@pytest.mark.parametrize(
    "form",
    [
        "",
        "bob",
        "@bob",
        "ubob",
        "user:",
        "user:UBOB",
        "slack:",
        "slack:C123",
        "<#C123>",
        "<@UBOB",
        "slack:T1:C123",
        "slack:T1:UBOB:extra",
        "cli:remote",
        "user:cli:",
        "user:slack:UBOB me",
        "erased:" + "0" * 32,
    ],
)
def test_a_form_that_is_no_persons_is_refused_naming_the_forms(form: str) -> None:
    with pytest.raises(PersonError, match="names no person: use one of"):
        resolve_person(form, caller_id=MULTI)


def test_pseudonyms_are_random_and_never_the_persons_id() -> None:
    drawn = {draw_pseudonym() for _ in range(100)}
    assert len(drawn) == 100
    for pseudonym in drawn:
        assert validate_pseudonym(pseudonym) == pseudonym and "BOB" not in pseudonym.upper()


@pytest.mark.parametrize("bad", ["erased:xyz", "slack:UBOB", None, "erased:" + "A" * 32])
def test_a_pseudonym_of_the_wrong_form_is_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        validate_pseudonym(bad)


def test_a_rename_touches_only_the_persons_mentions_and_keeps_the_shape() -> None:
    pseudonym = draw_pseudonym()
    rename = PersonRename("user:slack:T1:UBOB", pseudonym)
    entry = CurationEntry(
        "mem:org:acme:3", "org:acme", "approved", "user:slack:T1:UBOB", 5.0, "mem:org:acme:4"
    )
    assert rename.entry(entry) == CurationEntry(
        "mem:org:acme:3", "org:acme", "approved", f"user:{pseudonym}", 5.0, "mem:org:acme:4"
    )
    other = CurationEntry("mem:org:acme:3", "org:acme", "approved", "user:slack:T1:UBOBBY", 5.0)
    assert rename.entry(other) == other
    read = ReadAudit(
        "run-1",
        "slack:T1:C1:1.0",
        "slack:T1:UBOB",
        ("org:acme", "user:slack:T1:UBOB"),
        (("mem:org:acme:1", 1), ("mem:user:slack:T1:UBOB:2", 2)),
        7.0,
    )
    assert rename.read(read) == ReadAudit(
        "run-1",
        "slack:T1:C1:1.0",
        pseudonym,
        ("org:acme", f"user:{pseudonym}"),
        (("mem:org:acme:1", 1), (f"mem:user:{pseudonym}:2", 2)),
        7.0,
    )


@pytest.mark.parametrize(
    ("thread", "asker", "theirs_alone"),
    [
        ("slack:D0BOB:1700000000.000100", "slack:UBOB", True),
        ("cli:salary-review", "slack:UBOB", True),
        ("slack:C1:1700000000.000100", "slack:UBOB", False),
        ("slack:G0TEAM:1700000000.000100", "slack:UBOB", False),
        ("slack:D0ALICE:1700000000.000100", "slack:UALICE", False),
        ("slack:T1:D0BOB:1700000000.000100", "slack:UBOB", True),
    ],
)
def test_only_a_thread_the_person_had_alone_takes_the_pseudonym(
    thread: str, asker: str, theirs_alone: bool
) -> None:
    pseudonym = draw_pseudonym()
    rename = PersonRename("user:slack:UBOB", pseudonym)
    assert rename.thread(thread, asker) == (pseudonym if theirs_alone else thread)
