"""A fake GitHub REST API on 127.0.0.1: real HTTP, GitHub's JSON shapes, recorded calls, scripted trouble.

The server runs an aiohttp app on its own event loop in a thread, so it serves sync and async tests
alike and a scripted delay never blocks the test's loop.

Fixtures (function-scoped, registered through tests/conftest.py):

    github_api      FakeGitHub; .url = "http://127.0.0.1:<port>" (GitHubClient(base_url=…) / GITHUB_API_URL)
    github_client   a real app.github.client.GitHubClient on it, token "ghp_test", millisecond backoffs

Seeding (GitHub's routes answer from this state; anything unknown is GitHub's 404):

    github_api.add_repo("acme/widgets")                     GET /repos/{owner}/{repo} (case-insensitive)
    github_api.add_file("acme/widgets", "src/app.py", text, ref=None)   contents (raw or JSON) + listings
    github_api.add_issue(repo, 12, "title", "body", comments=["…"])     issues/{n}, issues/{n}/comments
    github_api.add_pull(repo, 13, "title", "body", files=[{"filename", "patch"}], diff="…")
                                                            pulls/{n} (+ diff Accept), pulls/{n}/files
    github_api.add_commit(repo, sha, "message", paths=("src/app.py",))  commits?sha=&path=&per_page=
    GET /search/code?q=<words> repo:<owner/name>            substring match over the default branch
    POST /repos/{owner}/{repo}/pulls/{n}/reviews            recorded; github_api.reviews(repo)
    github_api.require_token = "ghp_x"                      anything else → 401 Bad credentials

Scripting (path patterns are full-match regexes on the request path):

    github_api.script("GET", "/repos/acme/widgets", 502, times=2)       the next 2 matches get a 502
    github_api.rate_limit("GET", r"/repos/.*", reset_in=0)              403 + x-ratelimit-remaining: 0
    github_api.rate_limit("GET", r"/search/code", status=429, retry_after=1)
    github_api.delay("GET", "/repos/acme/widgets", 0.3)                  answer every match 0.3 s late

Inspecting: `github_api.calls` (RecordedCall: method, path, query, headers (lower-case), json,
received_at / responded_at on time.monotonic(), status) and `github_api.calls_to(method, pattern)`.
Outside pytest: `with running_github_api() as fake: …`.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import pytest
from aiohttp import web

from app.github.client import GitHubClient


@dataclass
class RecordedCall:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any
    received_at: float
    responded_at: float | None = None
    status: int | None = None


@dataclass
class ScriptedResponse:
    method: str
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: Any
    remaining: int


@dataclass
class FakePull:
    title: str
    body: str
    files: list[dict[str, Any]]
    diff: str
    user: str = "octocat"
    head_ref: str = "feature"
    head_sha: str = "0123456789abcdef0123456789abcdef01234567"
    base_ref: str = "main"
    comments: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class FakeRepo:
    full_name: str
    private: bool = False
    default_branch: str = "main"
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # ref → path → text
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[int, FakePull] = field(default_factory=dict)
    commits: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)


class FakeGitHub:
    """State + routes of the fake; `url` is the API base URL to hand the client."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.repos: dict[str, FakeRepo] = {}
        self.calls: list[RecordedCall] = []
        self.require_token: str | None = None
        self._scripts: list[ScriptedResponse] = []
        self._delays: list[tuple[str, re.Pattern[str], float]] = []
        self._ids = itertools.count(1000)
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # -- seeding --------------------------------------------------------------------------------------

    def add_repo(self, full_name: str, *, private: bool = False, default_branch: str = "main") -> FakeRepo:
        repo = FakeRepo(full_name, private=private, default_branch=default_branch)
        self.repos[full_name.lower()] = repo
        return repo

    def add_file(self, full_name: str, path: str, text: str, *, ref: str | None = None) -> None:
        repo = self.repos[full_name.lower()]
        repo.files.setdefault(ref or repo.default_branch, {})[path.strip("/")] = text

    def add_issue(
        self,
        full_name: str,
        number: int,
        title: str,
        body: str = "",
        *,
        comments: list[str] | None = None,
        user: str = "octocat",
        state: str = "open",
    ) -> None:
        repo = self.repos[full_name.lower()]
        repo.issues[number] = {
            "title": title,
            "body": body,
            "user": user,
            "state": state,
            "comments": [_comment(text, index) for index, text in enumerate(comments or [])],
        }

    def add_pull(
        self,
        full_name: str,
        number: int,
        title: str,
        body: str = "",
        *,
        files: list[dict[str, Any]] | None = None,
        diff: str = "",
        comments: list[str] | None = None,
    ) -> FakePull:
        """`files` items: {"filename", "patch", "status"?, "additions"?, "deletions"?}."""
        repo = self.repos[full_name.lower()]
        pull = FakePull(
            title=title,
            body=body,
            files=list(files or []),
            diff=diff,
            comments=[_comment(text, index) for index, text in enumerate(comments or [])],
        )
        repo.pulls[number] = pull
        return pull

    def add_commit(
        self,
        full_name: str,
        sha: str,
        message: str,
        *,
        author: str = "octocat",
        date: str = "2025-01-02T03:04:05Z",
        paths: tuple[str, ...] = (),
    ) -> None:
        repo = self.repos[full_name.lower()]
        repo.commits.insert(
            0, {"sha": sha, "message": message, "author": author, "date": date, "paths": paths}
        )

    def reviews(self, full_name: str) -> list[dict[str, Any]]:
        return list(self.repos[full_name.lower()].reviews)

    # -- scripting ------------------------------------------------------------------------------------

    def script(
        self,
        method: str,
        path_pattern: str,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
    ) -> None:
        """The next `times` requests matching (method, full-match regex on the path) get this response."""
        with self._lock:
            self._scripts.append(
                ScriptedResponse(
                    method.upper(),
                    re.compile(path_pattern),
                    status,
                    dict(headers or {}),
                    body if body is not None else {"message": f"scripted {status}"},
                    times,
                )
            )

    def rate_limit(
        self,
        method: str,
        path_pattern: str,
        *,
        reset_in: float = 0,
        status: int = 403,
        times: int = 1,
        retry_after: int | None = None,
    ) -> None:
        """GitHub's primary rate-limit refusal (remaining 0, reset epoch) or a Retry-After one."""
        headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time() + reset_in))}
        if retry_after is not None:
            headers = {"retry-after": str(retry_after)}
        self.script(
            method,
            path_pattern,
            status,
            headers=headers,
            body={"message": "API rate limit exceeded"},
            times=times,
        )

    def delay(self, method: str, path_pattern: str, seconds: float) -> None:
        """Every request matching (method, full-match regex on the path) is answered `seconds` late."""
        with self._lock:
            self._delays.append((method.upper(), re.compile(path_pattern), seconds))

    def calls_to(self, method: str, path_pattern: str) -> list[RecordedCall]:
        pattern = re.compile(path_pattern)
        with self._lock:
            return [c for c in self.calls if c.method == method.upper() and pattern.fullmatch(c.path)]

    # -- server ---------------------------------------------------------------------------------------

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def serve() -> None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            await web.SockSite(self._runner, sock).start()
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(serve())
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-github", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake GitHub server did not start")

    def stop(self) -> None:
        if self._loop and self._thread:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = await request.json() if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
        call = RecordedCall(
            method=request.method,
            path=request.path,
            query={key: values[-1] for key, values in parse_qs(request.query_string).items()},
            headers={key.lower(): value for key, value in request.headers.items()},
            json=body,
            received_at=time.monotonic(),
        )
        with self._lock:
            self.calls.append(call)
            wait = sum(s for m, p, s in self._delays if m == call.method and p.fullmatch(call.path))
            scripted = next(
                (
                    s
                    for s in self._scripts
                    if s.remaining > 0 and s.method == call.method and s.pattern.fullmatch(call.path)
                ),
                None,
            )
            if scripted:
                scripted.remaining -= 1
        if wait:
            await asyncio.sleep(wait)
        if scripted:
            response = _reply(scripted.status, scripted.body, scripted.headers)
        elif self.require_token and call.headers.get("authorization") != f"Bearer {self.require_token}":
            response = _reply(401, {"message": "Bad credentials"})
        else:
            response = self._route(call)
        call.status = response.status
        call.responded_at = time.monotonic()
        return response

    # -- the GitHub routes ----------------------------------------------------------------------------

    def _route(self, call: RecordedCall) -> web.Response:
        path = call.path
        if call.method == "GET" and path == "/search/code":
            return self._search(call)
        match = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", path)
        repo = self.repos.get(f"{match.group(1)}/{match.group(2)}".lower()) if match else None
        if match is None or repo is None:
            return _not_found()
        rest = match.group(3) or ""
        accept = call.headers.get("accept", "")
        if call.method == "GET" and rest == "":
            return _reply(200, _repo_json(repo))
        if call.method == "GET" and (rest == "/contents" or rest.startswith("/contents/")):
            return self._contents(
                repo, rest.removeprefix("/contents").strip("/"), call.query.get("ref"), accept
            )
        if call.method == "GET" and rest == "/commits":
            return self._commits(repo, call.query)
        if found := re.fullmatch(r"/issues/(\d+)", rest):
            return self._issue(repo, int(found.group(1))) if call.method == "GET" else _not_found()
        if found := re.fullmatch(r"/issues/(\d+)/comments", rest):
            number = int(found.group(1))
            if call.method != "GET":
                return _not_found()
            if number in repo.issues:
                return _reply(200, repo.issues[number]["comments"])
            if number in repo.pulls:
                return _reply(200, repo.pulls[number].comments)
            return _not_found()
        if found := re.fullmatch(r"/pulls/(\d+)", rest):
            pull = repo.pulls.get(int(found.group(1)))
            if pull is None or call.method != "GET":
                return _not_found()
            if "diff" in accept:
                return web.Response(status=200, text=pull.diff, content_type="text/plain")
            return _reply(200, _pull_json(repo, int(found.group(1)), pull))
        if found := re.fullmatch(r"/pulls/(\d+)/files", rest):
            pull = repo.pulls.get(int(found.group(1)))
            if pull is None:
                return _not_found()
            return _reply(200, [_file_json(item) for item in pull.files])
        if found := re.fullmatch(r"/pulls/(\d+)/reviews", rest):
            number = int(found.group(1))
            if call.method != "POST" or number not in repo.pulls:
                return _not_found()
            payload = call.json if isinstance(call.json, dict) else {}
            if payload.get("event") not in ("COMMENT", "APPROVE", "REQUEST_CHANGES"):
                return _reply(422, {"message": "Unprocessable Entity: event"})
            review_id = next(self._ids)
            review = {
                "id": review_id,
                "body": payload.get("body", ""),
                "event": payload["event"],
                "state": "COMMENTED",
                "user": {"login": "switchboard[bot]"},
                "html_url": f"https://github.com/{repo.full_name}/pull/{number}#pullrequestreview-{review_id}",
            }
            with self._lock:
                repo.reviews.append(review)
            return _reply(200, review)
        return _not_found()

    def _contents(self, repo: FakeRepo, path: str, ref: str | None, accept: str) -> web.Response:
        files = repo.files.get(ref or repo.default_branch)
        if files is None:
            return _reply(404, {"message": f"No commit found for the ref {ref}"})
        if path in files:
            text = files[path]
            if "raw" in accept:
                return web.Response(status=200, text=text, content_type="text/plain")
            return _reply(
                200,
                {
                    "type": "file",
                    "name": path.rsplit("/", 1)[-1],
                    "path": path,
                    "size": len(text.encode()),
                    "encoding": "base64",
                    "content": base64.b64encode(text.encode()).decode(),
                },
            )
        prefix = f"{path}/" if path else ""
        entries: dict[str, dict[str, Any]] = {}
        for file_path, text in files.items():
            if not file_path.startswith(prefix):
                continue
            head, _, tail = file_path[len(prefix) :].partition("/")
            entry_path = prefix + head
            if tail:
                entries.setdefault(head, {"name": head, "path": entry_path, "type": "dir", "size": 0})
            else:
                entries[head] = {"name": head, "path": entry_path, "type": "file", "size": len(text.encode())}
        if not entries:
            return _not_found()
        return _reply(200, [entries[name] for name in sorted(entries)])

    def _commits(self, repo: FakeRepo, query: dict[str, str]) -> web.Response:
        per_page = int(query.get("per_page", "30"))
        wanted = query.get("path")
        items = [c for c in repo.commits if not wanted or any(p.startswith(wanted) for p in c["paths"])]
        return _reply(
            200,
            [
                {
                    "sha": c["sha"],
                    "html_url": f"https://github.com/{repo.full_name}/commit/{c['sha']}",
                    "author": {"login": c["author"]},
                    "commit": {"message": c["message"], "author": {"name": c["author"], "date": c["date"]}},
                }
                for c in items[:per_page]
            ],
        )

    def _issue(self, repo: FakeRepo, number: int) -> web.Response:
        if number in repo.issues:
            issue = repo.issues[number]
            return _reply(
                200,
                {
                    "number": number,
                    "title": issue["title"],
                    "body": issue["body"],
                    "state": issue["state"],
                    "user": {"login": issue["user"]},
                    "comments": len(issue["comments"]),
                    "html_url": f"https://github.com/{repo.full_name}/issues/{number}",
                },
            )
        if number in repo.pulls:
            pull = repo.pulls[number]
            return _reply(
                200,
                {
                    "number": number,
                    "title": pull.title,
                    "body": pull.body,
                    "state": "open",
                    "user": {"login": pull.user},
                    "comments": len(pull.comments),
                    "html_url": f"https://github.com/{repo.full_name}/pull/{number}",
                    "pull_request": {"url": f"/repos/{repo.full_name}/pulls/{number}"},
                },
            )
        return _not_found()

    def _search(self, call: RecordedCall) -> web.Response:
        query = call.query.get("q", "")
        repo_names = re.findall(r"repo:(\S+)", query)
        terms = [t.lower() for t in re.sub(r"\S+:\S+", " ", query).split()]
        if not terms:
            return _reply(422, {"message": "Validation Failed"})
        items = []
        for name in repo_names:
            repo = self.repos.get(name.lower())
            if repo is None:
                return _reply(422, {"message": "Validation Failed: repository not found"})
            for path, text in sorted(repo.files.get(repo.default_branch, {}).items()):
                if all(term in text.lower() or term in path.lower() for term in terms):
                    items.append(
                        {
                            "name": path.rsplit("/", 1)[-1],
                            "path": path,
                            "sha": "f" * 40,
                            "repository": {"full_name": repo.full_name},
                            "html_url": f"https://github.com/{repo.full_name}/blob/{repo.default_branch}/{path}",
                        }
                    )
        per_page = int(call.query.get("per_page", "30"))
        return _reply(
            200, {"total_count": len(items), "incomplete_results": False, "items": items[:per_page]}
        )


def _comment(text: str, index: int) -> dict[str, Any]:
    return {
        "id": index + 1,
        "user": {"login": f"user{index + 1}"},
        "body": text,
        "created_at": f"2025-01-0{1 + index % 9}T00:00:00Z",
    }


def _repo_json(repo: FakeRepo) -> dict[str, Any]:
    owner, name = repo.full_name.split("/")
    return {
        "id": abs(hash(repo.full_name)) % 10**8,
        "name": name,
        "full_name": repo.full_name,
        "owner": {"login": owner},
        "private": repo.private,
        "default_branch": repo.default_branch,
        "html_url": f"https://github.com/{repo.full_name}",
    }


def _pull_json(repo: FakeRepo, number: int, pull: FakePull) -> dict[str, Any]:
    return {
        "number": number,
        "title": pull.title,
        "body": pull.body,
        "state": "open",
        "user": {"login": pull.user},
        "html_url": f"https://github.com/{repo.full_name}/pull/{number}",
        "head": {"ref": pull.head_ref, "sha": pull.head_sha},
        "base": {"ref": pull.base_ref},
        "additions": sum(int(f.get("additions", 0)) for f in pull.files),
        "deletions": sum(int(f.get("deletions", 0)) for f in pull.files),
        "changed_files": len(pull.files),
    }


def _file_json(item: dict[str, Any]) -> dict[str, Any]:
    patch = item.get("patch", "")
    return {
        "filename": item["filename"],
        "status": item.get("status", "modified"),
        "additions": item.get("additions", patch.count("\n+")),
        "deletions": item.get("deletions", patch.count("\n-")),
        "changes": item.get("changes", 0),
        **({"patch": patch} if "patch" in item or patch else {}),
    }


def _reply(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


def _not_found() -> web.Response:
    return _reply(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})


@contextmanager
def running_github_api() -> Iterator[FakeGitHub]:
    """The fake outside a fixture (e.g. for a subprocess pointed at it with GITHUB_API_URL)."""
    fake = FakeGitHub()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def github_api() -> Iterator[FakeGitHub]:
    """A running fake GitHub API (fresh state per test)."""
    with running_github_api() as fake:
        yield fake


@pytest.fixture
async def github_client(github_api: FakeGitHub) -> AsyncIterator[GitHubClient]:
    """A real GitHubClient on the fake, with millisecond backoffs so retry tests stay fast."""
    client = GitHubClient(
        base_url=github_api.url,
        token="ghp_test",
        backoff_base=0.01,
        max_backoff=0.05,
        max_rate_limit_wait=2.0,
    )
    try:
        yield client
    finally:
        await client.aclose()
