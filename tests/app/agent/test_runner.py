"""The agent loop, driven through the real Anthropic SDK against the fake Messages server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from app.agent.providers.anthropic import AnthropicProvider
from app.agent.providers.base import Message, ProviderError, Usage
from app.agent.runner import Final, ModelTurn, RunEvent, ToolCalled, ToolReturned, run_agent, stream_run
from app.agent.tools import Tool, tool
from tests.fakes.model_server import FakeModelServer, Reply, ScriptedToolCall, error_reply, tool_reply

SCHEMA = {"type": "object", "properties": {"word": {"type": "string"}}}


@pytest.fixture
async def provider(fake_anthropic: FakeModelServer) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.base_url, max_retries=0)
    yield provider
    await provider.aclose()


def recording_tool(name: str, calls: list[Mapping[str, Any]], answer: str = "found it") -> Tool:
    async def handler(arguments: Mapping[str, Any]) -> str:
        calls.append(dict(arguments))
        return answer

    return tool(name, f"The {name} tool.", SCHEMA, handler)


async def run(provider: AnthropicProvider, tools: tuple[Tool, ...], **options: Any) -> Any:
    return await run_agent(
        provider, model="m", system="sys", messages=(Message("user", "go"),), tools=tools, **options
    )


async def test_a_tool_call_round_trip_ends_in_a_final_answer_with_derived_counts(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    calls: list[Mapping[str, Any]] = []
    fake_anthropic.script(
        tool_reply("lookup", {"word": "deploy"}, id="t1", input_tokens=10, output_tokens=3),
        Reply(text="Deploys run on Fridays.", input_tokens=25, output_tokens=6),
    )
    result = await run(provider, (recording_tool("lookup", calls, "deploy: fridays"),))

    assert calls == [{"word": "deploy"}]
    assert [event.kind for event in result.events] == [
        "model_turn",
        "tool_call",
        "tool_result",
        "model_turn",
        "final",
    ]
    assert result.answer == "Deploys run on Fridays."
    assert result.tool_call_count == 1 and result.turns == 2 and result.stopped == "answer"
    assert result.usage == Usage(35, 9)
    final = result.events[-1]
    assert isinstance(final, Final) and final.usage == Usage(35, 9)
    second = fake_anthropic.bodies()[1]
    assert second["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "deploy: fridays"}
    ]
    assert second["tools"][0]["name"] == "lookup"


async def test_a_tool_that_raises_becomes_an_error_result_the_model_sees(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    async def broken(arguments: Mapping[str, Any]) -> str:
        raise RuntimeError("repository unreachable")

    fake_anthropic.script(tool_reply("read_file", {"path": "x"}, id="t1"), "I could not read the file.")
    result = await run(provider, (tool("read_file", "Read.", SCHEMA, broken),))

    assert result.answer == "I could not read the file."
    returned = [e for e in result.events if isinstance(e, ToolReturned)]
    assert returned[0].result.is_error is True
    sent = fake_anthropic.bodies()[1]["messages"][-1]["content"][0]
    assert sent["is_error"] is True and "RuntimeError: repository unreachable" in sent["content"]


async def test_an_unknown_tool_is_an_error_result_not_a_crash(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    fake_anthropic.script(tool_reply("rm_rf", {}, id="t1"), "ok")
    result = await run(provider, (recording_tool("lookup", []),))
    sent = fake_anthropic.bodies()[1]["messages"][-1]["content"][0]
    assert (
        sent["is_error"] is True
        and "no tool named 'rm_rf'" in sent["content"]
        and "lookup" in sent["content"]
    )
    assert result.tool_call_count == 1


async def test_several_calls_in_one_turn_all_run_and_answer_in_order(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    calls: list[Mapping[str, Any]] = []
    fake_anthropic.script(
        Reply(
            tool_calls=(
                ScriptedToolCall("lookup", {"word": "a"}, "a1"),
                ScriptedToolCall("lookup", {"word": "b"}, "b1"),
            )
        ),
        "both",
    )
    result = await run(provider, (recording_tool("lookup", calls),))
    assert sorted(c["word"] for c in calls) == ["a", "b"]
    assert result.tool_call_count == 2
    ids = [block["tool_use_id"] for block in fake_anthropic.bodies()[1]["messages"][-1]["content"]]
    assert ids == ["a1", "b1"]


async def test_the_turn_budget_stops_a_model_that_never_finishes(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    fake_anthropic.script(
        tool_reply("lookup", {"word": "1"}, text="still looking"), tool_reply("lookup", {"word": "2"})
    )
    result = await run(provider, (recording_tool("lookup", []),), max_turns=2)
    assert len(fake_anthropic.requests) == 2
    assert result.stopped == "turn_budget"
    assert result.answer.startswith("still looking") and "stopped after 2 model turns" in result.answer


async def test_events_stream_as_they_happen(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    fake_anthropic.script(tool_reply("lookup", {"word": "x"}, id="t1"), "done")
    seen: list[str] = []
    stream = stream_run(
        provider,
        model="m",
        system="",
        messages=(Message("user", "q"),),
        tools=(recording_tool("lookup", []),),
    )
    async for event in stream:
        seen.append(event.kind)
        if isinstance(event, ToolCalled):
            # the second model request has not been made while the tool call is being announced
            assert len(fake_anthropic.requests) == 1
    assert seen == ["model_turn", "tool_call", "tool_result", "model_turn", "final"]


async def test_an_observer_that_raises_never_breaks_the_run(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    fake_anthropic.script("fine")
    observed: list[RunEvent] = []

    def observer(event: RunEvent) -> None:
        observed.append(event)
        raise ValueError("observer bug")

    result = await run(provider, (), on_event=observer)
    assert result.answer == "fine" and [type(e) for e in observed] == [ModelTurn, Final]


async def test_a_provider_failure_propagates_as_provider_error(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    fake_anthropic.script(error_reply(500, "down"))
    with pytest.raises(ProviderError, match="500"):
        await run(provider, ())


async def test_tools_in_one_turn_run_concurrently(
    fake_anthropic: FakeModelServer, provider: AnthropicProvider
) -> None:
    both_started = asyncio.Event()
    started = 0

    async def slow(arguments: Mapping[str, Any]) -> str:
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), timeout=2)
        return "ok"

    fake_anthropic.script(
        Reply(tool_calls=(ScriptedToolCall("slow", {}, "s1"), ScriptedToolCall("slow", {}, "s2"))), "done"
    )
    result = await run(provider, (tool("slow", "Slow.", SCHEMA, slow),))
    assert result.answer == "done"
    assert all(not e.result.is_error for e in result.events if isinstance(e, ToolReturned))
