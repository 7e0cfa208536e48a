"""`switchboard serve` refuses at start-up naming everything missing, one problem a line, never a
traceback."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from app.slack.transports.serve import main
from tests.app.slack.transports.test_serve import _bot_env, serve
from tests.fakes.model_server import FakeModelServer
from tests.fakes.slack_api import SIGNING_SECRET, FakeSlackApi


def test_a_first_start_names_the_slack_token_the_model_and_its_credentials_one_a_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3
    assert all(line.startswith("switchboard serve: ") and len(line) <= 200 for line in lines)
    token, model, credentials = lines
    assert "SLACK_BOT_TOKEN" in token
    assert "no model is configured" in model
    assert "ANTHROPIC_API_KEY" in credentials
    assert " and no " not in " ".join(lines)


def test_an_unknown_log_level_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("SWITCHBOARD_MODEL", "openai/gpt-test")
    monkeypatch.setenv("SWITCHBOARD_LOG_LEVEL", "bogus")
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "bogus" in err


async def test_http_mode_with_its_port_taken_is_one_line_and_exit_2(
    slack_api: FakeSlackApi, fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    env = {
        **_bot_env(slack_api, fake_anthropic, tmp_path),
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SWITCHBOARD_LOG_LEVEL": "warning",  # the start-up's info lines aside: only what went wrong
    }
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with serve(tmp_path, {**env, "PORT": str(port)}, "--host", "127.0.0.1") as bot:
            code = await asyncio.wait_for(bot.process.wait(), 60)

    assert code == 2, "".join(bot.lines)
    [line] = [line for line in bot.lines if line.strip()]
    assert line.startswith("switchboard serve: cannot listen on 127.0.0.1:") and str(port) in line
