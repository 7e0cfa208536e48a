"""Events that are not messages — an Assistant thread started, the Home tab opened — are handled once
per event over real HTTP: a retry to the same bot (same `event_id`, `X-Slack-Retry-Num`) and the same
event delivered to two replicas sharing a store each do the work once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory.stores.sqlite.store import SqliteMemoryStore
from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.app.slack.test_agent_view import THREAD_STARTED
from tests.fakes.slack_api import FakeSlackApi

HOME_OPENED = {"type": "app_home_opened", "user": "U1", "channel": "DU1", "tab": "home", "event_ts": "1.2"}


@pytest.fixture
async def shared_store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory")
    try:
        yield store
    finally:
        await store.aclose()


async def _deliver_twice(slack_api: FakeSlackApi, event: dict[str, Any], event_id: str) -> None:
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        assert (await bot.slack.event(event, event_id=event_id)).status == 200
        assert (await bot.slack.event(event, event_id=event_id, retry_num=1)).status == 200
        await bot.settle()


async def _deliver_to_two_replicas(
    slack_api: FakeSlackApi, store: SqliteMemoryStore, event: dict[str, Any], event_id: str
) -> None:
    async with (
        running_bot(slack_api, RecordingDispatcher(), memory_store=store) as first,
        running_bot(slack_api, RecordingDispatcher(), memory_store=store) as second,
    ):
        await asyncio.gather(
            first.slack.event(event, event_id=event_id),
            second.slack.event(event, event_id=event_id, retry_num=1),
        )
        await asyncio.gather(first.settle(), second.settle())


async def test_a_retried_assistant_thread_started_sets_the_prompts_once(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("D1", "im")
    await _deliver_twice(slack_api, THREAD_STARTED, "EvSTART")

    assert len(slack_api.calls_to("assistant.threads.setSuggestedPrompts")) == 1


async def test_a_retried_home_tab_opening_publishes_the_tab_once(slack_api: FakeSlackApi) -> None:
    await _deliver_twice(slack_api, HOME_OPENED, "EvHOME")

    assert len(slack_api.home_views["U1"]) == 1


async def test_an_assistant_thread_started_delivered_to_two_replicas_sets_the_prompts_once(
    slack_api: FakeSlackApi, shared_store: SqliteMemoryStore
) -> None:
    slack_api.add_conversation("D1", "im")
    await _deliver_to_two_replicas(slack_api, shared_store, THREAD_STARTED, "EvSTART2")

    assert len(slack_api.calls_to("assistant.threads.setSuggestedPrompts")) == 1


async def test_a_home_tab_opening_delivered_to_two_replicas_publishes_the_tab_once(
    slack_api: FakeSlackApi, shared_store: SqliteMemoryStore
) -> None:
    await _deliver_to_two_replicas(slack_api, shared_store, HOME_OPENED, "EvHOME2")

    assert len(slack_api.home_views["U1"]) == 1
