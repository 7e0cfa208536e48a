"""Agent registry: selection by leading word, thread, channel default; model refs only from settings."""

from __future__ import annotations

import pytest

from app.agent.agents import CODING_INSTRUCTIONS, build_agents
from config.settings import ConfigError, Settings
from tests.app.runtime_support import message


def agents_for(**data: object) -> Settings:
    return Settings.model_validate({"model": "anthropic/base", **data})


@pytest.mark.parametrize(
    ("text", "agent", "request_text"),
    [
        ("review acme/app#12", "review", "acme/app#12"),
        ("Review: acme/app#12", "review", "acme/app#12"),
        ("code why does the build fail?", "coding", "why does the build fail?"),
        ("coding\nlook at ci", "coding", "look at ci"),
        ("what is a monorepo?", "general", "what is a monorepo?"),
        ("reviewing our process, what do you think?", "general", "reviewing our process, what do you think?"),
        ("review", "review", "review"),
    ],
)
def test_a_leading_agent_word_selects_the_agent(text: str, agent: str, request_text: str) -> None:
    selection = build_agents(agents_for()).select(message(text, channel=None))
    assert (selection.agent.name, selection.text) == (agent, request_text)


def test_the_channel_default_applies_without_a_word_and_a_word_still_wins() -> None:
    registry = build_agents(agents_for(channels={"slack:C1": {"agent": "coding"}}))
    assert registry.select(message("why is CI red?")).agent.name == "coding"
    assert registry.select(message("why is CI red?")).by == "channel"
    assert registry.select(message("review acme/app#1")).agent.name == "review"
    assert registry.select(message("why?", channel="slack:C2")).agent.name == "general"


def test_a_coding_thread_stays_with_the_coding_agent_but_a_review_thread_does_not() -> None:
    registry = build_agents(agents_for())
    coding = message(
        "and the tests?", history=(("user", "code explain the deploy script"), ("assistant", "…"))
    )
    review = message("thanks!", history=(("user", "review acme/app#3"), ("assistant", "…")))
    assert registry.select(coding).agent.name == "coding" and registry.select(coding).by == "thread"
    assert registry.select(review).agent.name == "general"


def test_model_refs_come_from_settings_with_per_agent_overrides() -> None:
    registry = build_agents(
        agents_for(agents={"review": {"model": "openai/reviewer", "instructions": "Be kind."}})
    )
    assert registry.get("general").model_ref == "anthropic/base"
    assert registry.get("coding").model_ref == "anthropic/base"
    assert registry.get("review").model_ref == "openai/reviewer"
    assert registry.get("review").instructions == "Be kind."
    assert registry.get("coding").instructions == CODING_INSTRUCTIONS


def test_without_any_model_setting_agents_have_no_model_ref() -> None:
    registry = build_agents(Settings())
    assert all(agent.model_ref is None for agent in registry)


def test_repo_binding_is_declared_per_agent() -> None:
    registry = build_agents(agents_for())
    assert {a.name: a.repo_bound for a in registry} == {"general": False, "coding": True, "review": True}
    assert registry.get("general").tools == ()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"agents": {"helper": {"model": "anthropic/x"}}}, "agents.helper is not an agent"),
        (
            {"channels": {"slack:C1": {"agent": "helper"}}},
            "channels.slack:C1.agent = 'helper' is not an agent",
        ),
        ({"model": "mistral/large"}, "unknown provider 'mistral'"),
    ],
)
def test_configuration_mistakes_stop_start_up_with_one_line(data: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_agents(agents_for(**data))
    assert expected in str(caught.value) and "\n" not in str(caught.value)
