"""`memory remember` on the surfaces the runtime builds: a message typed to the bot (the dispatcher's
command path, as a Slack thread, DM or mention reaches it), `switchboard chat` and `switchboard memory`
in a terminal. Each gets the registry with the app's write policy, and no model turn."""

from __future__ import annotations

import subprocess
from contextlib import AsyncExitStack
from pathlib import Path

from app.runtime import build_runtime
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryRecord
from tests.app.runtime_support import RecordingSurface, app_command, message, settings_for, subprocess_env
from tests.fakes.model_server import FakeModelServer

ADMINS = ["user:slack:UADMIN", "user:cli:local"]


async def test_typed_to_the_bot_in_a_dm_or_a_public_thread_it_remembers_without_a_model_turn(
    fake_anthropic: FakeModelServer,
) -> None:
    store = InProcessMemoryStore()
    settings = settings_for(fake_anthropic, organization="acme", memory={"enabled": True}, admins=ADMINS)
    async with AsyncExitStack() as stack:
        runtime = build_runtime(settings, memory_store=store, environ={})
        stack.push_async_callback(runtime.providers.aclose)
        surface = RecordingSurface()
        dm = message(
            "memory remember --scope org the reorg lands in June",
            user="slack:UADMIN",
            channel="slack:D1",
            visibility="dm",
        )
        public = message(
            "<@UBOT> memory remember --scope org Deploys go through make ship", user="slack:UADMIN"
        )
        dm_outcome = await runtime.dispatcher.dispatch(dm, surface)
        public_outcome = await runtime.dispatcher.dispatch(public, surface)

    assert fake_anthropic.requests == []  # a command, not a model turn
    [mine] = store.records("user:slack:UADMIN")
    [org] = store.records("org:acme")
    assert (mine.text, mine.origin) == ("the reorg lands in June", "dm")
    assert (org.text, org.origin, org.origin_conversation) == (
        "Deploys go through make ship",
        "public",
        "slack:C1",
    )
    assert dm_outcome.receipt is not None and dm_outcome.receipt.id == mine.id
    assert public_outcome.receipt is not None and public_outcome.run_id is not None  # an inline run
    assert mine.id in surface.replies[0] and "Narrowed from" in surface.replies[0]
    assert org.id in surface.replies[1]


def run_app(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        app_command(*args),
        cwd=tmp_path,
        env=subprocess_env(
            {
                "HOME": str(tmp_path),
                "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
                "SWITCHBOARD_MEMORY__ENABLED": "true",
                "SWITCHBOARD_ORGANIZATION": "acme",
                **env,
            }
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )


async def org_records(tmp_path: Path) -> list[MemoryRecord]:
    store = SqliteMemoryStore(tmp_path / "data" / "memory")
    try:
        return await store.list("org:acme", 10)
    finally:
        await store.aclose()


async def test_switchboard_memory_remember_in_a_terminal_is_machine_and_admin_only_for_the_org(
    tmp_path: Path,
) -> None:
    refused = run_app(tmp_path, "memory", "remember", "--scope", "org", "Releases are cut on Tuesdays")
    assert refused.returncode == 1 and "Only admins" in refused.stdout, refused.stderr
    assert "You are user:cli:local, not in admins." in refused.stdout  # who, as `admins` names people
    assert await org_records(tmp_path) == []

    done = run_app(
        tmp_path,
        "memory",
        "remember",
        "--scope",
        "org",
        "Releases are cut on Tuesdays",
        SWITCHBOARD_ADMINS='["user:cli:local"]',
    )
    assert done.returncode == 0, done.stderr
    [record] = await org_records(tmp_path)
    assert (record.text, record.origin) == ("Releases are cut on Tuesdays", "machine")
    assert done.stdout.strip() == f"🧠 Remembered as {record.id} in org:acme."


async def test_switchboard_chat_remembers_through_the_same_command(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
        "SWITCHBOARD_MODEL": "anthropic/test-model",
        "SWITCHBOARD_ADMINS": '["user:cli:local"]',
    }
    result = run_app(
        tmp_path, "chat", "--thread", "t", "memory remember --scope org CI runs on every push", **env
    )

    assert result.returncode == 0, result.stderr
    assert fake_anthropic.requests == []
    [record] = await org_records(tmp_path)
    assert (record.text, record.origin) == ("CI runs on every push", "machine")
    assert record.id in result.stdout and "`" not in result.stdout
