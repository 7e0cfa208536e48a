"""Fixtures of the local fakes (model servers, Slack Web API, GitHub API) live in tests/fakes/.

Hypothesis runs without its per-example deadline: a busy 2-core CI machine makes wall-clock deadlines
flaky, and speed is measured in bench/, never in tests.

Every test is hermetic: it starts in an empty working directory (so the default `switchboard.toml`
a developer keeps in the repository root is never read) with none of the developer's settings or
provider credentials in the environment. A test that wants one sets it itself (`monkeypatch.setenv`,
a subprocess's `env=`), after this fixture has run.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, settings

from config.settings import SECRET_ENV

settings.register_profile("switchboard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("switchboard")

pytest_plugins = [
    "tests.fakes.model_server",
    "tests.fakes.slack_api",
    "tests.fakes.github_api",
    "tests.ops.tracing_support",
]

# What configures Switchboard or one of its providers from a developer's shell.
DEVELOPER_PREFIXES = ("SWITCHBOARD_", "SLACK_", "ANTHROPIC_", "OPENAI_", "GITHUB_", "OTEL_")
DEVELOPER_NAMES = frozenset({*SECRET_ENV.values(), "MEMORY_TOKEN", "DATABASE_URL", "PORT"})
# The test suite's own knobs (e.g. SWITCHBOARD_TEST_DATABASE_URL, the PostgreSQL to test against).
TEST_PREFIX = "SWITCHBOARD_TEST_"


def is_developer_setting(name: str) -> bool:
    upper = name.upper()
    if upper.startswith(TEST_PREFIX):
        return False
    return upper in DEVELOPER_NAMES or upper.startswith(DEVELOPER_PREFIXES)


@pytest.fixture(scope="session", autouse=True)
def postgres_worker_database() -> Iterator[None]:
    """Where the selected tests use the PostgreSQL test server, each xdist worker works in a database
    of its own (tests/memory/postgres_support.py); a selection without them never connects."""
    support = sys.modules.get("tests.memory.postgres_support")
    if support is None:
        yield
        return
    with support.worker_database():
        yield


@pytest.fixture(autouse=True)
def hermetic_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """An empty working directory and an environment without the developer's settings, per test."""
    for name in [name for name in os.environ if is_developer_setting(name)]:
        monkeypatch.delenv(name)
    cwd = tmp_path_factory.mktemp("cwd", numbered=True)
    monkeypatch.chdir(cwd)
    yield cwd
    # An entry point run in-process (`main([...])`) configures logging for the process: undo it, so
    # the next test logs (and captures logs) as if it ran first.
    structlog.reset_defaults()
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_switchboard", False)]:
        root.removeHandler(handler)
