"""Settings: defaults < config file < environment; secrets only from the environment; one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from config.settings import ConfigError, Settings, load_settings
from memory.stores.build import ScopeCap, validate_scope_cap
from memory.types import DEFAULT_SCOPE_CAP

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A switchboard.toml in the developer's checkout must never leak into these tests."""
    monkeypatch.chdir(tmp_path)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_keep_memory_off_with_the_spec_budgets() -> None:
    settings = load_settings(env={})
    assert settings.memory.enabled is False
    assert (settings.memory.limit, settings.memory.max_tokens) == (8, 800)
    assert settings.memory.max_records_per_scope is None  # unset: the store's (or service's) default
    assert settings.memory.token_env == "MEMORY_TOKEN"
    assert settings.data_dir == Path("./data")
    assert settings.shutdown_deadline_seconds == 900
    assert settings.model is None and settings.organization is None and settings.admins == []
    assert set(settings.models) == {"anthropic", "openai"}


def test_switchboard_toml_in_the_working_directory_is_read(tmp_path: Path) -> None:
    write(tmp_path / "switchboard.toml", 'model = "anthropic/m1"\norganization = "acme"\n')
    settings = load_settings(env={})
    assert settings.model == "anthropic/m1"
    assert settings.organization == "acme"
    assert settings.config_file == Path("switchboard.toml")


def test_the_environment_overrides_the_file_and_nested_keys_merge(tmp_path: Path) -> None:
    config = write(
        tmp_path / "custom.toml",
        'model = "anthropic/from-file"\norganization = "acme"\n[memory]\nlimit = 5\nmax_tokens = 300\n',
    )
    settings = load_settings(
        env={
            "SWITCHBOARD_CONFIG": str(config),
            "SWITCHBOARD_MODEL": "openai/from-env",
            "SWITCHBOARD_MEMORY__ENABLED": "true",
            "SWITCHBOARD_MEMORY__MAX_TOKENS": "400",
            "SWITCHBOARD_DATA_DIR": "/var/lib/switchboard",
            "SWITCHBOARD_ADMINS": '["user:slack:U1", "user:cli:local"]',
        }
    )
    assert settings.model == "openai/from-env"
    assert settings.memory.enabled is True
    assert settings.memory.limit == 5  # from the file, beside the env's memory keys
    assert settings.memory.max_tokens == 400
    assert settings.data_dir == Path("/var/lib/switchboard")
    assert settings.admins == ["user:slack:U1", "user:cli:local"]


def test_channels_agents_and_models_sections(tmp_path: Path) -> None:
    config = write(
        tmp_path / "c.toml",
        """
model = "anthropic/base"
[agents.coding]
model = "local/coder"
[channels."slack:C0123"]
agent = "coding"
repo = "acme/app"
[models.local]
api = "openai"
base_url = "http://127.0.0.1:8000/v1"
[models.openai]
max_tokens_field = "max_tokens"
""",
    )
    settings = load_settings(env={}, config_path=config)
    assert settings.agent_model_ref("coding") == "local/coder"
    assert settings.agent_model_ref("general") == "anthropic/base"
    channel = settings.channel("slack:C0123")
    assert channel is not None and (channel.agent, channel.repo) == ("coding", "acme/app")
    assert settings.models["local"].api == "openai"
    assert settings.models["openai"].max_tokens_field == "max_tokens"
    assert settings.models["anthropic"].api == "anthropic"  # the built-in providers stay


def test_secrets_come_from_the_plain_environment_names_and_never_print() -> None:
    settings = load_settings(
        env={
            "ANTHROPIC_API_KEY": "sk-ant-secret",
            "OPENAI_API_KEY": "sk-openai-secret",
            "SLACK_BOT_TOKEN": "xoxb-secret",
            "GITHUB_TOKEN": "ghp_secret",
            "MEMORY_TOKEN": "mem-secret",
        }
    )
    secrets = settings.secrets
    assert secrets.reveal(secrets.anthropic_api_key) == "sk-ant-secret"
    assert secrets.reveal(secrets.openai_api_key) == "sk-openai-secret"
    assert secrets.reveal(secrets.slack_bot_token) == "xoxb-secret"
    assert secrets.reveal(secrets.github_token) == "ghp_secret"
    assert secrets.reveal(secrets.memory_token) == "mem-secret"
    shown = repr(settings) + str(settings.model_dump())
    for value in ("sk-ant-secret", "sk-openai-secret", "xoxb-secret", "ghp_secret", "mem-secret"):
        assert value not in shown


def test_the_memory_token_is_read_from_the_configured_variable() -> None:
    settings = load_settings(
        env={"SWITCHBOARD_MEMORY__TOKEN_ENV": "TEAM_MEMORY_KEY", "TEAM_MEMORY_KEY": "t0k"}
    )
    assert settings.secrets.reveal(settings.secrets.memory_token) == "t0k"


def test_a_secret_in_the_config_file_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path / "s.toml", '[secrets]\nanthropic_api_key = "sk-ant-leaked"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(env={}, config_path=config)
    assert "secrets come only from the environment" in str(caught.value)
    assert "sk-ant-leaked" not in str(caught.value)


def test_secrets_cannot_be_smuggled_through_prefixed_variables() -> None:
    settings = load_settings(env={"SWITCHBOARD_SECRETS__ANTHROPIC_API_KEY": "sneaky"})
    assert settings.secrets.anthropic_api_key is None


@pytest.mark.parametrize(
    ("env", "key", "value", "allowed"),
    [
        ({"SWITCHBOARD_MEMORY__LIMIT": "0"}, "memory.limit", "'0'", "greater than or equal to 1"),
        ({"SWITCHBOARD_MEMORY__LIMIT": "many"}, "memory.limit", "'many'", "valid integer"),
        ({"SWITCHBOARD_MODEL": "gpt-big"}, "model", "'gpt-big'", "'<provider>/<model>'"),
        (
            {"SWITCHBOARD_MEMORY__STORE": "redis"},
            "memory.store",
            "'redis'",
            "'sqlite', 'in_process' or 'postgres'",
        ),
        ({"SWITCHBOARD_ADMINS": '["slack:U1"]'}, "admins", "['slack:U1']", "user scope key"),
        (
            {"SWITCHBOARD_SHUTDOWN_DEADLINE_SECONDS": "-5"},
            "shutdown_deadline_seconds",
            "'-5'",
            "greater than 0",
        ),
        ({"SWITCHBOARD_MODELS__OPENAI__BASE_URL": "localhost:8000"}, "models.openai.base_url", "", "http://"),
    ],
)
def test_an_invalid_value_is_one_line_naming_key_value_and_what_is_allowed(
    env: dict[str, str], key: str, value: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env=env)
    message = str(caught.value)
    assert "\n" not in message
    assert key in message and value in message and allowed in message
    assert "from SWITCHBOARD_" in message  # where the bad value came from


def test_an_invalid_value_in_the_file_names_the_file(tmp_path: Path) -> None:
    config = write(tmp_path / "bad.toml", '[channels."slack:C1"]\nrepo = "not a repo"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(env={}, config_path=config)
    message = str(caught.value)
    assert "channels.slack:C1.repo = 'not a repo'" in message
    assert str(config) in message and "owner/name" in message


def test_an_unknown_key_is_refused_by_name(tmp_path: Path) -> None:
    config = write(tmp_path / "typo.toml", "[memory]\nenabeld = true\n")
    with pytest.raises(ConfigError, match=r"unknown setting memory\.enabeld"):
        load_settings(env={}, config_path=config)


def test_memory_enabled_without_an_organization_stops_start_up() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"SWITCHBOARD_MEMORY__ENABLED": "true"})
    assert "organization is required when memory.enabled = true" in str(caught.value)
    assert "SWITCHBOARD_ORGANIZATION" in str(caught.value)


def test_settings_built_directly_enforce_the_same_rule() -> None:
    with pytest.raises(ValueError, match="organization"):
        Settings(memory={"enabled": True})  # type: ignore[arg-type]


def test_an_extra_endpoint_must_say_which_protocol_it_speaks() -> None:
    with pytest.raises(ConfigError, match=r"models\.local: set api"):
        load_settings(env={"SWITCHBOARD_MODELS__LOCAL__BASE_URL": "http://127.0.0.1:1/v1"})


def test_broken_toml_and_a_missing_explicit_file_are_config_errors(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.toml", "model = \n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_settings(env={}, config_path=broken)
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(env={"SWITCHBOARD_CONFIG": str(tmp_path / "missing.toml")})


def test_a_list_that_is_not_json_in_the_environment_is_named() -> None:
    with pytest.raises(ConfigError, match="SWITCHBOARD_ADMINS is not valid JSON"):
        load_settings(env={"SWITCHBOARD_ADMINS": "user:slack:U1"})


def test_the_commented_example_config_is_valid_and_keeps_memory_off() -> None:
    settings = load_settings(env={}, config_path=REPO_ROOT / "switchboard.example.toml")
    assert settings.memory.enabled is False
    assert settings.data_dir == Path("./data")
    assert settings.slack.port == 3000
    assert settings.memory.max_records_per_scope is None  # copying it sends no cap: the store's own applies


def test_a_missing_config_file_says_what_named_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml does not exist \(named by --config\)"):
        load_settings({}, config_path=tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"does not exist \(named by SWITCHBOARD_CONFIG\)"):
        load_settings({"SWITCHBOARD_CONFIG": str(tmp_path / "nope.toml")})


@pytest.mark.parametrize(
    ("toml", "env"),
    [
        ("max_records_per_scope = true", {}),
        ("max_records_per_scope = false", {}),
        ("", {"SWITCHBOARD_MEMORY__MAX_RECORDS_PER_SCOPE": "true"}),
        ("", {"SWITCHBOARD_MEMORY__MAX_RECORDS_PER_SCOPE": "TRUE"}),
        ("", {"SWITCHBOARD_MEMORY__MAX_RECORDS_PER_SCOPE": "lots"}),
    ],
    ids=["toml true", "toml false", "env true", "env TRUE", "env text"],
)
def test_a_boolean_or_text_cap_is_refused_with_the_cap_warning_and_the_default(
    tmp_path: Path, toml: str, env: dict[str, str]
) -> None:
    config = write(tmp_path / "switchboard.toml", f"[memory]\n{toml}\n")
    settings = load_settings(env=env, config_path=config)  # start-up goes on: no ConfigError
    with capture_logs() as logs:
        cap = validate_scope_cap(settings.memory.max_records_per_scope)
    assert cap == ScopeCap(DEFAULT_SCOPE_CAP, configured=True)  # never a cap of 1
    (warning,) = [e for e in logs if e.get("key") == "memory.max_records_per_scope"]
    assert warning["log_level"] == "warning" and warning["using_default"] == DEFAULT_SCOPE_CAP


def test_a_numeric_cap_from_the_environment_is_that_number() -> None:
    settings = load_settings(env={"SWITCHBOARD_MEMORY__MAX_RECORDS_PER_SCOPE": " 250 "})
    assert settings.memory.max_records_per_scope == 250
    assert validate_scope_cap(settings.memory.max_records_per_scope) == ScopeCap(250, configured=True)


# --- refused, never guessed ----------------------------------------------------------------------


def test_a_directory_given_as_the_config_is_named_as_a_directory(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    with pytest.raises(ConfigError) as caught:
        load_settings(env={}, config_path=tmp_path / "conf")
    assert str(caught.value) == (
        f"config error: config file {tmp_path / 'conf'} is a directory, not a TOML file (named by --config)"
    )
    with pytest.raises(ConfigError, match=r"is a directory, not a TOML file \(named by SWITCHBOARD_CONFIG\)"):
        load_settings(env={"SWITCHBOARD_CONFIG": str(tmp_path / "conf")})


def test_a_directory_where_the_default_config_file_belongs_is_named_not_skipped(tmp_path: Path) -> None:
    (tmp_path / "switchboard.toml").mkdir()  # the fixture runs each test in tmp_path
    with pytest.raises(ConfigError, match=r"config file switchboard\.toml is a directory"):
        load_settings(env={})


def test_a_config_that_is_not_a_regular_file_is_named(tmp_path: Path) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"config\.fifo is not a regular file \(named by --config\)"):
        load_settings(env={}, config_path=fifo)


def test_an_unreadable_config_file_is_named_with_the_reason(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file whatever its permissions")
    config = write(tmp_path / "locked.toml", 'model = "openai/x"\n')
    config.chmod(0)
    with pytest.raises(ConfigError, match=r"cannot read config file .*locked\.toml: Permission denied"):
        load_settings(env={}, config_path=config)


def test_the_in_process_store_is_named_in_process_and_the_old_name_is_refused_naming_the_new() -> None:
    memory_on = {"SWITCHBOARD_ORGANIZATION": "acme", "SWITCHBOARD_MEMORY__ENABLED": "true"}
    settings = load_settings(env={**memory_on, "SWITCHBOARD_MEMORY__STORE": "in_process"})
    assert settings.memory.store == "in_process"
    with pytest.raises(ConfigError) as caught:
        load_settings(env={**memory_on, "SWITCHBOARD_MEMORY__STORE": "memory"})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "config error: memory.store = 'memory' (from SWITCHBOARD_MEMORY__STORE): renamed"
    )
    assert "memory.store = 'in_process'" in message


def test_a_service_url_without_its_token_is_refused_naming_both() -> None:
    env = {
        "SWITCHBOARD_ORGANIZATION": "acme",
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_MEMORY__SERVICE_URL": "http://memory:8787",
        "SWITCHBOARD_MEMORY__TOKEN_ENV": "TEAM_MEMORY_TOKEN",
    }
    with pytest.raises(ConfigError) as caught:
        load_settings(env={**env, "MEMORY_TOKEN": "the wrong variable"})
    assert str(caught.value).startswith(
        "config error: memory.service_url = 'http://memory:8787' needs TEAM_MEMORY_TOKEN: "
    )
    assert load_settings(env={**env, "TEAM_MEMORY_TOKEN": "t"}).memory.service_url == "http://memory:8787"
    # memory off, or an explicit store: the URL is not used, so nothing is missing
    load_settings(env={**env, "SWITCHBOARD_MEMORY__ENABLED": "false"})
    load_settings(env={**env, "SWITCHBOARD_MEMORY__STORE": "sqlite"})


def test_review_is_off_with_fourteen_days_unless_set() -> None:
    settings = load_settings(env={})
    assert (settings.memory.review, settings.memory.review_days) == ("off", 14)
    chosen = load_settings(
        env={"SWITCHBOARD_MEMORY__REVIEW": "shared", "SWITCHBOARD_MEMORY__REVIEW_DAYS": "3"}
    )
    assert (chosen.memory.review, chosen.memory.review_days) == ("shared", 3)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        *(
            ("review_days", value, "above 0 and at most 365 (default 14)")
            for value in ["0", "-1", "366", "nan", "soon", "true"]
        ),
        *(
            ("compact_after_seconds", value, "from 1 to 86400 (default 300)")
            for value in ["0", "-1", "0.5", "86401", "nan", "soon", "true"]
        ),
        *(
            ("review_digest_hours", value, "from 0 (no digest) to 168 (default 24)")
            for value in ("-1", "169", "nan", "daily", "true")
        ),
    ],
)
def test_a_bad_number_of_days_seconds_or_hours_names_the_key_the_range_and_the_default(
    key: str, value: str, says: str
) -> None:
    variable = f"SWITCHBOARD_MEMORY__{key.upper()}"
    with pytest.raises(ConfigError) as caught:
        load_settings(env={variable: value})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"config error: memory.{key} = {value!r} (from {variable})")
    assert says in message


def test_the_review_digest_comes_every_24_hours_unless_set_and_zero_turns_it_off() -> None:
    assert load_settings(env={}).memory.review_digest_hours == 24
    assert load_settings(env={"SWITCHBOARD_MEMORY__REVIEW_DIGEST_HOURS": "0"}).memory.review_digest_hours == 0
    assert load_settings(env={"SWITCHBOARD_MEMORY__REVIEW_DIGEST_HOURS": "6"}).memory.review_digest_hours == 6


def test_a_review_mode_that_is_neither_off_nor_shared_names_both_and_the_default(tmp_path: Path) -> None:
    config = write(tmp_path / "switchboard.toml", '[memory]\nreview = "all"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(env={}, config_path=config)
    assert str(caught.value) == (
        f"config error: memory.review = 'all' (from {config}): expected 'off' or 'shared' (default 'off')"
    )


def test_compact_after_seconds_is_three_hundred_unless_set() -> None:
    assert load_settings(env={}).memory.compact_after_seconds == 300
    chosen = load_settings(env={"SWITCHBOARD_MEMORY__COMPACT_AFTER_SECONDS": "60"})
    assert chosen.memory.compact_after_seconds == 60
