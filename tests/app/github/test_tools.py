"""The coding agent's GitHub tools against the fake GitHub API: compact text, caps, error results."""

from __future__ import annotations

from typing import Any

import pytest

from app.agent.tools import Tool, ToolContext
from app.github.client import GitHubClient
from app.github.tools import FILE_CHARS_CAP, GitHubToolError, coding_tools, github_toolset
from app.incoming import IncomingMessage
from tests.fakes.github_api import FakeGitHub

REPO = "acme/widgets"


@pytest.fixture
def repo(github_api: FakeGitHub) -> FakeGitHub:
    github_api.add_repo(REPO)
    github_api.add_file(REPO, "README.md", "# Widgets\nMake widgets.\n")
    github_api.add_file(REPO, "src/app.py", "def deploy():\n    return 'shipped'\n")
    github_api.add_file(REPO, "src/util/strings.py", "def slug(s):\n    return s.lower()\n")
    github_api.add_file(REPO, "src/app.py", "def deploy():\n    return 'old'\n", ref="v1")
    return github_api


def _tools(client: GitHubClient) -> dict[str, Tool]:
    return {tool.spec.name: tool for tool in coding_tools(client, REPO)}


async def _call(client: GitHubClient, name: str, **arguments: Any) -> str:
    return await _tools(client)[name].handler(arguments)


def test_every_tool_has_a_json_object_schema_the_model_can_see(github_client: GitHubClient) -> None:
    tools = coding_tools(github_client, REPO)
    names = [tool.spec.name for tool in tools]
    assert names == ["read_file", "list_directory", "search_code", "get_issue", "list_commits"]
    for tool in tools:
        schema = tool.spec.input_schema
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema.get("required", [])) <= set(schema["properties"])
        assert tool.spec.description


async def test_read_file_returns_the_text_with_where_it_came_from(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    output = await _call(github_client, "read_file", path="src/app.py")
    assert output == "acme/widgets:src/app.py\ndef deploy():\n    return 'shipped'\n"


async def test_read_file_at_a_ref_reads_that_ref(repo: FakeGitHub, github_client: GitHubClient) -> None:
    output = await _call(github_client, "read_file", path="src/app.py", ref="v1")
    assert "return 'old'" in output
    assert repo.calls[-1].query == {"ref": "v1"}


async def test_a_long_file_is_capped_before_the_model_sees_it(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    repo.add_file(REPO, "big.log", "z" * (FILE_CHARS_CAP * 3))
    output = await _call(github_client, "read_file", path="big.log")
    assert len(output) < FILE_CHARS_CAP + 200
    assert f"{FILE_CHARS_CAP * 2} more characters" in output


async def test_a_missing_file_is_an_error_result_not_an_exception(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    with pytest.raises(GitHubToolError, match=r"^no such file \(check the path and ref\)$"):
        await _call(github_client, "read_file", path="nope.py")


async def test_reading_a_directory_points_at_list_directory(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    with pytest.raises(GitHubToolError, match="`src` is a directory; use list_directory"):
        await _call(github_client, "read_file", path="src")


async def test_a_binary_file_is_not_dumped_on_the_model(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    repo.add_file(REPO, "logo.png", "\x89PNG\x00\x00\x00binary")
    output = await _call(github_client, "read_file", path="logo.png")
    assert "binary file" in output
    assert "PNG" not in output


async def test_list_directory_marks_directories_and_sizes(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    root = await _call(github_client, "list_directory")
    assert root.splitlines() == ["acme/widgets:/ (2 entries)", "README.md (24 B)", "src/"]
    nested = await _call(github_client, "list_directory", path="src/")
    assert nested.splitlines()[1:] == ["app.py (35 B)", "util/"]


async def test_search_code_lists_matching_paths_in_the_bound_repo_only(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    output = await _call(github_client, "search_code", query="deploy")
    assert output.splitlines() == ["1 files in acme/widgets match 'deploy'", "src/app.py"]
    assert repo.calls[-1].query["q"] == "deploy repo:acme/widgets"


async def test_get_issue_carries_the_comments(repo: FakeGitHub, github_client: GitHubClient) -> None:
    repo.add_issue(REPO, 12, "Deploy fails", "It fails on Fridays.", comments=["Same here", "Fixed by #13?"])
    output = await _call(github_client, "get_issue", number=12)
    lines = output.splitlines()
    assert lines[0] == "Issue acme/widgets#12 [open] Deploy fails"
    assert "It fails on Fridays." in output
    assert "Comments (2):" in lines
    assert any(line.startswith("- user1 (") and line.endswith("Same here") for line in lines)


async def test_get_issue_on_a_pull_request_adds_its_branches_and_files(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    repo.add_pull(
        REPO, 13, "Fix Fridays", "Closes #12", files=[{"filename": "src/app.py", "patch": "@@\n+x"}]
    )
    output = await _call(github_client, "get_issue", number=13)
    assert output.startswith("PR acme/widgets#13 [open] Fix Fridays")
    assert "feature → main" in output
    assert "  modified src/app.py" in output.splitlines()


async def test_list_commits_is_one_line_per_commit_and_respects_the_limit(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    for index in range(5):
        repo.add_commit(REPO, str(index) * 40, f"change {index}\n\nlong body", author="dev")
    output = await _call(github_client, "list_commits", limit=2)
    assert output.splitlines() == [
        "4444444 2025-01-02 dev: change 4",
        "3333333 2025-01-02 dev: change 3",
    ]
    assert repo.calls[-1].query["per_page"] == "2"


async def test_a_github_failure_is_an_error_result_naming_the_status(
    repo: FakeGitHub, github_client: GitHubClient
) -> None:
    repo.script("GET", "/repos/acme/widgets/commits", 500, times=10)
    with pytest.raises(GitHubToolError, match="GitHub 500"):
        await _call(github_client, "list_commits")


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("read_file", {}, "`path` is required"),
        ("read_file", {"path": 3}, "`path` must be a string"),
        ("get_issue", {"number": 0}, "`number` must be ≥ 1, got 0"),
        ("get_issue", {"number": "x"}, "`number` must be an integer"),
        ("list_commits", {"limit": 99}, "`limit` must be 1–30, got 99"),
    ],
)
async def test_bad_arguments_are_error_results_naming_the_field(
    repo: FakeGitHub, github_client: GitHubClient, name: str, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(GitHubToolError) as caught:
        await _tools(github_client)[name].handler(arguments)
    assert str(caught.value) == message
    assert repo.calls == []


def test_the_toolset_gives_the_coding_agent_tools_only_for_a_bound_repo(github_client: GitHubClient) -> None:
    message = IncomingMessage(text="hi", thread_key="t", surface="cli")
    toolset = github_toolset(github_client)
    assert toolset(ToolContext(message=message, run_id="r1", repo=None)) == ()
    names = [tool.name for tool in toolset(ToolContext(message=message, run_id="r1", repo=REPO))]
    assert names == ["read_file", "list_directory", "search_code", "get_issue", "list_commits"]
