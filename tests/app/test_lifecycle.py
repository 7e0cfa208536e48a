"""Graceful shutdown: stop taking messages, let runs in flight finish and reply, then exit."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.agent.agents import build_agents
from app.agent.providers.registry import build_provider_registry
from app.dispatch import CLOSED_REPLY, Dispatcher, DispatchOutcome
from app.lifecycle import Lifecycle
from tests.app.runtime_support import RecordingSurface, app_command, message, settings_for, subprocess_env
from tests.fakes.model_server import FakeModelServer, Reply


@pytest.fixture
async def dispatcher(fake_anthropic: FakeModelServer) -> AsyncIterator[Dispatcher]:
    settings = settings_for(fake_anthropic)
    providers = build_provider_registry(settings, environ={})
    yield Dispatcher(settings=settings, providers=providers, agents=build_agents(settings))
    await providers.aclose()


async def start_held_run(
    fake: FakeModelServer, dispatcher: Dispatcher, surface: RecordingSurface
) -> asyncio.Task[DispatchOutcome]:
    fake.script(Reply(text="finished in flight", hold=True))
    task = asyncio.create_task(dispatcher.dispatch(message("long question"), surface))
    await asyncio.to_thread(fake.wait_for_requests, 1)
    return task


async def test_drain_waits_for_the_run_in_flight_and_its_reply(
    fake_anthropic: FakeModelServer, dispatcher: Dispatcher
) -> None:
    surface = RecordingSurface()
    run = await start_held_run(fake_anthropic, dispatcher, surface)
    lifecycle = Lifecycle(dispatcher, deadline_seconds=30)

    lifecycle.request_stop("test")
    late = RecordingSurface()
    assert (await dispatcher.dispatch(message("one more"), late)).status == "closed"
    assert late.replies == [CLOSED_REPLY]

    drain = asyncio.create_task(lifecycle.drain())
    await asyncio.sleep(0.05)
    assert not drain.done() and dispatcher.active_run_count == 1
    fake_anthropic.release()
    assert await drain is True
    assert surface.replies == ["finished in flight"] and run.done()
    assert len(fake_anthropic.requests) == 1


async def test_drain_gives_up_at_the_deadline(
    fake_anthropic: FakeModelServer, dispatcher: Dispatcher
) -> None:
    run = await start_held_run(fake_anthropic, dispatcher, RecordingSurface())
    lifecycle = Lifecycle(dispatcher, deadline_seconds=0.1)
    assert await lifecycle.drain() is False
    fake_anthropic.release()
    await run


async def test_a_second_signal_stops_waiting(fake_anthropic: FakeModelServer, dispatcher: Dispatcher) -> None:
    run = await start_held_run(fake_anthropic, dispatcher, RecordingSurface())
    lifecycle = Lifecycle(dispatcher, deadline_seconds=30)
    lifecycle.request_stop("SIGINT")
    drain = asyncio.create_task(lifecycle.drain())
    await asyncio.sleep(0)
    lifecycle.request_stop("SIGINT")
    assert await asyncio.wait_for(drain, timeout=5) is False
    fake_anthropic.release()
    await run


async def test_waiters_and_tracked_tasks_are_drained_after_the_runs(dispatcher: Dispatcher) -> None:
    order: list[str] = []
    gate = asyncio.Event()

    async def background() -> None:
        await gate.wait()
        order.append("tracked task")

    async def waiter() -> None:
        order.append(f"waiter (active runs {dispatcher.active_run_count})")

    dispatcher.track(background())
    lifecycle = Lifecycle(dispatcher, deadline_seconds=5, waiters=[waiter])
    drain = asyncio.create_task(lifecycle.drain())
    await asyncio.sleep(0)
    assert dispatcher.pending_task_count == 1 and not drain.done()
    gate.set()
    assert await drain is True
    assert order == ["tracked task", "waiter (active runs 0)"]


def test_sigterm_lets_the_run_in_flight_finish_and_reply_before_the_process_exits(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    """A real `switchboard chat` process: SIGTERM mid-run → no new input taken, the reply still lands."""
    fake_anthropic.script(Reply(text="the answer in flight", hold=True))
    env = subprocess_env(
        {
            "HOME": str(tmp_path),
            "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
            "SWITCHBOARD_MODEL": "anthropic/test-model",
            "SWITCHBOARD_MODELS__ANTHROPIC__MAX_RETRIES": "0",
        }
    )
    process = subprocess.Popen(
        app_command("chat", "--thread", "drain", "--log-level", "info"),
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stopping = threading.Event()
    log_lines: list[str] = []

    def read_logs() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log_lines.append(line)
            if "lifecycle.stopping" in line:
                stopping.set()

    reader = threading.Thread(target=read_logs, daemon=True)
    reader.start()
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("first question\n")
        process.stdin.flush()
        fake_anthropic.wait_for_requests(1, timeout=60)

        process.send_signal(signal.SIGTERM)
        assert stopping.wait(timeout=30), "".join(log_lines)
        process.stdin.write("second question, sent after SIGTERM\n")
        process.stdin.flush()
        assert process.poll() is None  # still draining: the run is held at the fake server

        fake_anthropic.release()
        assert process.wait(timeout=60) == 0, "".join(log_lines)
        output = process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=5)

    assert output == "the answer in flight\n"
    assert len(fake_anthropic.requests) == 1  # the line typed after SIGTERM never reached the model
    assert any("lifecycle.drained" in line for line in log_lines)
    stored = json.loads((tmp_path / "data" / "chat" / "drain.json").read_text())
    assert stored["turns"][-1] == {"role": "assistant", "text": "the answer in flight"}


def test_sigterm_waits_for_a_pending_reflection_before_the_process_exits(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    """Memory on, a real `switchboard chat` process: the reply has landed, the extractor call is still in
    flight at SIGTERM → the process stays up until the reflection wrote its fact, then exits cleanly."""
    from memory.stores.build import memory_dir
    from memory.stores.sqlite.store import SqliteMemoryStore

    fact = "The api service deploys with make deploy from the main branch"
    data = tmp_path / "data"
    (data / "chat").mkdir(parents=True)
    turns = [{"role": role, "text": text} for role, text in (("user", "a"), ("assistant", "b")) * 2]
    (data / "chat" / "reflect.json").write_text(json.dumps({"thread": "reflect", "turns": turns}))
    extraction = json.dumps({"facts": [{"text": fact, "confidence": 0.9}], "summary": ""})
    fake_anthropic.script("use make deploy", Reply(text=extraction, hold=True))
    env = subprocess_env(
        {
            "HOME": str(tmp_path),
            "SWITCHBOARD_DATA_DIR": str(data),
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
            "SWITCHBOARD_MODEL": "anthropic/test-model",
            "SWITCHBOARD_MODELS__ANTHROPIC__MAX_RETRIES": "0",
            "SWITCHBOARD_ORGANIZATION": "acme",
            "SWITCHBOARD_MEMORY__ENABLED": "true",
        }
    )
    process = subprocess.Popen(
        app_command("chat", "--thread", "reflect", "--log-level", "info"),
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stopping = threading.Event()
    log_lines: list[str] = []

    def read_logs() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log_lines.append(line)
            if "lifecycle.stopping" in line:
                stopping.set()

    reader = threading.Thread(target=read_logs, daemon=True)
    reader.start()
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("how do I deploy the api?\n")
        process.stdin.flush()
        assert process.stdout.readline() == "use make deploy\n"  # the reply landed first
        fake_anthropic.wait_for_requests(2, timeout=60)  # the extractor call is in flight, held

        process.send_signal(signal.SIGTERM)
        assert stopping.wait(timeout=30), "".join(log_lines)
        time.sleep(0.2)
        assert process.poll() is None, "".join(log_lines)  # draining: the reflection is still pending

        fake_anthropic.release()
        assert process.wait(timeout=60) == 0, "".join(log_lines)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=5)

    assert any("lifecycle.drained" in line for line in log_lines)

    async def stored() -> list[str]:
        store = SqliteMemoryStore(memory_dir(data))
        try:
            return [record.text for record in await store.list("org:acme", 10)]
        finally:
            await store.aclose()

    assert asyncio.run(stored()) == [fact]


async def test_settle_waits_for_the_waiters_and_keeps_taking_messages(
    fake_anthropic: FakeModelServer, dispatcher: Dispatcher
) -> None:
    released = asyncio.Event()
    finished: list[str] = []

    async def waiter() -> None:
        await released.wait()
        finished.append("waiter")

    lifecycle = Lifecycle(dispatcher, deadline_seconds=30, waiters=[waiter])
    settle = asyncio.create_task(lifecycle.settle())
    await asyncio.sleep(0.05)
    assert not settle.done()
    released.set()
    await settle
    assert finished == ["waiter"] and not dispatcher.closed
    fake_anthropic.script("still answering")
    assert (await dispatcher.dispatch(message("after settle"), RecordingSurface())).status == "answered"
