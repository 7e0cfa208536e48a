"""Repo resolution: the four sources in precedence order, verification, thread bindings."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.github.client import GitHubClient
from app.github.resolution import (
    RepoResolver,
    RepoUnavailable,
    ThreadBindings,
    find_requested_repo,
)
from app.incoming import IncomingMessage
from tests.fakes.github_api import FakeGitHub

CHANNEL = "slack:C0DEFAULT"


def _message(text: str, thread: str = "slack:C0DEFAULT:1.0") -> IncomingMessage:
    return IncomingMessage(
        text=text, thread_key=thread, surface="slack", user_id="slack:U1", channel_id=CHANNEL
    )


def _resolver(client: GitHubClient, bindings: ThreadBindings | None = None) -> RepoResolver:
    bindings = bindings if bindings is not None else ThreadBindings()
    return RepoResolver(client, bindings, channel_repos={CHANNEL: "acme/default"})


@pytest.fixture
def seeded(github_api: FakeGitHub) -> FakeGitHub:
    for name in ("acme/flagged", "acme/linked", "acme/mentioned", "acme/threaded", "acme/default"):
        github_api.add_repo(name)
    return github_api


async def test_each_source_in_order_of_precedence(seeded: FakeGitHub, github_client: GitHubClient) -> None:
    bindings = ThreadBindings()
    await bindings.bind("slack:C0DEFAULT:1.0", "acme/threaded")
    resolver = _resolver(github_client, bindings)
    url = "https://github.com/acme/linked/pull/3"
    steps = [
        (f"look at acme/mentioned and {url} --repo acme/flagged", "acme/flagged", "flag"),
        (f"look at acme/mentioned and {url}", "acme/linked", "url"),
        ("look at acme/mentioned", "acme/mentioned", "mention"),
        ("what does it do?", "acme/mentioned", "thread"),  # the previous step rebound the thread
    ]
    for text, repo, source in steps:
        resolution = await resolver.resolve(_message(text))
        assert (resolution.status, resolution.repo, resolution.source) == ("bound", repo, source), text
    fresh = await resolver.resolve(_message("what does it do?", thread="slack:C0DEFAULT:2.0"))
    assert (fresh.repo, fresh.source) == ("acme/default", "channel")
    verified = [call.path for call in seeded.calls]
    assert verified == [
        "/repos/acme/flagged",
        "/repos/acme/linked",
        "/repos/acme/mentioned",
        "/repos/acme/mentioned",
        "/repos/acme/default",
    ]


async def test_the_thread_binding_beats_the_channel_default(
    seeded: FakeGitHub, github_client: GitHubClient
) -> None:
    bindings = ThreadBindings()
    await bindings.bind("slack:C0DEFAULT:1.0", "acme/threaded")
    resolution = await _resolver(github_client, bindings).resolve(_message("and the tests?"))
    assert (resolution.repo, resolution.source) == ("acme/threaded", "thread")


async def test_the_canonical_full_name_from_github_is_the_bound_repo(
    github_api: FakeGitHub, github_client: GitHubClient
) -> None:
    github_api.add_repo("Acme/Widgets")
    resolution = await _resolver(github_client).resolve(_message("--repo acme/widgets what is this"))
    assert resolution.repo == "Acme/Widgets"


async def test_a_missing_repo_is_not_found_and_is_not_remembered(
    github_api: FakeGitHub, github_client: GitHubClient
) -> None:
    bindings = ThreadBindings()
    resolution = await RepoResolver(github_client, bindings).resolve(_message("--repo acme/secret hi"))
    assert resolution.status == "not_found"
    assert resolution.repo is None
    assert resolution.unavailable_reply == "I can't see acme/secret — is the app installed there?"
    assert bindings.get("slack:C0DEFAULT:1.0") is None


async def test_a_repo_bound_agent_gets_the_cant_see_reply_and_general_gets_no_repo(
    github_api: FakeGitHub, github_client: GitHubClient
) -> None:
    resolver = RepoResolver(github_client, ThreadBindings())
    with pytest.raises(RepoUnavailable, match=r"^I can't see acme/secret — is the app installed there\?$"):
        await resolver.repo_for(_message("acme/secret: why is CI red?"), repo_bound=True)
    assert await resolver.repo_for(_message("acme/secret: why is CI red?"), repo_bound=False) is None


async def test_no_repo_at_all_is_none_even_for_a_repo_bound_agent(github_client: GitHubClient) -> None:
    resolver = RepoResolver(github_client, ThreadBindings())
    assert await resolver.repo_for(_message("why is CI red?"), repo_bound=True) is None


async def test_github_trouble_is_an_error_status_not_a_crash(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    github_api.script("GET", "/repos/acme/widgets", 500, times=5)
    async with GitHubClient(base_url=github_api.url, max_retries=1, backoff_base=0.01) as client:
        resolution = await RepoResolver(client, ThreadBindings()).resolve(_message("--repo acme/widgets"))
    assert resolution.status == "error"
    assert resolution.unavailable_reply is not None and "GitHub 500" in resolution.unavailable_reply


async def test_no_source_means_no_repo_and_no_github_call(
    github_api: FakeGitHub, github_client: GitHubClient
) -> None:
    resolution = await RepoResolver(github_client, ThreadBindings()).resolve(_message("hello there"))
    assert resolution.status == "none"
    assert github_api.calls == []


async def test_a_malformed_repo_flag_is_refused_naming_the_option(github_client: GitHubClient) -> None:
    resolution = await RepoResolver(github_client, ThreadBindings()).resolve(_message("--repo widgets hi"))
    assert resolution.status == "invalid"
    assert resolution.unavailable_reply == "⚠️ `--repo` needs owner/name, got `widgets`."


async def test_bindings_persist_as_json_in_the_data_dir(
    tmp_path: Path, seeded: FakeGitHub, github_client: GitHubClient
) -> None:
    bindings = ThreadBindings.in_data_dir(tmp_path)
    await _resolver(github_client, bindings).resolve(_message("--repo acme/flagged"))
    reloaded = ThreadBindings.in_data_dir(tmp_path)
    assert reloaded.get("slack:C0DEFAULT:1.0") == "acme/flagged"


def test_an_unreadable_bindings_file_starts_empty(tmp_path: Path) -> None:
    (tmp_path / "repo_bindings.json").write_text("{not json", encoding="utf-8")
    assert len(ThreadBindings.in_data_dir(tmp_path)) == 0


async def test_bindings_keep_the_newest_threads_when_full() -> None:
    bindings = ThreadBindings(max_entries=2)
    for index in range(3):
        await bindings.bind(f"t{index}", "acme/widgets")
    assert (bindings.get("t0"), bindings.get("t1"), bindings.get("t2")) == (
        None,
        "acme/widgets",
        "acme/widgets",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("review acme/widgets#12 please", "acme/widgets"),
        ("see <https://github.com/acme/widgets/pull/3|the PR>", "acme/widgets"),
        ("clone https://github.com/acme/widgets.git", "acme/widgets"),
        ("is vercel/next.js affected?", "vercel/next.js"),
        ("ask acme/widgets.", "acme/widgets"),
        ("--repo=https://github.com/acme/widgets fix it", "acme/widgets"),
    ],
)
def test_mentions_are_found_in_the_forms_people_write(text: str, expected: str) -> None:
    found = find_requested_repo(text)
    assert found is not None and found.repo == expected


@pytest.mark.parametrize(
    "text",
    [
        "use and/or here",
        "look in `src/app.py`",
        "```\nfrom lib/utils import x\n```",
        "it runs 24/7",
        "see https://github.com/orgs/acme/people",
        "a path like src/app/main.py",
        "email me at me@host/thing",
    ],
)
def test_prose_paths_and_code_are_not_repo_mentions(text: str) -> None:
    assert find_requested_repo(text) is None


def test_a_github_enterprise_url_is_recognized_on_its_own_host() -> None:
    found = find_requested_repo(
        "https://ghe.example.com/acme/widgets/issues/1", web_hosts=("ghe.example.com",)
    )
    assert found is not None and (found.repo, found.source) == ("acme/widgets", "url")
