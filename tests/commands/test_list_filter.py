"""`memory list <words>` matches stems, as retrieval does: `deploy` finds "deploys", on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from commands.list_filter import widened_filter
from commands.memory import build_registry
from commands.registry import Caller
from memory.ranking.lexical import stem_words
from memory.rules.engine import MAX_MATCH_TOKENS
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate

SLACK = Caller("slack:U1", "slack:C1", "public", "slack:C1:1700000000.000100", "slack")
TEXTS = (
    "Deploys go out through the release train",  # 1
    "We deployed the worker on Friday",  # 2
    "Deployment needs two approvals",  # 3
    "The configuration lives in the vault",  # 4
    "Standups are at ten",  # 5
    "Stopping the canary takes a minute",  # 6
)


@pytest.fixture(params=["in_process", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    made: MemoryStore = (
        InProcessMemoryStore() if request.param == "in_process" else SqliteMemoryStore(tmp_path / "memory")
    )
    await made.write("org:acme", [MemoryCandidate("fact", t, "slack:C1:1.0", origin="public") for t in TEXTS])
    yield made
    await made.aclose()


async def listed(store: MemoryStore, words: str) -> list[str]:
    registry = build_registry(store=store, memory_enabled=True, organization="acme", admins=())
    reply = await registry.handle(f"memory list org {words}", SLACK)
    assert reply is not None and reply.ok, reply
    return [line.split("`")[1] for line in reply.text.splitlines() if line.startswith("- `mem:")]


@pytest.mark.parametrize(
    ("words", "found"),
    [
        ("deploy", [3, 2, 1]),
        ("deploys", [3, 2, 1]),
        ("deploying", [3, 2, 1]),
        ("configure", [4]),
        ("configurations", [4]),
        ("stop", [6]),
        ("standup", [5]),
        ("vault deployed", [4, 3, 2, 1]),
        ("release", [1]),
        ("payroll", []),
    ],
)
async def test_the_filter_matches_any_form_of_its_words(
    store: MemoryStore, words: str, found: list[int]
) -> None:
    assert await listed(store, words) == [f"mem:org:acme:{n}" for n in found]


@pytest.mark.parametrize("word", ["deploy", "configure", "happy", "stop", "migrations", "v2", "CI"])
def test_every_widened_form_has_a_stem_of_the_filter(word: str) -> None:
    forms = widened_filter(word).split()
    assert forms[0] == word.lower()
    [stem] = stem_words([word.lower()])
    assert all(got == stem for got in stem_words(forms))


def test_the_widening_never_grows_a_filter_past_what_the_prefilter_reads() -> None:
    two = widened_filter("vault deployed").split()
    assert two[:2] == ["vault", "deployed"] and len(two) <= MAX_MATCH_TOKENS
    words = " ".join(f"deployment{n}x" for n in range(30))
    assert widened_filter(words) == words  # its own words, nothing added
