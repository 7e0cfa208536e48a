"""What the App Home tests share: a bot over the real registry and store, the events and clicks
Slack sends, and readings of a published view (records, their buttons, the review section)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.policy import write_gate
from app.slack.bot import registry_caller
from app.slack.home.review import PENDING_BLOCK
from app.slack.home.view import RECORD_BLOCK
from commands.browse import MemoryBrowser
from commands.memory import build_registry
from memory.stores.contract import MemoryStore
from memory.types import MemoryCandidate, Origin
from tests.app.slack.harness import RecordingDispatcher, RunningBot, running_bot
from tests.fakes.slack_api import APP_ID, TEAM_ID, FakeSlackApi, block_action

ADMIN = "UADMIN"


def candidate(text: str, *, origin: Origin = "public", where: str = "C1", n: int = 1) -> MemoryCandidate:
    thread = f"slack:{where}:1700000000.{n:06d}"
    return MemoryCandidate(
        "fact", text, thread, origin=origin, origin_conversation=f"slack:{where}", keywords=()
    )


async def seed(
    store: MemoryStore, scope: str, *texts: str, origin: Origin = "public", where: str = "C1"
) -> None:
    for index, text in enumerate(texts):
        await store.write(scope, [candidate(text, origin=origin, where=where, n=index + 1)])


@asynccontextmanager
async def home_bot(
    slack_api: FakeSlackApi, store: MemoryStore, *, enabled: bool = True, review: bool = False
) -> AsyncIterator[RunningBot]:
    admins = [f"user:slack:{ADMIN}"]
    registry = build_registry(
        store=store, memory_enabled=enabled, organization="acme", admins=admins, write_gate=write_gate
    )
    browser = MemoryBrowser(
        store=store, memory_enabled=enabled, organization="acme", admins=admins, review=review
    )
    async with running_bot(
        slack_api, RecordingDispatcher(), registry=registry, browser=browser, caller_factory=registry_caller
    ) as bot:
        yield bot


async def open_home(bot: RunningBot, user: str, tab: str = "home") -> int:
    event = {"type": "app_home_opened", "user": user, "channel": f"D{user}", "tab": tab, "event_ts": "1.2"}
    delivery = await bot.slack.event(event)
    await bot.settle()
    return delivery.status


async def click(bot: RunningBot, user: str, view: dict[str, Any], action: dict[str, Any]) -> int:
    delivery = await bot.slack.interaction(block_action(user, action, view=view))
    await bot.settle()
    return delivery.status


def view_submission(user: str, modal: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A `view_submission` payload as Slack sends it when a modal's submit button is pressed."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "user": {"id": user, "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "trigger_id": f"{time.time()}.trigger",
        "view": {**modal, "id": "VMODAL", "team_id": TEAM_ID, "state": {"values": values}},
    }


async def submit(bot: RunningBot, user: str, modal: dict[str, Any], values: dict[str, Any]) -> str:
    delivery = await bot.slack.interaction(view_submission(user, modal, values))
    await bot.settle()
    assert delivery.status == 200
    return delivery.body


def _sections(view: dict[str, Any], prefix: str) -> list[int]:
    return [n for n, b in enumerate(view["blocks"]) if str(b.get("block_id", "")).startswith(prefix)]


def texts(view: dict[str, Any]) -> list[str]:
    """Each listed record's text as the view shows it."""
    return [view["blocks"][n]["text"]["text"] for n in _sections(view, RECORD_BLOCK)]


def buttons(view: dict[str, Any], prefix: str = RECORD_BLOCK) -> list[dict[str, str]]:
    """Each record's buttons (listed records, or with PENDING_BLOCK the waiting ones): label → id."""
    found = []
    for n in _sections(view, prefix):
        actions = view["blocks"][n + 2]
        found.append({e["text"]["text"]: e["value"] for e in actions["elements"]})
    return found


def record_ids(view: dict[str, Any]) -> list[str]:
    return [row["Forget"] for row in buttons(view)]


def waiting_texts(view: dict[str, Any]) -> list[str]:
    """The review section's records, as shown."""
    return [view["blocks"][n]["text"]["text"] for n in _sections(view, PENDING_BLOCK)]


def all_text(view: dict[str, Any]) -> str:
    return json.dumps(view["blocks"], ensure_ascii=False)


def action_ids(view: dict[str, Any]) -> set[str]:
    found = set()
    for block in view["blocks"]:
        for element in block.get("elements", []):
            if "action_id" in element:
                found.add(element["action_id"])
        if "element" in block:
            found.add(block["element"]["action_id"])
    return found
