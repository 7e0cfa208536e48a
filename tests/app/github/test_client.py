"""The GitHub client against the fake GitHub API: base URL, token, bounded retries, size caps."""

from __future__ import annotations

import pytest

from app.github.client import (
    DEFAULT_API_URL,
    GitHubClient,
    GitHubError,
    GitHubNotFound,
    GitHubRateLimited,
    cap_text,
    split_repo,
)
from tests.fakes.github_api import FakeGitHub
from tests.memory.service_support import free_port


def _fast(base_url: str, **options: object) -> GitHubClient:
    settings: dict[str, object] = {"backoff_base": 0.01, "max_backoff": 0.05, "max_rate_limit_wait": 2.0}
    settings.update(options)
    return GitHubClient(base_url=base_url, token="ghp_test", **settings)  # type: ignore[arg-type]


async def test_base_url_and_token_come_from_github_api_url_and_github_token(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    github_api.require_token = "ghp_from_env"
    client = GitHubClient.from_env(env={"GITHUB_API_URL": github_api.url, "GITHUB_TOKEN": "ghp_from_env"})
    async with client:
        repo = await client.get_repo("acme/widgets")
    assert repo["full_name"] == "acme/widgets"
    (call,) = github_api.calls
    assert call.headers["authorization"] == "Bearer ghp_from_env"
    assert call.headers["x-github-api-version"] == "2022-11-28"


async def test_the_api_url_setting_wins_over_the_environment(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    client = GitHubClient.from_env(api_url=github_api.url, env={"GITHUB_API_URL": "http://127.0.0.1:9"})
    async with client:
        await client.get_repo("acme/widgets")
    assert len(github_api.calls) == 1


def test_without_settings_or_env_the_client_targets_api_github_com() -> None:
    client = GitHubClient.from_env(env={})
    assert client.base_url == DEFAULT_API_URL
    assert client.web_host == "github.com"


def test_a_github_enterprise_api_url_keeps_its_own_web_host() -> None:
    client = GitHubClient.from_env(api_url="https://ghe.example.com/api/v3", env={})
    assert client.web_host == "ghe.example.com"


async def test_a_5xx_is_retried_until_github_answers(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    github_api.script("GET", "/repos/acme/widgets", 502, times=2)
    async with _fast(github_api.url) as client:
        repo = await client.get_repo("acme/widgets")
    assert repo["name"] == "widgets"
    assert [c.status for c in github_api.calls] == [502, 502, 200]


async def test_5xx_retries_are_bounded_and_end_in_an_error_naming_the_status(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    github_api.script("GET", "/repos/acme/widgets", 503, times=10)
    async with _fast(github_api.url, max_retries=2) as client:
        with pytest.raises(GitHubError) as caught:
            await client.get_repo("acme/widgets")
    assert caught.value.status == 503
    assert len(github_api.calls) == 3


async def test_a_primary_rate_limit_waits_for_the_reset_then_retries(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    github_api.rate_limit("GET", "/repos/acme/widgets", reset_in=0)
    async with _fast(github_api.url) as client:
        await client.get_repo("acme/widgets")
    assert [c.status for c in github_api.calls] == [403, 200]


async def test_a_429_with_retry_after_is_retried(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    github_api.rate_limit("GET", "/repos/acme/widgets", status=429, retry_after=0)
    async with _fast(github_api.url) as client:
        await client.get_repo("acme/widgets")
    assert [c.status for c in github_api.calls] == [429, 200]


async def test_a_rate_limit_reset_beyond_the_cap_fails_at_once_instead_of_stalling_the_run(
    github_api: FakeGitHub,
) -> None:
    github_api.add_repo("acme/widgets")
    github_api.rate_limit("GET", "/repos/acme/widgets", reset_in=3600)
    async with _fast(github_api.url, max_rate_limit_wait=2.0) as client:
        with pytest.raises(GitHubRateLimited) as caught:
            await client.get_repo("acme/widgets")
    assert caught.value.wait_seconds is not None and caught.value.wait_seconds > 2.0
    assert len(github_api.calls) == 1


async def test_a_plain_403_is_a_permission_error_and_is_not_retried(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    github_api.script("GET", "/repos/acme/widgets", 403, body={"message": "Resource not accessible"})
    async with _fast(github_api.url) as client:
        with pytest.raises(GitHubError) as caught:
            await client.get_repo("acme/widgets")
    assert caught.value.status == 403
    assert "Resource not accessible" in str(caught.value)
    assert not isinstance(caught.value, GitHubRateLimited)
    assert len(github_api.calls) == 1


async def test_a_post_is_never_retried_after_a_5xx_so_a_review_cannot_land_twice(
    github_api: FakeGitHub,
) -> None:
    github_api.add_repo("acme/widgets")
    github_api.add_pull("acme/widgets", 7, "Fix")
    github_api.script("POST", "/repos/acme/widgets/pulls/7/reviews", 502)
    async with _fast(github_api.url) as client:
        with pytest.raises(GitHubError):
            await client.create_review("acme/widgets", 7, "Looks fine")
    assert len(github_api.calls_to("POST", "/repos/acme/widgets/pulls/7/reviews")) == 1


async def test_a_rate_limited_post_is_retried_because_github_did_not_act_on_it(
    github_api: FakeGitHub,
) -> None:
    github_api.add_repo("acme/widgets")
    github_api.add_pull("acme/widgets", 7, "Fix")
    github_api.rate_limit("POST", "/repos/acme/widgets/pulls/7/reviews", reset_in=0)
    async with _fast(github_api.url) as client:
        review = await client.create_review("acme/widgets", 7, "Looks fine")
    assert review["html_url"].endswith(f"#pullrequestreview-{review['id']}")
    assert len(github_api.reviews("acme/widgets")) == 1


async def test_a_404_is_github_not_found(github_api: FakeGitHub) -> None:
    async with _fast(github_api.url) as client:
        with pytest.raises(GitHubNotFound) as caught:
            await client.get_repo("acme/missing")
    assert caught.value.status == 404


async def test_a_raw_body_is_read_under_the_byte_cap(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    github_api.add_file("acme/widgets", "big.txt", "x" * 50_000)
    async with _fast(github_api.url) as client:
        response = await client.get_file("acme/widgets", "big.txt", max_bytes=1000)
    assert response.truncated
    assert len(response.body) == 1000


async def test_an_oversized_json_body_is_refused_not_parsed(github_api: FakeGitHub) -> None:
    github_api.add_repo("acme/widgets")
    for index in range(200):
        github_api.add_file("acme/widgets", f"src/file_{index:03}.py", "pass\n")
    async with _fast(github_api.url, max_body_bytes=2000) as client:
        with pytest.raises(GitHubError, match="cap"):
            await client.list_directory("acme/widgets", "src")


async def test_an_unreachable_github_is_a_bounded_error_not_a_hang() -> None:
    async with _fast(f"http://127.0.0.1:{free_port()}", max_retries=1) as client:
        with pytest.raises(GitHubError, match="unreachable"):
            await client.get_repo("acme/widgets")


def test_split_repo_refuses_anything_but_owner_slash_name() -> None:
    assert split_repo("acme/widgets") == ("acme", "widgets")
    for bad in ("acme", "acme/", "/widgets", "a/b/c", "acme/..", "ac me/widgets"):
        with pytest.raises(ValueError, match="owner/name"):
            split_repo(bad)


def test_cap_text_says_how_much_was_cut() -> None:
    assert cap_text("short", 10) == "short"
    capped = cap_text("y" * 30, 10)
    assert capped.startswith("y" * 10)
    assert "20 more characters" in capped
