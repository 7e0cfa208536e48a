"""`switchboard chat` as a real subprocess against the fake model servers, plus its small parts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from app.incoming import HistoryTurn
from app.terminal.chat import ChatThreads, TerminalSurface, main
from tests.app.runtime_support import app_command, subprocess_env
from tests.fakes.model_server import FakeModelServer, error_reply
from tests.memory.postgres_support import unreachable_dsn

TIMEOUT = 60


def chat_env(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """A hermetic environment for the chat, its home and data directory under `tmp_path`."""
    return subprocess_env({"HOME": str(tmp_path), "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"), **env})


def run_chat(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        app_command("chat", *args),
        cwd=tmp_path,
        env=chat_env(tmp_path, env),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def anthropic_env(fake: FakeModelServer) -> dict[str, str]:
    return {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "SWITCHBOARD_MODEL": "anthropic/test-model",
        "SWITCHBOARD_MODELS__ANTHROPIC__MAX_RETRIES": "0",
    }


def test_a_thread_continues_across_invocations_with_the_first_exchange_as_history(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    fake_anthropic.script("Deploys go out on Fridays.", "Yes, Fridays at noon.")
    env = anthropic_env(fake_anthropic)

    first = run_chat(tmp_path, env, "--thread", "t", "when do deploys go out?")
    second = run_chat(tmp_path, env, "--thread", "t", "so, fridays?")

    assert (first.returncode, first.stdout) == (0, "Deploys go out on Fridays.\n"), first.stderr
    assert (second.returncode, second.stdout) == (0, "Yes, Fridays at noon.\n"), second.stderr
    earlier, later = fake_anthropic.bodies()
    assert earlier["messages"] == [{"role": "user", "content": "when do deploys go out?"}]
    assert later["messages"] == [
        {"role": "user", "content": "when do deploys go out?"},
        {"role": "assistant", "content": "Deploys go out on Fridays."},
        {"role": "user", "content": "so, fridays?"},
    ]
    assert "background_memory" not in json.dumps(later)
    stored = json.loads((tmp_path / "data" / "chat" / "t.json").read_text())
    assert [turn["role"] for turn in stored["turns"]] == ["user", "assistant", "user", "assistant"]


def test_without_model_credentials_it_exits_with_one_line_naming_the_models_own_variable(
    tmp_path: Path,
) -> None:
    result = run_chat(tmp_path, {"SWITCHBOARD_MODEL": "anthropic/test-model"}, "--thread", "t", "hi")
    assert result.returncode != 0 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    for name in ("ANTHROPIC_API_KEY", "models.anthropic.base_url", "anthropic/test-model"):
        assert name in lines[0]


def test_another_providers_key_does_not_count_for_the_configured_model(tmp_path: Path) -> None:
    env = {"SWITCHBOARD_MODEL": "anthropic/test-model", "OPENAI_API_KEY": "sk-openai-only"}
    result = run_chat(tmp_path, env, "--thread", "t", "hi")
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert "ANTHROPIC_API_KEY" in line and "TypeError" not in line


def test_with_no_model_configured_any_key_passes_the_credentials_check() -> None:
    from app.runtime import credentials_problem
    from config.settings import load_settings

    assert credentials_problem(load_settings({"OPENAI_API_KEY": "k"}), {}) is None
    assert "ANTHROPIC_API_KEY" in (credentials_problem(load_settings({}), {}) or "")


def test_every_configured_model_is_checked_against_its_own_provider() -> None:
    from app.runtime import credentials_problem
    from config.settings import load_settings

    env = {
        "ANTHROPIC_API_KEY": "k",
        "SWITCHBOARD_MODEL": "anthropic/main-model",
        "SWITCHBOARD_AGENTS": '{"coding": {"model": "openai/code-model"}}',
    }
    problem = credentials_problem(load_settings(env), env) or ""
    assert "agents.coding.model" in problem and "OPENAI_API_KEY" in problem
    local = {**env, "SWITCHBOARD_MODELS__OPENAI__BASE_URL": "http://127.0.0.1:1/v1"}
    assert credentials_problem(load_settings(local), local) is None


def test_an_invalid_setting_exits_with_the_config_error_line(tmp_path: Path) -> None:
    result = run_chat(tmp_path, {"ANTHROPIC_API_KEY": "k", "SWITCHBOARD_MEMORY__LIMIT": "0"}, "hi")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "switchboard chat: config error: memory.limit = '0' (from SWITCHBOARD_MEMORY__LIMIT): "
        "Input should be greater than or equal to 1"
    )


def test_a_local_openai_compatible_server_needs_no_key(fake_openai: FakeModelServer, tmp_path: Path) -> None:
    fake_openai.script("local model says hi")
    env = {
        "SWITCHBOARD_MODEL": "openai/local-model",
        "SWITCHBOARD_MODELS__OPENAI__BASE_URL": fake_openai.base_url,
        "SWITCHBOARD_MODELS__OPENAI__MAX_RETRIES": "0",
    }
    result = run_chat(tmp_path, env, "hello")
    assert (result.returncode, result.stdout) == (0, "local model says hi\n"), result.stderr
    assert fake_openai.bodies()[0]["model"] == "local-model"


def test_memory_commands_answer_without_a_model_turn(fake_anthropic: FakeModelServer, tmp_path: Path) -> None:
    result = run_chat(tmp_path, anthropic_env(fake_anthropic), "--thread", "c", "memory", "list")
    assert result.returncode == 0, result.stderr
    assert "memory" in result.stdout.lower()
    assert fake_anthropic.requests == []
    assert not (tmp_path / "data" / "chat" / "c.json").exists()  # commands are not conversation


def test_a_bad_thread_name_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--thread", "../../etc/passwd", "hi"]) == 2
    assert "--thread" in capsys.readouterr().err


def test_thread_files_round_trip_and_skip_malformed_turns(tmp_path: Path) -> None:
    threads = ChatThreads(tmp_path / "chat")
    assert threads.load("t") == ()
    threads.append("t", "q1", "a1")
    threads.append("t", "q2", "a2")
    assert threads.load("t") == (
        HistoryTurn("user", "q1"),
        HistoryTurn("assistant", "a1"),
        HistoryTurn("user", "q2"),
        HistoryTurn("assistant", "a2"),
    )
    data = json.loads(threads.path("t").read_text())
    data["turns"].append({"role": "system", "text": "injected"})
    threads.path("t").write_text(json.dumps(data))
    assert len(threads.load("t")) == 4


async def test_the_terminal_surface_prints_replies_and_keeps_status_off_stdout(tmp_path: Path) -> None:
    out = (tmp_path / "out").open("w+")
    surface = TerminalSurface(out, None)
    await surface.set_status("Thinking…")
    await surface.send_reply("answer\n")
    out.seek(0)
    assert out.read() == "answer\n"


def test_an_unreachable_postgres_memory_store_stops_start_up_with_one_line_naming_the_setting(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    env = {
        **anthropic_env(fake_anthropic),
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_ORGANIZATION": "acme",
        "SWITCHBOARD_MEMORY__STORE": "postgres",
        "DATABASE_URL": unreachable_dsn(),
    }
    result = run_chat(tmp_path, env, "--thread", "t", "hi")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("switchboard chat: memory store unavailable:")
    assert "DATABASE_URL" in lines[0] and "sekret" not in lines[0]
    assert fake_anthropic.requests == []


def test_without_a_model_ref_it_exits_with_one_line_saying_where_to_set_it(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    env = {k: v for k, v in anthropic_env(fake_anthropic).items() if k != "SWITCHBOARD_MODEL"}
    result = run_chat(tmp_path, env, "--thread", "t", "hi")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        'switchboard chat: no model is configured for the general agent: set model = "<provider>/<model>" '
        "(or agents.general.model) in switchboard.toml, or SWITCHBOARD_MODEL"
    ]
    assert fake_anthropic.requests == []


def test_a_chat_turn_is_one_trace_with_otel_traces_exporter_console(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    fake_anthropic.script("Deploys go out on Fridays.")
    env = {**anthropic_env(fake_anthropic), "OTEL_TRACES_EXPORTER": "console"}

    done = run_chat(tmp_path, env, "--thread", "t", "when do deploys go out? marker-question-9")

    assert done.returncode == 0, done.stderr
    spans = {
        entry["name"]: entry
        for entry in (json.loads(line) for line in done.stderr.splitlines() if line.startswith("{"))
        if "context" in entry
    }
    turn, dispatch, call = spans["chat.turn"], spans["dispatch"], spans["model.call"]
    assert turn["parent_id"] is None
    assert dispatch["parent_id"] == turn["context"]["span_id"]
    assert call["parent_id"] == dispatch["context"]["span_id"]
    assert call["attributes"]["gen_ai.request.model"] == "test-model"
    assert spans["chat.turn"]["resource"]["attributes"]["service.name"] == "switchboard-chat"
    assert "marker-question-9" not in json.dumps(list(spans.values()))
    assert "Fridays" not in json.dumps(list(spans.values()))


def test_chat_prints_no_log_line_unless_asked_and_then_one_console_format(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    # A model failure: the reply says so, and the bot logs a warning about it.
    fake_anthropic.script(error_reply(500, "boom"))
    quiet = run_chat(tmp_path, anthropic_env(fake_anthropic), "--thread", "q", "when do we deploy?")
    assert quiet.returncode == 1 and quiet.stdout.startswith("⚠️")
    assert quiet.stderr == ""

    fake_anthropic.script(error_reply(500, "boom"))
    loud = run_chat(tmp_path, anthropic_env(fake_anthropic), "--verbose", "--thread", "v", "deploys?")
    assert loud.returncode == 1 and loud.stdout.startswith("⚠️")
    lines = loud.stderr.splitlines()
    assert lines and not any(line.lstrip().startswith("{") for line in lines)  # never JSON here
    assert any("[warning  ] dispatch.model_failed" in line for line in lines)
    assert any("[info     ] dispatch.start" in line for line in lines)


def test_a_bad_log_level_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    result = run_chat(tmp_path, {"SWITCHBOARD_LOG_LEVEL": "loud"}, "--thread", "t", "hi")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "switchboard chat: log level 'loud' is not one of debug|info|warning|error|off"
    )


def test_the_thread_file_keeps_redacted_text_only(tmp_path: Path) -> None:
    threads = ChatThreads(tmp_path / "chat")
    key = "sk-ant-api03-" + "Q" * 40 + "AA"
    threads.append("t", f"our key is {key}, keep it", f"Noted: {key}")
    written = (tmp_path / "chat" / "t.json").read_text(encoding="utf-8")
    assert key not in written and "[REDACTED]" in written
    assert [turn.text for turn in threads.load("t")] == [
        "our key is [REDACTED], keep it",
        "Noted: [REDACTED]",
    ]


def test_a_data_directory_it_cannot_write_stops_it_naming_the_path_before_any_model_call(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    (tmp_path / "data").write_text("a file where the data directory should be")
    result = run_chat(tmp_path, anthropic_env(fake_anthropic), "--thread", "t1", "hi")

    assert (result.returncode, result.stdout) == (2, "")
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("switchboard chat: config error: data_dir = ") and str(tmp_path / "data") in line
    assert fake_anthropic.requests == []
