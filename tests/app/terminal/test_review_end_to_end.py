"""The review queue end to end on the terminal surface: `switchboard chat` and `switchboard memory …` as
real subprocesses over the real SQLite store, the model being the fake Anthropic server.

With `memory.review = "shared"` a fact reflection learns for the org waits: it is in no prompt and in no
`memory list` until an admin approves it; a rejected one leaves no byte in the data directory; someone
who is not an admin cannot approve; an edit and its history show both versions, and forgetting erases
both texts.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memory.rules.scorer import FENCE_OPEN
from tests.app.runtime_support import app_command, subprocess_env
from tests.fakes.model_server import FakeModelServer

ORG_FACT = "The api service deploys with make deploy from the main branch"
EDITED_FACT = "The api service deploys with make ship from the release branch"
REJECTED_FACT = "Staging credentials rotate every Thursday at noon"
QUESTION = "how do I deploy the api service?"
ADMIN = {"SWITCHBOARD_ADMINS": '["user:cli:local"]'}
_ID = re.compile(r"mem:org:acme:\d+")


class Terminal:
    """One data directory, the fake model, and the app run the way a person runs it."""

    def __init__(self, tmp_path: Path, fake: FakeModelServer) -> None:
        self.home = tmp_path
        self.data = tmp_path / "data"
        self.fake = fake

    async def run(self, *args: str, admin: bool = False) -> subprocess.CompletedProcess[str]:
        env = subprocess_env(
            {
                "HOME": str(self.home),
                "SWITCHBOARD_DATA_DIR": str(self.data),
                "ANTHROPIC_API_KEY": "test-key",
                "ANTHROPIC_BASE_URL": self.fake.base_url,
                "SWITCHBOARD_MODEL": "anthropic/test-model",
                "SWITCHBOARD_MODELS__ANTHROPIC__MAX_RETRIES": "0",
                "SWITCHBOARD_ORGANIZATION": "acme",
                "SWITCHBOARD_MEMORY__ENABLED": "true",
                "SWITCHBOARD_MEMORY__REVIEW": "shared",
                **(ADMIN if admin else {}),
            }
        )
        return await asyncio.to_thread(
            subprocess.run,
            app_command(*args),
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )

    async def memory(self, *args: str, admin: bool = True) -> subprocess.CompletedProcess[str]:
        return await self.run("memory", *args, admin=admin)

    async def chat(self, thread: str, text: str, *, admin: bool = False) -> subprocess.CompletedProcess[str]:
        done = await self.run("chat", "--thread", thread, text, admin=admin)
        assert done.returncode == 0, done.stderr
        return done

    async def reflect(self, thread: str, fact: str) -> str:
        """A chat four turns deep (so it is distilled) whose extractor learns `fact` for the org."""
        (self.data / "chat").mkdir(parents=True, exist_ok=True)
        turns = [{"role": role, "text": text} for role, text in (("user", "a"), ("assistant", "b")) * 2]
        path = self.data / "chat" / f"{thread}.json"
        path.write_text(json.dumps({"thread": thread, "turns": turns}), encoding="utf-8")
        extraction = {"facts": [{"text": fact, "confidence": 0.9, "audience": "org"}], "summary": ""}
        self.fake.script("Noted.", json.dumps(extraction))
        await self.chat(thread, "remember how we work")
        pending = await self.memory("pending", "--scope", "org")
        assert pending.returncode == 0, pending.stderr
        line = next(line for line in pending.stdout.splitlines() if fact in line)
        found = _ID.search(line)
        assert found is not None, pending.stdout
        return found.group(0)

    async def prompt_of_next_question(self, thread: str) -> str:
        """The system prompt the model is sent for the next question (a fresh thread: no reflection)."""
        self.fake.script("Use the documented path.")
        before = len(self.fake.bodies())
        await self.chat(thread, QUESTION)
        body: dict[str, Any] = self.fake.bodies()[before]
        system = body.get("system", "")
        return "".join(b.get("text", "") for b in system) if isinstance(system, list) else str(system)

    def stored_bytes(self) -> bytes:
        """Every byte under the data directory but the chat transcripts (scope databases, WALs, ledger)."""
        files = [
            p for p in self.data.rglob("*") if p.is_file() and "chat" not in p.relative_to(self.data).parts
        ]
        return b"".join(p.read_bytes() for p in files)


@pytest.fixture
def terminal(tmp_path: Path, fake_anthropic: FakeModelServer) -> Terminal:
    return Terminal(tmp_path, fake_anthropic)


async def test_a_reflected_org_fact_waits_for_an_admin_before_any_prompt_or_listing_has_it(
    terminal: Terminal,
) -> None:
    record = await terminal.reflect("t1", ORG_FACT)

    listed = await terminal.memory("list", "org")
    assert listed.returncode == 0 and "(no active records)" in listed.stdout and record not in listed.stdout
    assert ORG_FACT not in await terminal.prompt_of_next_question("q1")

    refused = await terminal.memory("approve", record, admin=False)
    assert (refused.returncode, refused.stdout.strip()) == (
        1,
        "🚫 Only admins can approve what waits for shared memory. You are user:cli:local, not in admins.",
    )
    assert record in (await terminal.memory("pending")).stdout

    approved = await terminal.chat("t1", f"memory approve {record}", admin=True)  # the chat's own grammar
    assert approved.stdout.strip() == f"✅ Approved {record}: active in org:acme now."
    assert f"{record}  fact" in (await terminal.memory("list", "org")).stdout
    system = await terminal.prompt_of_next_question("q2")
    assert FENCE_OPEN in system and ORG_FACT in system
    assert record not in (await terminal.memory("pending")).stdout


async def test_a_rejected_fact_is_gone_with_its_bytes(terminal: Terminal) -> None:
    record = await terminal.reflect("t2", REJECTED_FACT)
    assert REJECTED_FACT.encode() in terminal.stored_bytes()

    rejected = await terminal.memory("reject", record)

    assert (rejected.returncode, rejected.stdout.strip()) == (
        0,
        f"🗑️ Rejected {record}: erased, none of its text is kept.",
    )
    assert REJECTED_FACT.encode() not in terminal.stored_bytes()
    assert REJECTED_FACT not in (await terminal.memory("pending")).stdout
    assert REJECTED_FACT not in await terminal.prompt_of_next_question("q3")
    history = await terminal.memory("history", record)
    assert "rejected by user:cli:local" in history.stdout and "(erased: rejected)" in history.stdout


async def test_an_edit_and_its_history_show_both_versions_and_forgetting_erases_both_texts(
    terminal: Terminal,
) -> None:
    record = await terminal.reflect("t3", ORG_FACT)
    assert (await terminal.memory("approve", record)).returncode == 0

    edited = await terminal.memory("edit", record, "--", EDITED_FACT)
    assert edited.returncode == 0, edited.stdout
    new = _ID.findall(edited.stdout)[1]
    history = await terminal.memory("history", new)

    lines = history.stdout.splitlines()
    assert lines[0] == f"History of {new} — 2 versions, oldest first"
    assert (
        f"- {record} · " in lines[1] and "· superseded · written by run:" in lines[1] and ORG_FACT in lines[1]
    )
    assert f"edited by user:cli:local → {new}" in history.stdout
    [new_line] = [line for line in lines if line.startswith(f"- {new} · ")]
    assert "· active · written by user:cli:local · " + EDITED_FACT in new_line
    audit = await terminal.memory("audit", "--record", record)
    assert "approved by user:cli:local" in audit.stdout and "edited by user:cli:local" in audit.stdout

    forgot = await terminal.memory("forget", new)
    assert forgot.returncode == 0, forgot.stdout
    stored = terminal.stored_bytes()
    assert ORG_FACT.encode() not in stored and EDITED_FACT.encode() not in stored
    after = await terminal.memory("history", new)
    assert after.stdout.count("(erased: forgotten)") == 2
