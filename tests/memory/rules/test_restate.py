"""The one restatement key (memory/rules/restate.py): equal after case, punctuation, markup, spacing."""

from __future__ import annotations

import pytest

from memory.rules.restate import meaning_key
from tests.memory.rules.fold_corpus import FOLD_NEAR_MISSES, FOLD_RESTATEMENTS
from tests.memory.rules.restate_corpus import NEAR_MISSES, RESTATEMENTS

BASE = "deploys go through make ship"


@pytest.mark.parametrize(
    "variant",
    [
        "Deploys go through make ship!",
        "**Deploys go through `make ship`.**",
        "_deploys_ go through ~~make~~ ship!!!",
        "  DEPLOYS\tgo   through\nmake ship ",
        "Deploys go through make\u200b ship…",
        "Ｄｅｐｌｏｙｓ go through make ship",  # full-width letters fold under NFKC
        "Deploys go through: make-ship?",
        "> Deploys go through | make ship ^",
        "«Deploys» go through “make ship”",
    ],
)
def test_restyled_text_has_the_same_key(variant: str) -> None:
    assert meaning_key(variant) == BASE


@pytest.mark.parametrize(
    "other",
    [
        "Releases go through make ship",
        "Deploys go through make ship-it",
        "Deploys do not go through make ship",
        "ship make through go deploys",
        "Deploys go through makeship",
    ],
)
def test_a_different_sentence_keeps_a_different_key(other: str) -> None:
    assert meaning_key(other) != BASE


def test_meaningful_symbols_stay() -> None:
    assert meaning_key("Use C++ for the agent") != meaning_key("Use C for the agent")
    assert meaning_key("limit <= 5") != meaning_key("limit 5")
    assert meaning_key("") == "" and meaning_key("**!**") == ""


def test_the_key_never_matches_a_near_miss_of_the_corpus() -> None:
    """0 false matches on the near-miss corpus; restyled copies of every fact of it all match."""
    false_matches = [pair for pair in NEAR_MISSES if meaning_key(pair[0]) == meaning_key(pair[1])]
    facts = {text for pair in (*NEAR_MISSES, *RESTATEMENTS) for text in pair}
    restyled = [f"**{text.upper()}!**" for text in facts] + [f"`{text}`." for text in facts]
    caught = sum(meaning_key(styled) in {meaning_key(text) for text in facts} for styled in restyled)
    reworded = sum(meaning_key(a) == meaning_key(b) for a, b in RESTATEMENTS)
    print(
        f"near misses: {len(NEAR_MISSES)} pairs, {len(false_matches)} matched; "
        f"restyled: {caught}/{len(restyled)} matched; reworded: {reworded}/{len(RESTATEMENTS)} matched"
    )
    assert false_matches == []
    assert caught == len(restyled)


def test_the_key_keeps_every_fold_near_miss_apart_and_joins_only_restyled_restatements() -> None:
    """The fold corpus (tests/memory/rules/fold_corpus.py) as it describes itself: no near miss shares
    a key, and the restatements that share one are exactly those that differ only in formatting."""
    assert [pair for pair in FOLD_NEAR_MISSES if meaning_key(pair[0]) == meaning_key(pair[1])] == []
    joined = [pair for pair in FOLD_RESTATEMENTS if meaning_key(pair[0]) == meaning_key(pair[1])]
    assert joined == list(FOLD_RESTATEMENTS[:6])
