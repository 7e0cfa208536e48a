"""No test reads the developer's `switchboard.toml` or environment (tests/conftest.py isolates them).

The proof runs the tests that load settings in a child pytest with what a developer following the
README has: a `switchboard.toml` in the repository root and a shell with their model, Slack and
memory variables set. They pass there exactly as on a clean machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.settings import SECRET_ENV
from tests.conftest import is_developer_setting

ROOT = Path(__file__).resolve().parents[1]

DEVELOPER_TOML = """\
model = "anthropic/developer-model"
organization = "devorg"
admins = ["user:cli:local", "user:slack:UDEV"]
data_dir = "/nonexistent/developer-data"

[memory]
enabled = true
max_records_per_scope = 7
"""
DEVELOPER_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-developer",
    "OPENAI_API_KEY": "sk-developer",
    "SWITCHBOARD_MODEL": "openai/developer-model",
    "SWITCHBOARD_ORGANIZATION": "devorg",
    "SWITCHBOARD_MEMORY__SERVICE_URL": "http://127.0.0.1:9/",
    "SWITCHBOARD_LOG_LEVEL": "debug",
    "SLACK_BOT_TOKEN": "xoxb-developer",
    "SLACK_APP_TOKEN": "xapp-developer",
    "MEMORY_TOKEN": "developer-token",
    "DATABASE_URL": "postgresql://developer@127.0.0.1:9/nowhere",
    "GITHUB_TOKEN": "ghp_developer",
}
# The tests that load settings from the working directory or the environment in-process.
SETTINGS_READERS = [
    "tests/config/test_settings.py",
    "tests/memory/stores/test_build.py",
    "tests/app/terminal/test_chat.py::test_with_no_model_configured_any_key_passes_the_credentials_check",
    "tests/app/terminal/test_chat.py::test_a_bad_thread_name_is_refused_before_anything_runs",
    "tests/commands/test_cli.py::test_main_help_needs_no_settings",
]


def test_a_test_starts_in_an_empty_directory_without_the_developers_variables() -> None:
    assert Path.cwd() != ROOT and not any(Path.cwd().iterdir())
    assert not [name for name in os.environ if is_developer_setting(name)]


@pytest.mark.parametrize(
    "name",
    [
        *SECRET_ENV.values(),
        *DEVELOPER_ENV,
        "SWITCHBOARD_CONFIG",
        "SLACK_API_URL",
        "OTEL_TRACES_EXPORTER",
        "PORT",
    ],
)
def test_every_setting_and_credential_variable_is_the_developers(name: str) -> None:
    assert is_developer_setting(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "PYTHONPATH", "SWITCHBOARD_TEST_DATABASE_URL"])
def test_the_suites_own_and_the_systems_variables_are_kept(name: str) -> None:
    assert not is_developer_setting(name)


def test_a_test_that_sets_a_variable_itself_still_gets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_MODEL", "anthropic/test-model")
    assert os.environ["SWITCHBOARD_MODEL"] == "anthropic/test-model"


def test_a_switchboard_toml_in_the_repository_root_and_a_configured_shell_change_no_result() -> None:
    config = ROOT / "switchboard.toml"
    ours = not config.exists()  # a developer's own file is the real case: use it, never touch it
    if ours:
        config.write_text(DEVELOPER_TOML, encoding="utf-8")
    try:
        child = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *SETTINGS_READERS],
            cwd=ROOT,
            env={**os.environ, **DEVELOPER_ENV, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        if ours:
            config.unlink()
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-2000:]
