"""Settings: defaults < a TOML config file < the environment; secrets only from the environment.

`load_settings()` is the one way in. It reads `switchboard.toml` (or the file `SWITCHBOARD_CONFIG` or
`config_path` names), then `SWITCHBOARD_…` variables (nested keys joined with `__`, e.g.
`SWITCHBOARD_MEMORY__ENABLED=true`; lists and tables as JSON), and the secrets by their plain names
(`ANTHROPIC_API_KEY`, …). Anything invalid stops start-up with one `ConfigError` line naming the key, the
value and what is allowed.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError
from pydantic_settings.sources.utils import parse_env_vars

ENV_PREFIX = "SWITCHBOARD_"
CONFIG_ENV = "SWITCHBOARD_CONFIG"
DEFAULT_CONFIG_FILE = "switchboard.toml"

# The only names a secret is ever read from (plus memory.token_env, default MEMORY_TOKEN).
SECRET_ENV = {
    "slack_bot_token": "SLACK_BOT_TOKEN",
    "slack_signing_secret": "SLACK_SIGNING_SECRET",
    "slack_app_token": "SLACK_APP_TOKEN",
    "anthropic_api_key": "ANTHROPIC_API_KEY",
    "openai_api_key": "OPENAI_API_KEY",
    "github_token": "GITHUB_TOKEN",
    "database_url": "DATABASE_URL",
    "metrics_token": "METRICS_TOKEN",
}

_MODEL_REF = re.compile(r"^[a-z0-9][a-z0-9_.-]*/\S+$")
_PROVIDER_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_NAMESPACED_ID = re.compile(r"^[a-z][a-z0-9_-]*:\S+$")
_AGENT_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")

# How long a pending record waits for review before it expires, when nothing is configured, and the most.
DEFAULT_REVIEW: Literal["off", "shared"] = "off"
DEFAULT_REVIEW_DAYS = 14.0
MAX_REVIEW_DAYS = 365
# How soon after an erasure the PostgreSQL store rewrites its tables so no erased word stays in its files.
DEFAULT_COMPACT_AFTER_SECONDS = 300.0
COMPACT_AFTER_RANGE = (1.0, 86_400.0)
# Admins hear of what waits at most once per this many hours; 0 turns the digest off. The ceiling is the
# longest a shared claim lives (memory/rules/claims.py), which is what keeps the window across replicas.
DEFAULT_REVIEW_DIGEST_HOURS = 24.0
MAX_REVIEW_DIGEST_HOURS = 168


class ConfigError(ValueError):
    """A setting is missing or invalid; the message is one line for the operator."""


def check_model_ref(value: str) -> str:
    """`<provider>/<model>`: a lower-case provider name, a slash, a model name without spaces."""
    if not _MODEL_REF.match(value):
        raise ValueError("expected '<provider>/<model>', e.g. 'anthropic/<model>' or 'openai/<model>'")
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")
    return value or None


class ProviderSettings(_Section):
    """One model provider endpoint. `api` says which wire protocol it speaks."""

    api: Literal["anthropic", "openai"] | None = None
    base_url: str | None = None
    timeout: float | None = Field(default=None, gt=0, description="seconds; unset → the SDK's default")
    max_retries: int | None = Field(default=None, ge=0, le=10, description="unset → the SDK's default")
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    # the environment variable holding this endpoint's key (anthropic/openai: ANTHROPIC_/OPENAI_API_KEY)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    _url = field_validator("base_url")(_check_url)


def _default_models() -> dict[str, ProviderSettings]:
    return {"anthropic": ProviderSettings(api="anthropic"), "openai": ProviderSettings(api="openai")}


class AgentSettings(_Section):
    model: str | None = None
    instructions: str | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return None if value is None else check_model_ref(value)


class ChannelSettings(_Section):
    agent: str | None = None
    repo: str | None = None
    # This channel's own scope keeps its records this many days (overrides memory.ttl_days there).
    memory_ttl_days: float | None = Field(default=None, gt=0, le=36_500)

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str | None) -> str | None:
        if value is not None and not _REPO.match(value):
            raise ValueError("expected 'owner/name'")
        return value


def _number(value: Any) -> float | None:
    """A setting's number, from TOML or from the environment's text; None when it is not one (a
    boolean is not)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _within(value: Any, low: float, high: float, says: str, default: float) -> float:
    """A setting's number from `low` to `high` inclusive, or an error saying the range and the default."""
    number = _number(value)
    if number is None or not low <= number <= high:  # NaN fails both comparisons
        raise ValueError(f"expected a number of {says} (default {default:g})")
    return number


class MemorySettings(_Section):
    enabled: bool = False
    limit: int = Field(default=8, ge=1, le=50)
    max_tokens: int = Field(default=800, ge=1, le=100_000)
    model: str | None = None  # checked when reflection runs: a bad ref warns and skips, never fails a run
    # Any value reaches memory/build.py, which validates it once.
    # Unset is None, not 500: the memory service then applies its own default, and no cap is sent.
    max_records_per_scope: Any = None
    # `in_process` keeps records in this process only (tests, demos); `memory` was its old name.
    store: Literal["sqlite", "in_process", "postgres"] | None = None
    service_url: str | None = None
    token_env: str = Field(default="MEMORY_TOKEN", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    timeout: float = Field(default=5.0, gt=0, le=300)
    # Retrieval: `spec` = the seed's exact scorer; `v2` = stems + IDF (+ the embedder's cosine).
    ranking: Literal["v2", "spec"] = "v2"
    # The local semantic signal (v2 only): `none` ranks lexically; `minilm` needs `switchboard[minilm]`.
    embedder: Literal["wordllama", "minilm", "none"] = "wordllama"
    # The cosine's share of the relevance; unset → the embedder's tuned weight (wordllama 0.3, minilm 0.45).
    semantic_weight: float | None = Field(default=None, ge=0, le=1)
    semantic_threshold: float = Field(
        default=0.7, ge=-1, le=1
    )  # the cosine a record needs with no shared stem
    # Retention (docs/memory.md, "Retention, erasure and the read audit"): unset keeps records until
    # forgotten.
    ttl_days: float | None = Field(default=None, gt=0, le=36_500)
    audit_retention_days: float = Field(default=30.0, gt=0, le=36_500)
    # Curation (docs/memory.md, "Review what enters shared memory"): `shared` holds reflection's org, repo and
    # channel writes as pending until an admin approves; a pending record expires after review_days.
    review: Literal["off", "shared"] = DEFAULT_REVIEW
    review_days: float = DEFAULT_REVIEW_DAYS
    # PostgreSQL (docs/memory.md "PostgreSQL forgets"): erased words leave its files this soon.
    compact_after_seconds: float = DEFAULT_COMPACT_AFTER_SECONDS
    # Under review, each admin gets a Slack DM saying what waits, at most once per this many hours.
    review_digest_hours: float = DEFAULT_REVIEW_DIGEST_HOURS

    _url = field_validator("service_url")(_check_url)

    @field_validator("review", mode="before")
    @classmethod
    def _review(cls, value: Any) -> Any:
        if value not in ("off", "shared"):
            raise ValueError(f"expected 'off' or 'shared' (default {DEFAULT_REVIEW!r})")
        return value

    @field_validator("review_days", mode="before")
    @classmethod
    def _review_days(cls, value: Any) -> float:
        """Days as a number (the environment's text too), above 0 and at most MAX_REVIEW_DAYS."""
        number = _number(value)
        if number is None or not 0 < number <= MAX_REVIEW_DAYS:  # NaN fails both comparisons
            raise ValueError(
                f"expected a number of days above 0 and at most {MAX_REVIEW_DAYS} "
                f"(default {DEFAULT_REVIEW_DAYS:g})"
            )
        return number

    @field_validator("compact_after_seconds", mode="before")
    @classmethod
    def _compact_after(cls, value: Any) -> float:
        """Seconds as a number (the environment's text too), within COMPACT_AFTER_RANGE."""
        low, high = COMPACT_AFTER_RANGE
        return _within(value, low, high, f"seconds from {low:g} to {high:g}", DEFAULT_COMPACT_AFTER_SECONDS)

    @field_validator("review_digest_hours", mode="before")
    @classmethod
    def _review_digest_hours(cls, value: Any) -> float:
        """Hours as a number (the environment's text too), 0 (off) to MAX_REVIEW_DIGEST_HOURS."""
        says = f"hours from 0 (no digest) to {MAX_REVIEW_DIGEST_HOURS}"
        return _within(value, 0, MAX_REVIEW_DIGEST_HOURS, says, DEFAULT_REVIEW_DIGEST_HOURS)

    @field_validator("store", mode="before")
    @classmethod
    def _renamed_store(cls, value: Any) -> Any:
        """The old name of the in-process store is refused with its new name, never guessed at."""
        if value == "memory":
            raise ValueError(
                "renamed: set memory.store = 'in_process' (records in this process only, lost on restart)"
            )
        return value

    @field_validator("max_records_per_scope", mode="before")
    @classmethod
    def _cap_from_text(cls, value: Any) -> Any:
        """Text (the environment's) that is a number becomes that number; anything else stays as
        given — a TOML `true` stays a boolean, `"true"` stays text — so memory/build.py refuses it
        with its warning instead of pydantic reading `true` as a cap of 1."""
        if isinstance(value, str):
            for parse in (int, float):
                try:
                    return parse(value.strip())
                except ValueError:
                    continue
        return value


class GithubSettings(_Section):
    api_url: str | None = None

    _url = field_validator("api_url")(_check_url)


class SlackSettings(_Section):
    api_url: str | None = None
    port: int = Field(default=3000, ge=1, le=65535)
    respond_to_bots: bool = False
    multi_workspace: bool = False  # ids become slack:T…:U… / slack:T…:C… (one app, several workspaces)
    # Socket Mode: how long a network failure at connect time is retried before start-up gives up.
    connect_timeout_seconds: float = Field(default=20.0, gt=0, le=120)

    _url = field_validator("api_url")(_check_url)


class Secrets(_Section):
    """Credentials, read only from the environment; never in a config file, never logged."""

    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    openai_api_key: SecretStr | None = None
    github_token: SecretStr | None = None
    memory_token: SecretStr | None = None
    database_url: SecretStr | None = None
    metrics_token: SecretStr | None = None  # the bearer token /metrics answers (HTTP mode)

    @staticmethod
    def reveal(value: SecretStr | None) -> str | None:
        return value.get_secret_value() if value is not None else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    model: str | None = None
    data_dir: Path = Path("./data")
    organization: str | None = None
    admins: list[str] = Field(default_factory=list)
    models: dict[str, ProviderSettings] = Field(default_factory=_default_models)
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    channels: dict[str, ChannelSettings] = Field(default_factory=dict)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    github: GithubSettings = Field(default_factory=GithubSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    shutdown_deadline_seconds: float = Field(default=900.0, gt=0, le=86_400)
    secrets: Secrets = Field(default_factory=Secrets, exclude=True)
    config_file: Path | None = Field(default=None, exclude=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings layers the file and the environment itself; Settings(...) validates what it gets.
        return (init_settings,)

    @field_validator("model")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return None if value is None else check_model_ref(value)

    @field_validator("organization")
    @classmethod
    def _organization(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value or len(value) > 196 or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError("expected a non-empty name without whitespace, at most 196 characters")
        return value

    @field_validator("admins")
    @classmethod
    def _admins(cls, value: list[str]) -> list[str]:
        for item in value:
            if not item.startswith("user:") or not _NAMESPACED_ID.match(item[len("user:") :]):
                raise ValueError(f"{item!r} is not a user scope key like 'user:slack:U0123'")
        return value

    @field_validator("models")
    @classmethod
    def _models(cls, value: dict[str, ProviderSettings]) -> dict[str, ProviderSettings]:
        merged = _default_models()
        for name, provider in value.items():
            if not _PROVIDER_NAME.match(name):
                raise ValueError(f"provider name {name!r}: expected lower-case letters, digits, -_.")
            api = provider.api or (name if name in ("anthropic", "openai") else None)
            if api is None:
                raise ValueError(f"models.{name}: set api = 'openai' or 'anthropic' (its wire protocol)")
            merged[name] = provider.model_copy(update={"api": api})
        return merged

    @field_validator("agents")
    @classmethod
    def _agents(cls, value: dict[str, AgentSettings]) -> dict[str, AgentSettings]:
        for name in value:
            if not _AGENT_NAME.match(name):
                raise ValueError(f"agent name {name!r}: expected lower-case letters, digits, '-', '_'")
        return value

    @field_validator("channels")
    @classmethod
    def _channels(cls, value: dict[str, ChannelSettings]) -> dict[str, ChannelSettings]:
        for channel in value:
            if not _NAMESPACED_ID.match(channel):
                raise ValueError(f"channel {channel!r}: expected a namespaced channel id like 'slack:C0123'")
        return value

    @model_validator(mode="after")
    def _memory_needs_organization(self) -> Settings:
        if self.memory.enabled and self.organization is None:
            raise ValueError(
                "organization is required when memory.enabled = true (it names the org scope): "
                "set organization in the config file or SWITCHBOARD_ORGANIZATION"
            )
        return self

    @model_validator(mode="after")
    def _service_url_needs_its_token(self) -> Settings:
        """A service URL without its token is refused: a quiet local store per host would split one
        team's memory (memory/stores/build.py refuses it too, for callers that pass their own env)."""
        memory = self.memory
        if memory.enabled and memory.service_url and memory.store is None and not self.secrets.memory_token:
            raise ValueError(
                f"memory.service_url = {memory.service_url!r} needs {memory.token_env}: export the memory "
                "service's token, or remove memory.service_url to keep memory in this host's SQLite store"
            )
        return self

    # -- derived views --

    def agent_model_ref(self, agent: str) -> str | None:
        """The agent's own `agents.<name>.model`, else the top-level `model`."""
        own = self.agents.get(agent)
        return (own.model if own is not None and own.model else None) or self.model

    def channel(self, channel_id: str | None) -> ChannelSettings | None:
        return self.channels.get(channel_id) if channel_id else None


class _EnvLayer(EnvSettingsSource):
    """pydantic-settings' own env parsing (prefix, `__` nesting, JSON for complex values) over a mapping."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = dict(environ)
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


def load_settings(env: Mapping[str, str] | None = None, config_path: str | Path | None = None) -> Settings:
    """Build the settings once at start-up; raise ConfigError with one line on anything invalid."""
    environ: Mapping[str, str] = os.environ if env is None else env
    path, named_by = _config_path(environ, config_path)
    file_data = _read_config(path, named_by)
    if "secrets" in file_data or "config_file" in file_data:
        key = "secrets" if "secrets" in file_data else "config_file"
        raise ConfigError(
            f"config error: {key} in {path} is not a setting; secrets come only from the environment"
        )
    try:
        env_data = dict(_EnvLayer(Settings, environ)())
    except SettingsError as error:
        found = re.search(r'field "([^"]+)"', str(error))
        name = ENV_PREFIX + (found.group(1).upper() if found else "…")
        raise ConfigError(f"config error: {name} is not valid JSON (lists and tables are JSON)") from None
    env_data.pop("secrets", None)
    env_data.pop("config_file", None)
    merged = _deep_merge(file_data, env_data)
    token_env = _memory_token_env(merged)
    raw = {field: environ.get(name) for field, name in SECRET_ENV.items()}
    raw["memory_token"] = environ.get(token_env)
    secrets = Secrets.model_validate({field: value for field, value in raw.items() if value})
    try:
        return Settings(**merged, secrets=secrets, config_file=path if path.is_file() else None)
    except ValidationError as error:
        raise ConfigError(_describe(error, environ, path)) from None


def _config_path(environ: Mapping[str, str], config_path: str | Path | None) -> tuple[Path, str | None]:
    """The config file and what named it (`--config`, SWITCHBOARD_CONFIG), None for the default."""
    if config_path is not None:
        return Path(config_path), "--config"
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV]), CONFIG_ENV
    return Path(DEFAULT_CONFIG_FILE), None


def check_config_file(path: str | Path, named_by: str) -> None:
    """Raise ConfigError (one line) unless `path` is a readable TOML config file."""
    _read_config(Path(path), named_by)


def _read_config(path: Path, named_by: str | None) -> dict[str, Any]:
    named = f" (named by {named_by})" if named_by is not None else ""
    if path.is_dir():
        raise ConfigError(f"config error: config file {path} is a directory, not a TOML file{named}")
    if not path.is_file():
        if path.exists():
            raise ConfigError(f"config error: config file {path} is not a regular file{named}")
        if named_by is not None:
            raise ConfigError(f"config error: config file {path} does not exist{named}")
        return {}
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config error: {path} is not valid TOML: {error}") from error
    except OSError as error:
        raise ConfigError(f"config error: cannot read config file {path}: {error.strerror}{named}") from error


def _memory_token_env(merged: Mapping[str, Any]) -> str:
    memory = merged.get("memory")
    name = memory.get("token_env") if isinstance(memory, Mapping) else None
    return name if isinstance(name, str) and name else "MEMORY_TOKEN"


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _describe(error: ValidationError, environ: Mapping[str, str], path: Path) -> str:
    """One line: the key, the value, where it came from, and what is allowed."""
    first = error.errors()[0]
    loc = [str(part) for part in first["loc"]]
    key = ".".join(loc)
    message = str(first["msg"]).removeprefix("Value error, ")
    if not key:
        return f"config error: {message}"
    if first["type"] == "extra_forbidden":
        return f"config error: unknown setting {key} ({_origin(loc, environ, path)})"
    shown = "(missing)" if first["type"] == "missing" else _show(first.get("input"))
    return f"config error: {key} = {shown} ({_origin(loc, environ, path)}): {message}"


def _origin(loc: list[str], environ: Mapping[str, str], path: Path) -> str:
    """The environment variable that set the key (the longest matching prefix), else the file."""
    names = {name.upper() for name in environ}
    for end in range(len(loc), 0, -1):
        name = ENV_PREFIX + "__".join(part.upper() for part in loc[:end])
        if name in names:
            return f"from {name}"
    return f"from {path}" if path.is_file() else "default"


def _show(value: Any) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
