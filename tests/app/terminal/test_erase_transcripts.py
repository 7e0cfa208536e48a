"""`switchboard memory forget --user cli:local` erases the terminal person everywhere, their saved chat
threads included: real `switchboard chat` and `switchboard memory` subprocesses over the real SQLite store,
the model being the fake Anthropic server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.terminal.test_review_end_to_end import Terminal
from tests.fakes.model_server import FakeModelServer

SAID = "Pomelobright"  # a word only the person typed into their chats


@pytest.fixture
def terminal(tmp_path: Path, fake_anthropic: FakeModelServer) -> Terminal:
    return Terminal(tmp_path, fake_anthropic)


def files_holding(terminal: Terminal, word: str) -> list[str]:
    needle = word.lower().encode()
    return sorted(
        str(p.relative_to(terminal.data))
        for p in terminal.data.rglob("*")
        if p.is_file() and needle in p.read_bytes().lower()
    )


async def test_forgetting_the_terminal_person_deletes_their_chat_threads_and_counts_them(
    terminal: Terminal,
) -> None:
    for thread in ("t1", "t2"):
        terminal.fake.script("Noted.")
        await terminal.chat(thread, f"my locker word is {SAID}, in thread {thread}")
    assert files_holding(terminal, SAID) == ["chat/t1.json", "chat/t2.json"]

    erased = await terminal.memory("forget", "--user", "cli:local")

    assert erased.returncode == 0, erased.stderr
    assert erased.stdout.strip().startswith("🧹 Erased 0 records of user:cli:local (")
    assert "2 chat transcripts deleted" in erased.stdout
    assert files_holding(terminal, SAID) == []
    assert list((terminal.data / "chat").iterdir()) == []


async def test_an_unknown_person_is_refused_with_exit_1_in_one_line(terminal: Terminal) -> None:
    for person in ("cli:local", "UNOBODY", "bob"):
        refused = await terminal.memory("forget", "--user", person)
        assert refused.returncode == 1, (person, refused.stdout, refused.stderr)
        assert len(refused.stdout.strip().splitlines()) == 1, refused.stdout
        assert refused.stdout.startswith("🚫"), refused.stdout
        assert "Erased" not in refused.stdout
