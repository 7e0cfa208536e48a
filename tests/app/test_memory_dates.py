"""The run's time and the message's time flow into memory: records are dated by when their
conversation happened (the Slack message's ts, else the run's time), and the block states today."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from app.incoming import IncomingMessage, message_time
from memory.stores.in_process import InProcessMemoryStore
from tests.app.runtime_support import settings_for
from tests.app.test_memory_write_path import (
    MEMORY_ON,
    ORG_FACT,
    QUESTION,
    block_lines,
    build_bot,
    extraction,
    msg,
    system_of,
    tool_run,
)
from tests.fakes.model_server import FakeModelServer

RUN_AT = datetime(2026, 12, 1, 15, 0, tzinfo=UTC).timestamp()  # a Tuesday
SENT = "1764000000.000200"  # 2025-11-24 16:00 UTC: when the answered Slack message was posted


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


def slack_message() -> IncomingMessage:
    earlier = "slack:C1:1763990000.000100"
    return replace(msg(QUESTION), source_messages=(earlier, f"slack:C1:{SENT}"))


def test_a_messages_time_is_its_own_else_its_latest_source_ts_else_unknown() -> None:
    assert message_time(slack_message()) == float(SENT)
    assert message_time(replace(slack_message(), sent_at=5.0)) == 5.0
    assert message_time(msg(QUESTION)) is None  # the terminal: no source messages
    assert message_time(replace(msg(QUESTION), source_messages=("github:o/r#12",))) is None


async def test_a_slack_runs_records_are_dated_by_the_message_ts_not_the_run(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    bot = build_bot(stack, settings_for(fake_anthropic, **MEMORY_ON), clock=lambda: RUN_AT)
    fake_anthropic.script(*tool_run("Run make deploy.", extraction({"text": ORG_FACT, "confidence": 0.9})))
    await bot.ask(slack_message())
    (record,) = bot.store.records("org:acme")
    assert record.observed_at == float(SENT)


async def test_a_run_without_a_message_time_dates_its_records_by_the_run(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    store = InProcessMemoryStore(clock=lambda: RUN_AT + 30)  # the write lands after the run began
    bot = build_bot(stack, settings_for(fake_anthropic, **MEMORY_ON), store=store, clock=lambda: RUN_AT)
    fake_anthropic.script(*tool_run("Run make deploy.", extraction({"text": ORG_FACT, "confidence": 0.9})))
    await bot.ask(msg(QUESTION))
    (record,) = store.records("org:acme")
    assert (record.observed_at, record.created_at) == (RUN_AT, RUN_AT + 30)


async def test_the_block_states_the_runs_today_and_each_records_date(
    fake_anthropic: FakeModelServer, stack: AsyncExitStack
) -> None:
    bot = build_bot(stack, settings_for(fake_anthropic, **MEMORY_ON), clock=lambda: RUN_AT)
    fake_anthropic.script(*tool_run("Run make deploy.", extraction({"text": ORG_FACT, "confidence": 0.9})))
    await bot.ask(slack_message())
    fake_anthropic.script("Here you go.")
    await bot.ask(msg(QUESTION, thread="slack:C1:1764100000.000100"))
    system = system_of(fake_anthropic.bodies()[3])
    first = system.split("\n", 1)[0]
    assert first.endswith("dates are UTC, today is Tuesday 2026-12-01):")
    assert block_lines(system) == [f"- 2025-11-24: {ORG_FACT} (source: slack:C1:1700000000.000100)"]
