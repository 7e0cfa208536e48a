"""The repo-bound agents through the real Dispatcher, the fake GitHub API and the fake Anthropic server.

What they must show: every resolution source in precedence order and the 404 path for each agent
kind; a coding run that calls two tools; a review run that posts one PR review and writes no memory;
the repo awaitable (org/channel/user retrieves go out before GitHub answers; the repo scope joins late).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from app.agent.runner import ToolCalled, count_tool_calls
from app.github.client import GitHubClient
from app.incoming import HistoryTurn
from memory.types import MemoryCandidate
from tests.app.github.harness import CHANNEL, USER, Bot, RecordingSurface, build_bot, make_settings, message
from tests.fakes.github_api import FakeGitHub
from tests.fakes.model_server import FakeModelServer, tool_reply

REPO_LINE = "The repository for this run: "


@pytest.fixture
async def bot(
    tmp_path: Path, fake_anthropic: FakeModelServer, github_client: GitHubClient
) -> AsyncIterator[Bot]:
    built = build_bot(make_settings(tmp_path, fake_anthropic.base_url), github_client, reflect=True)
    try:
        yield built
    finally:
        await built.tracker.drain(5)
        await built.aclose()


def _system(request: dict[str, Any]) -> str:
    system = request["system"]
    return system if isinstance(system, str) else "".join(block["text"] for block in system)


def _bound_repo(request: dict[str, Any]) -> str | None:
    lines = [line for line in _system(request).splitlines() if line.startswith(REPO_LINE)]
    return lines[-1].removeprefix(REPO_LINE) if lines else None


async def test_each_resolution_source_in_order_of_precedence(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    for name in ("acme/default", "acme/threaded", "acme/mentioned", "acme/linked", "acme/flagged"):
        github_api.add_repo(name)
    fake_anthropic.default_reply = "ok"
    url = "https://github.com/acme/linked/issues/4"
    steps = [
        ("code what is this repo?", "acme/default"),  # only the channel's default
        ("code --repo acme/threaded hi", "acme/threaded"),  # binds the thread
        ("code what now?", "acme/threaded"),  # thread binding beats the channel default
        ("code look at acme/mentioned", "acme/mentioned"),  # a mention beats the thread binding
        (f"code see {url} and acme/mentioned", "acme/linked"),  # a URL beats a mention
        (f"code --repo acme/flagged see {url} and acme/mentioned", "acme/flagged"),  # --repo beats all
    ]
    for index, (text, expected) in enumerate(steps):
        outcome = await bot.dispatcher.dispatch(message(text), RecordingSurface())
        assert outcome.status == "answered", text
        assert outcome.completed is not None and outcome.completed.repo == expected, text
        assert _bound_repo(fake_anthropic.bodies()[index]) == expected, text


@pytest.mark.parametrize(
    ("text", "agent"),
    [("code --repo acme/secret why is CI red?", "coding"), ("review acme/secret#3", "review")],
)
async def test_a_repo_the_app_cannot_see_is_a_clear_reply_for_a_repo_bound_agent(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer, text: str, agent: str
) -> None:
    surface = RecordingSurface()
    outcome = await bot.dispatcher.dispatch(message(text), surface)
    assert (outcome.status, outcome.agent) == ("refused", agent)
    assert surface.replies == ["I can't see acme/secret — is the app installed there?"]
    assert [call.path for call in github_api.calls] == ["/repos/acme/secret"]
    assert fake_anthropic.requests == []
    assert bot.github.resolver.bindings.get("slack:C0REPO:1.0") is None


async def test_a_repo_the_app_cannot_see_just_means_no_repo_scope_for_general(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    fake_anthropic.script("It is a private repository, I think.")
    surface = RecordingSurface()
    outcome = await bot.dispatcher.dispatch(message("what do you know about acme/secret?"), surface)
    assert (outcome.status, outcome.agent) == ("answered", "general")
    assert surface.replies == ["It is a private repository, I think."]
    assert outcome.completed is not None and outcome.completed.repo is None
    assert outcome.completed.scopes is not None and outcome.completed.scopes.repo is None
    assert github_api.calls == []  # a general run has no repo scope (§21): nothing to resolve or bind
    assert not [key for _, key, _ in bot.store.events if key.startswith("repo:")]
    assert _bound_repo(fake_anthropic.bodies()[0]) is None


async def test_a_general_run_never_binds_the_thread_to_a_repo(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    github_api.add_repo("acme/widgets")
    fake_anthropic.script("Widgets is the storefront.", "Blue-green.")
    await bot.dispatcher.dispatch(message("what is acme/widgets for?"), RecordingSurface())
    assert bot.github.resolver.bindings.get("slack:C0REPO:1.0") is None
    assert github_api.calls == []
    outcome = await bot.dispatcher.dispatch(message("how do deploys work?"), RecordingSurface())
    assert outcome.completed is not None and outcome.completed.scopes is not None
    assert outcome.completed.scopes.repo is None


async def test_a_coding_run_calls_two_tools_and_answers_with_the_count_in_its_run_events(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    github_api.add_repo("acme/widgets")
    github_api.add_file("acme/widgets", "src/deploy.py", "def deploy():\n    return blue_green()\n")
    fake_anthropic.script(
        tool_reply("search_code", {"query": "deploy"}, id="toolu_1"),
        tool_reply("read_file", {"path": "src/deploy.py"}, id="toolu_2"),
        "Deploys are blue-green: see src/deploy.py.",
    )
    surface = RecordingSurface()
    with capture_logs() as logs:
        outcome = await bot.dispatcher.dispatch(
            message("code how do deploys work? --repo acme/widgets"), surface
        )
    assert surface.replies == ["Deploys are blue-green: see src/deploy.py."]
    assert outcome.completed is not None
    assert count_tool_calls(outcome.completed.events) == 2 == outcome.completed.tool_calls
    called = [event.call.name for event in outcome.completed.events if isinstance(event, ToolCalled)]
    assert called == ["search_code", "read_file"]
    (run_log,) = [entry for entry in logs if entry["event"] == "dispatch.run"]
    assert (run_log["agent"], run_log["repo"], run_log["tool_calls"]) == ("coding", "acme/widgets", 2)
    requests = fake_anthropic.bodies()
    assert [tool["name"] for tool in requests[0]["tools"]] == [
        "read_file",
        "list_directory",
        "search_code",
        "get_issue",
        "list_commits",
    ]
    results = [block for block in requests[2]["messages"][-1]["content"] if block["type"] == "tool_result"]
    assert len(results) == 1 and "return blue_green()" in json.dumps(results[0]["content"])
    second = [block for block in requests[1]["messages"][-1]["content"] if block["type"] == "tool_result"]
    assert "src/deploy.py" in json.dumps(second[0]["content"])
    assert {call.path for call in github_api.calls} == {
        "/repos/acme/widgets",
        "/search/code",
        "/repos/acme/widgets/contents/src/deploy.py",
    }


async def test_a_github_error_inside_a_coding_run_is_a_tool_error_the_model_sees(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    github_api.add_repo("acme/widgets")
    fake_anthropic.script(
        tool_reply("read_file", {"path": "missing.py"}, id="toolu_1"), "There is no such file."
    )
    outcome = await bot.dispatcher.dispatch(
        message("code read missing.py --repo acme/widgets"), RecordingSurface()
    )
    assert outcome.status == "answered"
    (result,) = [
        b for b in fake_anthropic.bodies()[1]["messages"][-1]["content"] if b["type"] == "tool_result"
    ]
    assert result["is_error"] is True
    assert "no such file" in json.dumps(result["content"])


async def test_a_review_run_posts_exactly_one_pr_review_and_writes_no_memory(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    github_api.add_repo("acme/widgets")
    github_api.add_file("acme/widgets", "README.md", "# Widgets\n")
    github_api.add_pull(
        "acme/widgets",
        12,
        "Retry deploys",
        "Retries twice.",
        files=[{"filename": "src/deploy.py", "patch": "+x"}],
    )
    history = tuple(HistoryTurn("user" if i % 2 == 0 else "assistant", f"earlier turn {i}") for i in range(4))
    fake_anthropic.script("Summary: retries. No blocking findings.")
    surface = RecordingSurface()
    outcome = await bot.dispatcher.dispatch(message("review acme/widgets#12", history=history), surface)
    await bot.tracker.drain(5)

    (review,) = github_api.reviews("acme/widgets")
    assert (review["event"], review["body"]) == ("COMMENT", "Summary: retries. No blocking findings.")
    assert surface.replies == [f"Posted a review on acme/widgets#12 (Retry deploys): {review['html_url']}"]
    assert outcome.agent == "review"
    assert len(fake_anthropic.requests) == 1  # the review itself; no extractor call
    assert bot.store.writes() == []
    assert _bound_repo(fake_anthropic.bodies()[0]) == "acme/widgets"

    # Control: the same thread shape on the coding agent (tools used, 4 prior turns) does reflect.
    fake_anthropic.script(
        tool_reply("read_file", {"path": "README.md"}, id="toolu_1"),
        "The README is one heading.",
        json.dumps(
            {
                "facts": [
                    {
                        "text": "acme/widgets documents itself in README.md",
                        "confidence": 0.9,
                        "audience": "repo",
                    }
                ],
                "summary": "",
            }
        ),
    )
    await bot.dispatcher.dispatch(
        message("code what is in the README? --repo acme/widgets", history=history), RecordingSurface()
    )
    await bot.tracker.drain(5)
    assert bot.store.writes() == ["repo:acme/widgets"]


async def test_the_repo_awaitable_other_scopes_are_read_before_github_answers_and_the_repo_joins_late(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    github_api.add_repo("acme/widgets")
    github_api.delay("GET", "/repos/acme/widgets", 0.3)
    seeds = {
        "org:acme": "deploys need a change ticket",
        "repo:acme/widgets": "widgets deploys are blue green",
        f"channel:{CHANNEL}": "this channel discusses deploys",
        f"user:{USER}": "this user deploys on mondays",
    }
    for scope, text in seeds.items():
        learned = MemoryCandidate(kind="fact", text=text, source_thread_key="t0", origin="public")
        await bot.store.inner.write(scope, [learned])
    fake_anthropic.script("Blue-green, with a ticket.")
    outcome = await bot.dispatcher.dispatch(
        message("code how do deploys work? --repo acme/widgets"), RecordingSurface()
    )
    assert outcome.status == "answered"

    (verify,) = github_api.calls_to("GET", "/repos/acme/widgets")
    assert verify.responded_at is not None
    for scope in ("org:acme", f"channel:{CHANNEL}", f"user:{USER}"):
        (issued,) = bot.store.retrieved_at(scope)
        assert issued < verify.responded_at, f"{scope} waited for GitHub"
    (repo_issued,) = bot.store.retrieved_at("repo:acme/widgets")
    assert repo_issued > verify.responded_at
    system = _system(fake_anthropic.bodies()[0])
    assert system.startswith(
        f"Background memory for org:acme + repo:acme/widgets + channel:{CHANNEL} + user:{USER} "
    )
    for text in seeds.values():
        assert text in system


async def test_a_thread_binding_lets_review_take_a_bare_pr_number(
    bot: Bot, github_api: FakeGitHub, fake_anthropic: FakeModelServer
) -> None:
    github_api.add_repo("acme/widgets")
    github_api.add_pull("acme/widgets", 7, "Small fix", files=[{"filename": "a.py", "patch": "+a"}])
    fake_anthropic.script("ok", "Fine.")
    await bot.dispatcher.dispatch(message("code --repo acme/widgets hello"), RecordingSurface())
    surface = RecordingSurface()
    await bot.dispatcher.dispatch(message("review #7"), surface)
    assert len(github_api.reviews("acme/widgets")) == 1
    assert surface.replies[0].startswith("Posted a review on acme/widgets#7 (Small fix): ")


async def test_with_memory_off_a_general_message_never_calls_github(
    tmp_path: Path, fake_anthropic: FakeModelServer, github_api: FakeGitHub, github_client: GitHubClient
) -> None:
    quiet = build_bot(make_settings(tmp_path, fake_anthropic.base_url, memory=False), github_client)
    try:
        fake_anthropic.script("hi")
        outcome = await quiet.dispatcher.dispatch(message("hello acme/widgets"), RecordingSurface())
    finally:
        await quiet.aclose()
    assert outcome.status == "answered"
    assert github_api.calls == []


async def test_build_runtime_with_github_wires_the_resolver_tools_and_review_from_the_environment(
    tmp_path: Path, fake_anthropic: FakeModelServer, github_api: FakeGitHub
) -> None:
    from app.runtime import build_runtime
    from memory.stores.in_process import InProcessMemoryStore

    github_api.add_repo("acme/widgets")
    github_api.require_token = "ghp_env"
    settings = make_settings(tmp_path, fake_anthropic.base_url)
    env = {"GITHUB_API_URL": github_api.url, "GITHUB_TOKEN": "ghp_env"}
    runtime = build_runtime(
        settings, environ=env, memory_store=InProcessMemoryStore(), with_commands=False, github=True
    )
    try:
        refused = RecordingSurface()
        await runtime.dispatcher.dispatch(message("code --repo acme/secret hi"), refused)
        fake_anthropic.script(tool_reply("list_directory", {}, id="toolu_1"), "Empty repo.")
        answered = RecordingSurface()
        outcome = await runtime.dispatcher.dispatch(
            message("code what is here? --repo acme/widgets"), answered
        )
    finally:
        await runtime.aclose()
    assert refused.replies == ["I can't see acme/secret — is the app installed there?"]
    assert answered.replies == ["Empty repo."]
    assert outcome.completed is not None and outcome.completed.tool_calls == 1
    assert all(call.headers.get("authorization") == "Bearer ghp_env" for call in github_api.calls)


async def test_a_review_on_the_production_runtime_posts_one_review_and_reflection_never_runs(
    tmp_path: Path, fake_anthropic: FakeModelServer, github_api: FakeGitHub
) -> None:
    """The same rule on `build_runtime`'s own reflection hook (memory on), not the harness's step."""
    from app.runtime import build_runtime
    from tests.app.github.harness import RecordingStore

    github_api.add_repo("acme/widgets")
    github_api.add_pull("acme/widgets", 3, "Tidy", files=[{"filename": "a.py", "patch": "+a"}])
    store = RecordingStore()
    env = {"GITHUB_API_URL": github_api.url, "GITHUB_TOKEN": "ghp_env"}
    runtime = build_runtime(
        make_settings(tmp_path, fake_anthropic.base_url),
        environ=env,
        memory_store=store,
        with_commands=False,
        github=True,
    )
    history = tuple(HistoryTurn("user" if i % 2 == 0 else "assistant", f"earlier turn {i}") for i in range(6))
    fake_anthropic.script("Looks fine.")
    surface = RecordingSurface()
    try:
        review = message("review acme/widgets#3", history=history)
        outcome = await runtime.dispatcher.dispatch(review, surface)
        assert await runtime.lifecycle.drain()
    finally:
        await runtime.aclose()
    assert outcome.agent == "review" and outcome.status == "answered"
    assert [review["event"] for review in github_api.reviews("acme/widgets")] == ["COMMENT"]
    assert len(fake_anthropic.requests) == 1  # the review; no extractor call
    assert store.writes() == []
