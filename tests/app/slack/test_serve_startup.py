"""`switchboard serve` refuses at start-up naming everything missing, one problem a line, never a
traceback."""

from __future__ import annotations

import pytest

from app.slack.serve import main


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
