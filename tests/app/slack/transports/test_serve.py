"""`switchboard serve`: start-up errors in-process, and the real process in HTTP and Socket Mode against
the fake Slack API and the fake Anthropic server (answer, redelivery, SIGTERM drain)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.slack.transports.serve import main
from tests.fakes.model_server import FakeModelServer, Reply
from tests.fakes.slack_api import (
    APP_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    FakeSlackApi,
    SlackDelivery,
    as_app_mention,
)
from tests.memory.service_support import free_port
from tests.ops.raw_sockets import soft_open_file_limit

ROOT = Path(__file__).resolve().parents[4]
_OWN_ENV_PREFIXES = ("SLACK_", "SWITCHBOARD_", "ANTHROPIC_", "OPENAI_", "GITHUB_", "MEMORY_", "PORT")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No Slack/model variables from the outside, no switchboard.toml in the working directory."""
    for name in list(os.environ):
        if name.startswith(_OWN_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_a_missing_bot_token_is_one_line_naming_it_and_the_manifest(
    clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    [line] = [line for line in err.splitlines() if "SLACK_BOT_TOKEN" in line]
    assert "manifest.yml" in line


def test_http_mode_without_a_signing_secret_names_it(
    clean_env: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    [line] = [line for line in err.splitlines() if "SLACK_SIGNING_SECRET" in line]
    assert "SLACK_APP_TOKEN" in line  # the other way: Socket Mode
    assert "manifest.yml" in line


def test_socket_mode_needs_no_signing_secret_but_still_a_model(
    clean_env: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    assert "SLACK_SIGNING_SECRET" not in err
    assert "ANTHROPIC_API_KEY" in err


def test_a_bad_port_is_a_config_error(
    clean_env: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PORT", "eighty")
    assert main([]) == 2
    assert "PORT" in capsys.readouterr().err


@dataclass
class Serve:
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    _seen: asyncio.Event = field(default_factory=asyncio.Event)

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            self.lines.append(raw.decode(errors="replace"))
            self._seen.set()

    async def wait_for_log(self, needle: str, within: float = 60) -> None:
        async with asyncio.timeout(within):
            while not any(needle in line for line in self.lines):
                if self.process.returncode is not None:
                    raise AssertionError("serve exited early:\n" + "".join(self.lines))
                self._seen.clear()
                await self._seen.wait()

    # Generous: with the suite on every core of a shared machine, a process that imports the whole
    # bot can take tens of seconds to listen; the tests are about what it does then.
    async def wait_for_port(self, port: int, within: float = 60) -> None:
        async with asyncio.timeout(within):
            while True:
                if self.process.returncode is not None:
                    raise AssertionError("serve exited early:\n" + "".join(self.lines))
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                await writer.wait_closed()
                return

    async def stop(self, within: float = 30) -> int:
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), within)


@asynccontextmanager
async def serve(tmp_path: Path, env: Mapping[str, str], *args: str) -> AsyncIterator[Serve]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_ENV_PREFIXES)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "serve",
        *args,
        cwd=tmp_path,
        env={**base, "PYTHONPATH": str(ROOT), "SWITCHBOARD_LOG_LEVEL": "info", **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    running = Serve(process)
    reader = asyncio.create_task(running.read_stderr())
    try:
        yield running
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await reader


def _bot_env(slack_api: FakeSlackApi, model: FakeModelServer, tmp_path: Path) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": slack_api.token,
        "SLACK_API_URL": slack_api.base_url,
        "ANTHROPIC_API_KEY": "test-anthropic-key",
        "SWITCHBOARD_MODEL": "anthropic/serve-model",
        "SWITCHBOARD_MODELS__ANTHROPIC__BASE_URL": model.base_url,
        "SWITCHBOARD_MODELS__ANTHROPIC__MAX_RETRIES": "0",
        "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
    }


async def test_serve_in_http_mode_answers_a_signed_mention_and_drains_it_on_sigterm(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    slack_api.add_conversation("C1", "public")
    fake_anthropic.script(Reply(text="Deploys run nightly.", hold=True))
    port = free_port()
    env = {**_bot_env(slack_api, fake_anthropic, tmp_path), "SLACK_SIGNING_SECRET": SIGNING_SECRET}
    async with serve(tmp_path, {**env, "PORT": str(port)}, "--host", "127.0.0.1") as bot:
        await bot.wait_for_port(port)
        slack = SlackDelivery(f"http://127.0.0.1:{port}/slack/events")
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> when do deploys run?")
        assert (await slack.event(as_app_mention(posted))).status == 200
        await asyncio.to_thread(fake_anthropic.wait_for_requests, 1, 30)

        bot.process.send_signal(signal.SIGTERM)  # the answer is still being written …
        await bot.wait_for_log("lifecycle.stopping")
        late = slack_api.post_as_user("C1", "U2", f"<@{BOT_USER_ID}> am I too late?")
        assert (await slack.event(as_app_mention(late))).status == 503  # Slack redelivers it later
        fake_anthropic.release()
        code = await asyncio.wait_for(bot.process.wait(), 30)

    assert code == 0, "".join(bot.lines)
    [reply] = slack_api.bot_replies("C1", posted["ts"])  # … and was delivered before the exit
    assert reply.text == "Deploys run nightly."
    assert slack_api.bot_replies("C1", late["ts"]) == []
    assert len(fake_anthropic.requests) == 1


async def test_serve_under_a_soft_limit_of_256_open_files_holds_300_half_open_connections(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    """The HTTP endpoint raises its open-file limit at start-up, so a flood of half-open connections
    under an ordinary soft limit neither exhausts it nor delays a signed event; a chunked body (Slack
    never sends one, whatever its chunk sizes) gets a 411 at once instead of a wait on its body."""
    slack_api.add_conversation("C1", "public")
    fake_anthropic.default_reply = "Noted."
    port = free_port()
    env = {**_bot_env(slack_api, fake_anthropic, tmp_path), "SLACK_SIGNING_SECRET": SIGNING_SECRET}
    with soft_open_file_limit(256):  # inherited by the child; this process has its own back below
        starting = serve(tmp_path, {**env, "PORT": str(port)}, "--host", "127.0.0.1")
        bot = await starting.__aenter__()
    try:
        await bot.wait_for_port(port)
        slack = SlackDelivery(f"http://127.0.0.1:{port}/slack/events")

        async def timed_mention(text: str) -> float:
            started = time.monotonic()
            assert (await slack.event(as_app_mention(slack_api.post_as_user("C1", "U1", text)))).status == 200
            return time.monotonic() - started

        baseline = await timed_mention(f"<@{BOT_USER_ID}> first")
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(300)]
        try:
            for _, writer in idle:
                writer.write(b"POST /slack/ev")
            await asyncio.sleep(0.2)
            delayed = await timed_mention(f"<@{BOT_USER_ID}> second")
            chunked = b"POST /slack/events HTTP/1.1\r\nHost: bot\r\nTransfer-Encoding: chunked\r\n\r\n"
            statuses = []
            for chunks in (b"ffffffffffffffff\r\nab", b"5\r\nhello\r\n"):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(chunked + chunks)
                async with asyncio.timeout(2):
                    statuses.append((await reader.readline()).split(b" ")[1])
                writer.close()
        finally:
            for _, writer in idle:
                writer.close()
    finally:
        await starting.__aexit__(None, None, None)
    assert delayed - baseline < 1.0
    assert statuses == [b"411", b"411"]


async def test_serve_in_socket_mode_answers_over_the_websocket_once_despite_a_redelivery(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    slack_api.add_conversation("C1", "public")
    fake_anthropic.default_reply = "Hello from Socket Mode."
    env = {**_bot_env(slack_api, fake_anthropic, tmp_path), "SLACK_APP_TOKEN": APP_TOKEN}
    async with serve(tmp_path, env) as bot:
        await slack_api.wait_for_socket(within=60)
        posted = slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi")
        await slack_api.socket_event(as_app_mention(posted), event_id="EvSOCK")
        await slack_api.socket_event(as_app_mention(posted), event_id="EvSOCK", retry_attempt=1)
        await slack_api.wait_until(lambda: len(slack_api.bot_replies("C1", posted["ts"])) == 1)
        code = await bot.stop()

    assert code == 0, "".join(bot.lines)
    assert [m.text for m in slack_api.bot_replies("C1")] == ["Hello from Socket Mode."]
    assert len(fake_anthropic.requests) == 1
    assert any("retry_num=1" in line or '"retry_num": "1"' in line for line in bot.lines)


def _manifest_list(text: str, key: str) -> list[str]:
    """The `- item` lines under `key:` in manifest.yml (no YAML dependency for one flat list)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    indent = len(lines[start + 1]) - len(lines[start + 1].lstrip())
    items = []
    for line in lines[start + 1 :]:
        if not line.strip().startswith("- ") or len(line) - len(line.lstrip()) != indent:
            break
        items.append(line.strip()[2:].split("#")[0].strip())
    return items


def test_the_manifest_subscribes_to_what_the_adapter_handles_with_the_scopes_it_needs() -> None:
    from app.slack.options import SlackOptions

    text = (ROOT / "manifest.yml").read_text(encoding="utf-8")
    assert _manifest_list(text, "bot_events") == [
        "app_home_opened",
        "app_mention",
        "assistant_thread_started",
        "message.channels",
        "message.groups",
        "message.im",
        "message.mpim",
    ]
    assert f"- command: {SlackOptions().slash_command}" in text
    assert "socket_mode_enabled: true" in text
    scopes = set(_manifest_list(text, "bot"))
    needed = {
        "app_mentions:read", "commands", "chat:write", "assistant:write", "reactions:write",
        "channels:history", "groups:history", "im:history", "mpim:history",
        "channels:read", "groups:read", "im:read", "mpim:read",
    }  # fmt: skip
    assert needed <= scopes


def _manifest_block(text: str, key: str) -> list[str]:
    """The stripped lines nested under `key:` (deeper indented than it)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    block = []
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        if line.strip() and not line.strip().startswith("#"):
            block.append(line.strip())
    return block


def test_the_manifest_declares_the_agent_experience_the_home_tab_and_interactivity() -> None:
    from app.slack.agent_view import SUGGESTED_PROMPTS

    text = (ROOT / "manifest.yml").read_text(encoding="utf-8")
    assert "assistant_view:" not in text  # replaced by agent_view (Slack's migration guide)
    agent = _manifest_block(text, "agent_view")
    description = next(line for line in agent if line.startswith("agent_description:"))
    assert 0 < len(description.split(":", 1)[1].strip()) <= 300
    titles = [line.split(":", 1)[1].strip() for line in agent if line.startswith("- title:")]
    messages = [line.split(":", 1)[1].strip() for line in agent if line.startswith("message:")]
    assert [{"title": t, "message": m} for t, m in zip(titles, messages, strict=True)] == list(
        SUGGESTED_PROMPTS
    )
    assert len(titles) <= 4
    assert "home_tab_enabled: true" in _manifest_block(text, "app_home")
    assert "messages_tab_enabled: true" in _manifest_block(text, "app_home")
    assert "is_enabled: true" in _manifest_block(text, "interactivity")


def _poll(predicate: Callable[[], bool], within: float = 20) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _one_line_naming_the_app_token(lines: list[str]) -> str:
    text = "".join(lines)
    assert "Traceback" not in text, text
    found = [line for line in lines if "SLACK_APP_TOKEN" in line]
    assert len(found) == 1, text
    [line] = found
    return line


async def test_a_refused_app_token_exits_at_once_with_one_line_naming_it(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    env = {**_bot_env(slack_api, fake_anthropic, tmp_path), "SLACK_APP_TOKEN": "xapp-mistyped"}
    async with serve(tmp_path, env) as bot:
        code = await asyncio.wait_for(bot.process.wait(), 30)

    assert code != 0
    line = _one_line_naming_the_app_token(bot.lines)
    assert "invalid_auth" in line
    assert len(slack_api.calls_to("apps.connections.open")) == 1  # an auth error is never retried


def unreachable_slack_env(model: FakeModelServer, tmp_path: Path, connect_timeout: float) -> dict[str, str]:
    """Socket Mode against a Slack API nobody listens on, given up after `connect_timeout` seconds."""
    return {
        **_bot_env(FakeSlackApi(), model, tmp_path),
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SLACK_API_URL": f"http://127.0.0.1:{free_port()}/api/",
        "SWITCHBOARD_SLACK__CONNECT_TIMEOUT_SECONDS": str(connect_timeout),
    }


async def test_an_unreachable_slack_is_retried_for_a_bounded_time_then_one_line(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    async with serve(tmp_path, unreachable_slack_env(fake_anthropic, tmp_path, 2)) as bot:
        code = await asyncio.wait_for(bot.process.wait(), 30)

    assert code != 0, "".join(bot.lines)
    line = _one_line_naming_the_app_token(bot.lines)
    assert "cannot open a Socket Mode connection" in line
    assert any("slack.socket_retry" in line for line in bot.lines), "".join(bot.lines)  # retried first


async def test_an_app_token_revoked_while_running_stops_the_bot_with_one_line(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    env = {**_bot_env(slack_api, fake_anthropic, tmp_path), "SLACK_APP_TOKEN": APP_TOKEN}
    async with serve(tmp_path, env) as bot:
        await slack_api.wait_for_socket(within=60)
        slack_api.app_token = "xapp-the-new-one"  # the old token was revoked …
        await slack_api.drop_sockets()  # … and Slack closes the connection: the bot reconnects
        code = await asyncio.wait_for(bot.process.wait(), 30)

    assert code != 0
    line = _one_line_naming_the_app_token(bot.lines)
    assert "invalid_auth" in line
    assert len(slack_api.calls_to("apps.connections.open")) == 2  # connected once, refused once


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_stop_signal_while_connecting_exits_promptly(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path, sig: signal.Signals
) -> None:
    gate = slack_api.hold("apps.connections.open")  # Slack never answers the connect call
    env = {**_bot_env(slack_api, fake_anthropic, tmp_path), "SLACK_APP_TOKEN": APP_TOKEN}
    try:
        async with serve(tmp_path, env) as bot:
            await bot.wait_for_log("memory.store_selected")  # start-up is past; connecting now
            await asyncio.to_thread(_poll, lambda: bool(slack_api.calls_to("apps.connections.open")))
            bot.process.send_signal(sig)
            code = await asyncio.wait_for(bot.process.wait(), 10)
    finally:
        gate.set()

    assert code == 0, "".join(bot.lines)
    assert "Traceback" not in "".join(bot.lines)


def test_a_model_whose_provider_has_no_key_is_one_line_naming_the_variable(
    clean_env: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    monkeypatch.setenv("SWITCHBOARD_MODEL", "anthropic/some-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-only-openai")  # a key, but not this model's provider's
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "ANTHROPIC_API_KEY" in err
    assert "anthropic/some-model" in err
