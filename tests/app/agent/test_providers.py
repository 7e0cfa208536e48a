"""The providers through the real SDKs against the fake Anthropic and OpenAI servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.agent.providers.anthropic import AnthropicProvider
from app.agent.providers.base import (
    CompletionRequest,
    Message,
    ProviderError,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from app.agent.providers.openai import OpenAIProvider
from app.agent.providers.registry import (
    ModelRef,
    ProviderRegistry,
    UnknownProviderError,
    build_provider_registry,
    parse_model_ref,
)
from config.settings import Settings
from tests.fakes.model_server import FakeModelServer, Reply, ScriptedToolCall, error_reply, tool_reply

LOOKUP = ToolSpec(
    name="lookup",
    description="Look a word up.",
    input_schema={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
)


def first_request(tools: tuple[ToolSpec, ...] = (LOOKUP,)) -> CompletionRequest:
    return CompletionRequest(
        model="test-model",
        system="You are terse.",
        messages=(Message("user", "earlier"), Message("assistant", "noted"), Message("user", "define x")),
        tools=tools,
        max_tokens=321,
    )


def follow_up(call: ToolCall, content: str, *, is_error: bool = False) -> CompletionRequest:
    base = first_request()
    return CompletionRequest(
        model=base.model,
        system=base.system,
        messages=(
            *base.messages,
            Message("assistant", "checking", tool_calls=(call,)),
            Message("user", tool_results=(ToolResult(call.id, content, is_error=is_error),)),
        ),
        tools=base.tools,
        max_tokens=base.max_tokens,
    )


@pytest.fixture
async def anthropic_provider(fake_anthropic: FakeModelServer) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(api_key="test-key", base_url=fake_anthropic.base_url, max_retries=0)
    yield provider
    await provider.aclose()


@pytest.fixture
async def openai_provider(fake_openai: FakeModelServer) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider(api_key="test-key", base_url=fake_openai.base_url, max_retries=0)
    yield provider
    await provider.aclose()


# -- model refs and the registry --


def test_model_ref_splits_at_the_first_slash() -> None:
    assert parse_model_ref("anthropic/some-model") == ModelRef("anthropic", "some-model")
    assert parse_model_ref("local/org/model:q4") == ModelRef("local", "org/model:q4")
    assert str(parse_model_ref("openai/m")) == "openai/m"


@pytest.mark.parametrize("ref", ["just-a-model", "/model", "openai/", "Anthropic/m", "openai/has space", ""])
def test_a_malformed_model_ref_is_refused(ref: str) -> None:
    with pytest.raises(ValueError, match="<provider>/<model>"):
        parse_model_ref(ref)


def test_the_registry_builds_a_provider_only_when_it_is_used() -> None:
    built: list[str] = []

    def factory() -> AnthropicProvider:
        built.append("anthropic")
        return AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9")

    registry = ProviderRegistry({"anthropic": factory})
    assert registry.check("anthropic/m") == ModelRef("anthropic", "m")
    assert built == []
    provider, model = registry.resolve("anthropic/m")
    assert model == "m" and built == ["anthropic"]
    assert registry.resolve("anthropic/other")[0] is provider
    with pytest.raises(UnknownProviderError, match="'nope'"):
        registry.resolve("nope/m")


# -- Anthropic --


async def test_anthropic_tool_use_round_trip(
    fake_anthropic: FakeModelServer, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.script(
        tool_reply("lookup", {"word": "x"}, id="toolu_1", text="checking", input_tokens=20, output_tokens=5),
        Reply(text="x is a letter.", input_tokens=30, output_tokens=6),
    )
    first = await anthropic_provider.complete(first_request())
    assert first.text == "checking"
    assert first.tool_calls == (ToolCall("toolu_1", "lookup", {"word": "x"}),)
    assert first.usage == Usage(20, 5) and first.stop_reason == "tool_use"

    final = await anthropic_provider.complete(follow_up(first.tool_calls[0], "a letter"))
    assert final.text == "x is a letter." and final.tool_calls == () and final.stop_reason == "end_turn"

    sent_first, sent_second = fake_anthropic.bodies()
    assert sent_first == {
        "model": "test-model",
        "system": "You are terse.",
        "max_tokens": 321,
        "messages": [
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": "define x"},
        ],
        "tools": [
            {"name": "lookup", "description": "Look a word up.", "input_schema": dict(LOOKUP.input_schema)}
        ],
    }
    assert sent_second["messages"][-2:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"word": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a letter"}],
        },
    ]
    assert fake_anthropic.requests[0].headers.get("x-api-key") == "test-key" or (
        fake_anthropic.requests[0].headers.get("authorization") == "Bearer test-key"
    )


async def test_anthropic_marks_a_failed_tool_result_as_an_error(
    fake_anthropic: FakeModelServer, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.script("sorry")
    await anthropic_provider.complete(
        follow_up(ToolCall("toolu_9", "lookup", {}), "error: boom", is_error=True)
    )
    result = fake_anthropic.bodies()[0]["messages"][-1]["content"][0]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_9",
        "content": "error: boom",
        "is_error": True,
    }


async def test_anthropic_without_system_or_tools_sends_neither(
    fake_anthropic: FakeModelServer, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.script("hi")
    await anthropic_provider.complete(
        CompletionRequest(model="m", system="", messages=(Message("user", "hey"),))
    )
    assert "system" not in fake_anthropic.bodies()[0] and "tools" not in fake_anthropic.bodies()[0]


async def test_anthropic_error_status_becomes_provider_error(
    fake_anthropic: FakeModelServer, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.script(error_reply(529, "Overloaded right now"))
    with pytest.raises(ProviderError) as caught:
        await anthropic_provider.complete(first_request())
    assert caught.value.status == 529 and caught.value.provider == "anthropic"
    assert "529" in str(caught.value) and "Overloaded right now" in str(caught.value)
    assert len(fake_anthropic.requests) == 1  # max_retries=0: no retry


async def test_anthropic_retries_through_the_sdk_setting(fake_anthropic: FakeModelServer) -> None:
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url, max_retries=1)
    fake_anthropic.script(error_reply(529, "busy", headers={"retry-after-ms": "1"}), "recovered")
    try:
        assert (await provider.complete(first_request())).text == "recovered"
    finally:
        await provider.aclose()
    assert len(fake_anthropic.requests) == 2


async def test_anthropic_timeout_comes_from_the_sdk_setting(fake_anthropic: FakeModelServer) -> None:
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url, timeout=0.2, max_retries=0)
    fake_anthropic.script(Reply(text="too late", delay=2.0))
    try:
        with pytest.raises(ProviderError, match="timed out"):
            await provider.complete(first_request())
    finally:
        await provider.aclose()


async def test_anthropic_base_url_env_var_keeps_working(
    fake_anthropic: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    provider = AnthropicProvider(api_key="k", max_retries=0)
    fake_anthropic.script("via env")
    try:
        assert (await provider.complete(first_request())).text == "via env"
    finally:
        await provider.aclose()


# -- OpenAI --


async def test_openai_tool_calls_round_trip(
    fake_openai: FakeModelServer, openai_provider: OpenAIProvider
) -> None:
    fake_openai.script(
        Reply(
            tool_calls=(
                ScriptedToolCall("lookup", {"word": "x"}, "call_1"),
                ScriptedToolCall("lookup", {"word": "y"}),
            ),
            input_tokens=40,
            output_tokens=8,
        ),
        "x and y are letters.",
    )
    first = await openai_provider.complete(first_request())
    assert [c.name for c in first.tool_calls] == ["lookup", "lookup"]
    assert first.tool_calls[0] == ToolCall("call_1", "lookup", {"word": "x"})
    assert first.usage == Usage(40, 8) and first.stop_reason == "tool_calls" and first.text == ""

    final = await openai_provider.complete(follow_up(first.tool_calls[0], "a letter"))
    assert final.text == "x and y are letters." and final.stop_reason == "stop"

    sent_first, sent_second = fake_openai.bodies()
    assert sent_first == {
        "model": "test-model",
        "max_completion_tokens": 321,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": "define x"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Look a word up.",
                    "parameters": dict(LOOKUP.input_schema),
                },
            }
        ],
    }
    assert sent_second["messages"][-2:] == [
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"word": "x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a letter"},
    ]
    assert fake_openai.requests[0].headers["authorization"] == "Bearer test-key"


async def test_openai_malformed_arguments_reach_the_tool_as_is(
    fake_openai: FakeModelServer, openai_provider: OpenAIProvider
) -> None:
    fake_openai.script(
        Reply(
            raw={
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {"name": "lookup", "arguments": "{oops"},
                                }
                            ],
                        },
                    }
                ],
            }
        )
    )
    completion = await openai_provider.complete(first_request())
    assert completion.tool_calls == (ToolCall("c1", "lookup", {"_unparsed_arguments": "{oops"}),)
    assert completion.usage == Usage()


async def test_openai_error_status_becomes_provider_error(
    fake_openai: FakeModelServer, openai_provider: OpenAIProvider
) -> None:
    fake_openai.script(error_reply(400, "context too long"))
    with pytest.raises(ProviderError) as caught:
        await openai_provider.complete(first_request())
    assert caught.value.status == 400 and "context too long" in str(caught.value)


async def test_openai_compatible_server_with_max_tokens_and_no_key(
    fake_openai: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = Settings.model_validate(
        {
            "models": {
                "local": {"api": "openai", "base_url": fake_openai.base_url, "max_tokens_field": "max_tokens"}
            }
        }
    )
    registry = build_provider_registry(settings, environ={})
    fake_openai.script("local answer")
    provider, model = registry.resolve("local/llama-3-8b")
    try:
        completion = await provider.complete(
            CompletionRequest(model=model, system="", messages=(Message("user", "hi"),), max_tokens=99)
        )
    finally:
        await registry.aclose()
    assert completion.text == "local answer"
    body = fake_openai.bodies()[0]
    assert body == {"model": "llama-3-8b", "max_tokens": 99, "messages": [{"role": "user", "content": "hi"}]}


async def test_openai_base_url_env_var_keeps_working(
    fake_openai: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    registry = build_provider_registry(Settings(), environ={"OPENAI_BASE_URL": fake_openai.base_url})
    fake_openai.script("via env")
    provider, model = registry.resolve("openai/m")
    try:
        completion = await provider.complete(
            CompletionRequest(model=model, system="", messages=(Message("user", "q"),))
        )
    finally:
        await registry.aclose()
    assert completion.text == "via env"


async def test_registry_from_settings_passes_the_key_and_sdk_settings(
    fake_anthropic: FakeModelServer,
) -> None:
    settings = Settings.model_validate(
        {
            "models": {"anthropic": {"base_url": fake_anthropic.base_url, "max_retries": 0}},
            "secrets": {"anthropic_api_key": "from-settings"},
        }
    )
    registry = build_provider_registry(settings, environ={})
    fake_anthropic.script(error_reply(500, "down"))
    provider, _ = registry.resolve("anthropic/m")
    try:
        with pytest.raises(ProviderError, match="500"):
            await provider.complete(first_request())
    finally:
        await registry.aclose()
    assert len(fake_anthropic.requests) == 1  # max_retries = 0 reached the SDK
    headers = fake_anthropic.requests[0].headers
    assert "from-settings" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
