"""Model refs (`<provider>/<model>`) and the registry that turns a ref into a provider and a model name.

No model name is written in code (docs/architecture.md, invariant 5): every ref comes through the
settings and is resolved here, for agents and for reflection alike.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.agent.providers.base import Provider
from app.agent.providers.observed import ObservedProvider
from ops.metrics import Metrics

if TYPE_CHECKING:
    from config.settings import Settings

_REF = re.compile(r"^(?P<provider>[a-z0-9][a-z0-9_.-]*)/(?P<model>\S+)$")


@dataclass(frozen=True, slots=True)
class ModelRef:
    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


def parse_model_ref(ref: str) -> ModelRef:
    """Split at the first slash: `openai/org/model` is provider `openai`, model `org/model`."""
    match = _REF.match(ref.strip()) if isinstance(ref, str) else None
    if match is None:
        raise ValueError(f"model ref {ref!r}: expected '<provider>/<model>' with a lower-case provider name")
    return ModelRef(match.group("provider"), match.group("model"))


class UnknownProviderError(LookupError):
    pass


ProviderFactory = Callable[[], Provider]


class ProviderRegistry:
    """Providers by name, each built on first use (an unused provider never needs credentials)."""

    def __init__(self, factories: Mapping[str, ProviderFactory], metrics: Metrics | None = None) -> None:
        self._factories = dict(factories)
        self._built: dict[str, Provider] = {}
        self._metrics = metrics

    def names(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str) -> Provider:
        if name not in self._factories:
            known = ", ".join(self.names()) or "none"
            raise UnknownProviderError(f"unknown model provider {name!r} (configured: {known})")
        if name not in self._built:
            self._built[name] = ObservedProvider(self._factories[name](), name, self._metrics)
        return self._built[name]

    def resolve(self, ref: str | ModelRef) -> tuple[Provider, str]:
        """The provider and the model name a ref points at; ValueError / UnknownProviderError if not."""
        parsed = parse_model_ref(ref) if isinstance(ref, str) else ref
        return self.get(parsed.provider), parsed.model

    def check(self, ref: str) -> ModelRef:
        """Validate a ref without building its provider (start-up checks)."""
        parsed = parse_model_ref(ref)
        if parsed.provider not in self._factories:
            known = ", ".join(self.names())
            raise UnknownProviderError(
                f"unknown model provider {parsed.provider!r} in {ref!r} (configured: {known})"
            )
        return parsed

    async def aclose(self) -> None:
        for provider in self._built.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result
        self._built.clear()


def build_provider_registry(
    settings: Settings, environ: Mapping[str, str] | None = None, metrics: Metrics | None = None
) -> ProviderRegistry:
    """One factory per `models.<name>` entry (anthropic and openai always exist)."""
    env = os.environ if environ is None else environ
    factories: dict[str, ProviderFactory] = {}
    for name, options in settings.models.items():
        if options.api == "anthropic":
            factories[name] = _anthropic_factory(settings, name, env)
        else:
            factories[name] = _openai_factory(settings, name, env)
    return ProviderRegistry(factories, metrics)


def _key(settings: Settings, name: str, env: Mapping[str, str]) -> str | None:
    """A custom `api_key_env` wins; the two built-in names fall back to their standard variables."""
    options = settings.models[name]
    if options.api_key_env:
        return env.get(options.api_key_env) or None
    if name == "anthropic":
        return settings.secrets.reveal(settings.secrets.anthropic_api_key)
    if name == "openai":
        return settings.secrets.reveal(settings.secrets.openai_api_key)
    return None


def key_variable(settings: Settings, name: str) -> str:
    """The environment variable (or setting) a provider's key is read from, for messages."""
    options = settings.models[name]
    if options.api_key_env:
        return options.api_key_env
    if name == "anthropic":
        return "ANTHROPIC_API_KEY"
    if name == "openai":
        return "OPENAI_API_KEY"
    return f"models.{name}.api_key_env"


def provider_usable(settings: Settings, name: str, env: Mapping[str, str] | None = None) -> bool:
    """A provider can answer when it has a key, or a base_url (a local, keyless server)."""
    environ = os.environ if env is None else env
    options = settings.models.get(name)
    if options is None:
        return False
    if _key(settings, name, environ) or options.base_url:
        return True
    return name == "openai" and bool(environ.get("OPENAI_BASE_URL"))


def _anthropic_factory(settings: Settings, name: str, env: Mapping[str, str]) -> ProviderFactory:
    options = settings.models[name]

    def build() -> Provider:
        from app.agent.providers.anthropic import AnthropicProvider

        key = _key(settings, name, env)
        return AnthropicProvider(
            api_key=key,
            base_url=options.base_url,
            timeout=options.timeout,
            max_retries=options.max_retries,
            name=name,
        )

    return build


def _openai_factory(settings: Settings, name: str, env: Mapping[str, str]) -> ProviderFactory:
    options = settings.models[name]

    def build() -> Provider:
        from app.agent.providers.openai import OpenAIProvider

        key = _key(settings, name, env)
        # A configured base_url (or OPENAI_BASE_URL for the default provider) is usually a local server.
        custom = options.base_url is not None or (name == "openai" and bool(env.get("OPENAI_BASE_URL")))
        return OpenAIProvider(
            api_key=key,
            base_url=options.base_url,
            timeout=options.timeout,
            max_retries=options.max_retries,
            max_tokens_field=options.max_tokens_field,
            keyless=custom,
            name=name,
        )

    return build
