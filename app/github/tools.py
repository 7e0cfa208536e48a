"""The coding agent's read-only GitHub tools, confined to the run's bound repository.

Each tool is an app.agent.tools.Tool: a ToolSpec (the JSON schema the model sees) plus an async handler
that returns compact text. The repo is fixed when the tools are built for a run, never taken from the
model, so a prompt cannot steer the agent into another repository. Every result is capped before the
model sees it; a GitHub failure or a bad argument raises GitHubToolError with a short reason, which
the agent loop hands the model as an error tool result it can react to — never a crashed run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from app.agent.providers.base import ToolSpec
from app.agent.tools import Tool, ToolContext, Toolset
from app.github.client import GitHubClient, GitHubError, GitHubNotFound, cap_text

FILE_BYTES_CAP = 256 * 1024
FILE_CHARS_CAP = 12_000
LISTING_ENTRIES_CAP = 200
SEARCH_RESULTS_CAP = 20
ISSUE_BODY_CAP = 4_000
COMMENT_CAP = 1_000
COMMENTS_SHOWN = 20
PR_FILES_SHOWN = 50
RESULT_CHARS_CAP = 16_000
DEFAULT_COMMITS = 10
MAX_COMMITS = 30


class GitHubToolError(RuntimeError):
    """A tool failed in a way the model should read (the runner turns it into an error tool result)."""


class ArgumentError(GitHubToolError):
    """The model sent arguments the schema does not allow; the message names the field."""


def coding_tools(client: GitHubClient, repo: str) -> tuple[Tool, ...]:
    """The five read-only tools, bound to `repo` (a verified owner/name)."""
    tools = _RepoTools(client, repo)
    return (
        Tool(READ_FILE, tools.read_file),
        Tool(LIST_DIRECTORY, tools.list_directory),
        Tool(SEARCH_CODE, tools.search_code),
        Tool(GET_ISSUE, tools.get_issue),
        Tool(LIST_COMMITS, tools.list_commits),
    )


def github_toolset(client: GitHubClient) -> Toolset:
    """The coding agent's per-run toolset: the GitHub tools for the run's bound repo (none without one)."""

    def build(context: ToolContext) -> tuple[Tool, ...]:
        return coding_tools(client, context.repo) if context.repo else ()

    return build


_REF = {"type": "string", "description": "Branch, tag or commit SHA (default: the default branch)."}

READ_FILE = ToolSpec(
    name="read_file",
    description="Read one text file of the bound repository. Long files are truncated.",
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path from the repository root, e.g. src/app.py"},
            "ref": _REF,
        },
        "required": ["path"],
        "additionalProperties": False,
    },
)
LIST_DIRECTORY = ToolSpec(
    name="list_directory",
    description="List the files and directories at a path of the bound repository (root by default).",
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory path; empty for the root."},
            "ref": _REF,
        },
        "additionalProperties": False,
    },
)
SEARCH_CODE = ToolSpec(
    name="search_code",
    description=(
        "Search the bound repository's code (default branch) with GitHub code search. Returns matching "
        "file paths; read them with read_file."
    ),
    input_schema={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words or an identifier to look for."}},
        "required": ["query"],
        "additionalProperties": False,
    },
)
GET_ISSUE = ToolSpec(
    name="get_issue",
    description="Get an issue or pull request of the bound repository with its comments.",
    input_schema={
        "type": "object",
        "properties": {"number": {"type": "integer", "minimum": 1, "description": "Issue or PR number."}},
        "required": ["number"],
        "additionalProperties": False,
    },
)
LIST_COMMITS = ToolSpec(
    name="list_commits",
    description="List recent commits of the bound repository, newest first.",
    input_schema={
        "type": "object",
        "properties": {
            "ref": _REF,
            "path": {"type": "string", "description": "Only commits touching this path."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_COMMITS, "default": DEFAULT_COMMITS},
        },
        "additionalProperties": False,
    },
)


class _RepoTools:
    def __init__(self, client: GitHubClient, repo: str) -> None:
        self._client = client
        self._repo = repo

    async def read_file(self, arguments: Mapping[str, Any]) -> str:
        async def run() -> str:
            path = _required(arguments, "path").strip("/")
            ref = _string(arguments, "ref")
            response = await self._client.get_file(self._repo, path, ref, max_bytes=FILE_BYTES_CAP)
            content_type = response.headers.get("content-type", "")
            if "json" in content_type and response.body.lstrip().startswith(b"["):
                raise ArgumentError(f"`{path}` is a directory; use list_directory")
            where = f"{self._repo}:{path}" + (f"@{ref}" if ref else "")
            if b"\x00" in response.body[:8192]:
                return f"{where} is a binary file ({len(response.body)} bytes); not shown."
            note = f" (first {FILE_BYTES_CAP} bytes)" if response.truncated else ""
            return f"{where}{note}\n" + cap_text(response.text, FILE_CHARS_CAP)

        return await _guard(run, not_found="no such file (check the path and ref)")

    async def list_directory(self, arguments: Mapping[str, Any]) -> str:
        async def run() -> str:
            path = (_string(arguments, "path") or "").strip("/")
            ref = _string(arguments, "ref")
            listing = await self._client.list_directory(self._repo, path, ref)
            if isinstance(listing, dict):
                raise ArgumentError(f"`{path}` is a file; use read_file")
            if not isinstance(listing, list):
                raise GitHubError("GitHub sent an unexpected directory listing")
            lines = [f"{self._repo}:/{path} ({len(listing)} entries)"]
            for entry in listing[:LISTING_ENTRIES_CAP]:
                if not isinstance(entry, dict):
                    continue
                name = str(entry.get("name", "?"))
                if entry.get("type") == "dir":
                    lines.append(f"{name}/")
                else:
                    lines.append(f"{name} ({_size(entry.get('size'))})")
            if len(listing) > LISTING_ENTRIES_CAP:
                lines.append(f"… {len(listing) - LISTING_ENTRIES_CAP} more entries")
            return "\n".join(lines)

        return await _guard(run, not_found="no such directory (check the path and ref)")

    async def search_code(self, arguments: Mapping[str, Any]) -> str:
        async def run() -> str:
            query = _required(arguments, "query")
            found = await self._client.search_code(self._repo, query, per_page=SEARCH_RESULTS_CAP)
            items = [item for item in found.get("items", []) if isinstance(item, dict)]
            total = found.get("total_count", len(items))
            if not items:
                return f"No code in {self._repo} matches {query!r}."
            lines = [
                f"{total} files in {self._repo} match {query!r}"
                + (" (showing the first ones)" if isinstance(total, int) and total > len(items) else "")
            ]
            lines += [str(item.get("path", "?")) for item in items]
            return "\n".join(lines)

        return await _guard(run, not_found="the repository cannot be searched")

    async def get_issue(self, arguments: Mapping[str, Any]) -> str:
        async def run() -> str:
            number = _integer(arguments, "number", minimum=1)
            issue = await self._client.get_issue(self._repo, number)
            comments = await self._client.list_issue_comments(self._repo, number, per_page=COMMENTS_SHOWN)
            is_pull = isinstance(issue.get("pull_request"), dict)
            kind = "PR" if is_pull else "Issue"
            lines = [
                f"{kind} {self._repo}#{number} [{issue.get('state', '?')}] {issue.get('title', '')}",
                f"by {_login(issue.get('user'))} — {issue.get('html_url', '')}",
            ]
            if is_pull:
                lines += await self._pull_summary(number)
            lines += ["", cap_text(str(issue.get("body") or "(no description)"), ISSUE_BODY_CAP)]
            total = issue.get("comments", len(comments))
            lines += ["", f"Comments ({total}):" if comments else "No comments."]
            for comment in comments:
                if isinstance(comment, dict):
                    body = cap_text(str(comment.get("body") or ""), COMMENT_CAP)
                    lines.append(
                        f"- {_login(comment.get('user'))} ({comment.get('created_at', '?')}): {body}"
                    )
            if isinstance(total, int) and total > len(comments):
                lines.append(f"… {total - len(comments)} more comments")
            return "\n".join(lines)

        return await _guard(run, not_found="no such issue or pull request")

    async def _pull_summary(self, number: int) -> list[str]:
        pull = await self._client.get_pull(self._repo, number)
        files = await self._client.list_pull_files(self._repo, number, per_page=PR_FILES_SHOWN)
        head, base = pull.get("head") or {}, pull.get("base") or {}
        lines = [
            f"{head.get('ref', '?')} → {base.get('ref', '?')}: +{pull.get('additions', 0)} "
            f"−{pull.get('deletions', 0)} in {pull.get('changed_files', len(files))} files"
        ]
        lines += [f"  {f.get('status', '?')} {f.get('filename', '?')}" for f in files if isinstance(f, dict)]
        return lines

    async def list_commits(self, arguments: Mapping[str, Any]) -> str:
        async def run() -> str:
            ref = _string(arguments, "ref")
            path = _string(arguments, "path")
            limit = _integer(arguments, "limit", minimum=1, maximum=MAX_COMMITS, default=DEFAULT_COMMITS)
            commits = await self._client.list_commits(self._repo, ref=ref, path=path, per_page=limit)
            if not commits:
                return f"No commits in {self._repo}" + (f" touching {path}" if path else "") + "."
            lines = []
            for item in commits[:limit]:
                if not isinstance(item, dict):
                    continue
                commit = item.get("commit") or {}
                author = commit.get("author") or {}
                subject = str(commit.get("message") or "").strip().splitlines()
                who = _login(item.get("author")) if item.get("author") else author.get("name", "?")
                date = str(author.get("date", "?"))[:10]
                lines.append(f"{str(item.get('sha', '?'))[:7]} {date} {who}: {subject[0] if subject else ''}")
            return "\n".join(lines)

        return await _guard(run, not_found="no such ref or path")


async def _guard(run: Callable[[], Awaitable[str]], *, not_found: str) -> str:
    """The text, capped; a GitHub failure becomes a GitHubToolError the model reads as an error result."""
    try:
        return cap_text(await run(), RESULT_CHARS_CAP)
    except GitHubNotFound as error:
        raise GitHubToolError(not_found) from error
    except GitHubError as error:
        raise GitHubToolError(error.message) from error


def _string(arguments: Mapping[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ArgumentError(f"`{name}` must be a string")
    return value


def _required(arguments: Mapping[str, Any], name: str) -> str:
    value = _string(arguments, name)
    if value is None or not value.strip():
        raise ArgumentError(f"`{name}` is required")
    return value


def _integer(
    arguments: Mapping[str, Any],
    name: str,
    *,
    minimum: int,
    maximum: int | None = None,
    default: int | None = None,
) -> int:
    value = arguments.get(name, default)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentError(f"`{name}` must be an integer")
    if value < minimum or (maximum is not None and value > maximum):
        allowed = f"{minimum}–{maximum}" if maximum is not None else f"≥ {minimum}"
        raise ArgumentError(f"`{name}` must be {allowed}, got {value}")
    return value


def _login(user: object) -> str:
    return str(user.get("login", "?")) if isinstance(user, dict) else "?"


def _size(size: object) -> str:
    if not isinstance(size, int):
        return "?"
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"
