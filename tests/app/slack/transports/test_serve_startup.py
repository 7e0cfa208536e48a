"""`switchboard serve` refuses at start-up in one line that names everything missing, never a traceback."""

from __future__ import annotations

import pytest

from app.slack.transports.serve import main


def test_a_first_start_names_the_slack_token_and_the_model_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "SLACK_BOT_TOKEN" in err
    assert "model" in err.split("SLACK_BOT_TOKEN", 1)[1]


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
