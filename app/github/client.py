"""A small async GitHub REST client: one place for the base URL, the token, retries and size caps.

Everything a model sees from GitHub passes through here, so every body is read under a byte cap (a
huge file or diff can never flood memory or a prompt), and rate limits and 5xx are retried a bounded
number of times with a bounded wait: a run is never stalled for an hour by a rate-limit reset.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import structlog

log = structlog.get_logger("github")

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
JSON_ACCEPT = "application/vnd.github+json"
RAW_ACCEPT = "application/vnd.github.raw+json"
DIFF_ACCEPT = "application/vnd.github.diff"

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
ERROR_BODY_BYTES = 64 * 1024
DEFAULT_TIMEOUT = 15.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_BACKOFF_BASE = 0.5
DEFAULT_MAX_BACKOFF = 8.0
DEFAULT_MAX_RATE_LIMIT_WAIT = 30.0

_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_NAME = r"[A-Za-z0-9_.-]{1,100}"
_REPO_FULL = re.compile(rf"^({_OWNER})/({_NAME})$")


class GitHubError(RuntimeError):
    """A GitHub call failed; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.path = path


class GitHubNotFound(GitHubError):
    """404: the resource does not exist or the token cannot see it (GitHub does not say which)."""


class GitHubRateLimited(GitHubError):
    """Rate limited for longer than the client is willing to wait."""

    def __init__(self, message: str, *, status: int, path: str, wait_seconds: float | None) -> None:
        super().__init__(message, status=status, path=path)
        self.wait_seconds = wait_seconds


def split_repo(full_name: str) -> tuple[str, str]:
    """`owner/name` → (owner, name); a clear ValueError for anything else."""
    match = _REPO_FULL.match(full_name.strip())
    if not match or match.group(2) in (".", ".."):
        raise ValueError(f"repository must look like owner/name, got {full_name!r}")
    return match.group(1), match.group(2)


def cap_text(text: str, limit: int) -> str:
    """At most `limit` characters, saying how much was cut so the model knows it saw a part."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [truncated: {len(text) - limit} more characters]"


@dataclass(frozen=True, slots=True)
class GitHubResponse:
    """A response whose body was read under a byte cap (`truncated` says the cap was hit)."""

    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    path: str

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        if self.truncated:
            raise GitHubError(
                f"GitHub response for {self.path} exceeded the {len(self.body)}-byte cap",
                status=self.status,
                path=self.path,
            )
        try:
            return json.loads(self.body) if self.body else None
        except ValueError as error:
            raise GitHubError(
                f"GitHub sent non-JSON for {self.path}", status=self.status, path=self.path
            ) from error


Sleep = Callable[[float], Awaitable[None]]


class GitHubClient:
    """httpx.AsyncClient on the GitHub REST API (or a GitHub Enterprise / fake base URL)."""

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_API_URL,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_base: float = DEFAULT_BACKOFF_BASE,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        max_rate_limit_wait: float = DEFAULT_MAX_RATE_LIMIT_WAIT,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        clock: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be > 0")
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.max_backoff = max_backoff
        self.max_rate_limit_wait = max_rate_limit_wait
        self.max_body_bytes = max_body_bytes
        self._clock = clock
        self._sleep = sleep
        headers = {"Accept": JSON_ACCEPT, "X-GitHub-Api-Version": API_VERSION, "User-Agent": "switchboard"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(
            base_url=self.base_url + "/", headers=headers, timeout=timeout, transport=transport
        )

    @classmethod
    def from_env(
        cls, api_url: str | None = None, env: Mapping[str, str] | None = None, **options: Any
    ) -> GitHubClient:
        """Base URL: the `github.api_url` setting, else GITHUB_API_URL, else api.github.com.

        The token comes only from the environment (GITHUB_TOKEN); without one, public repos still work.
        """
        env = os.environ if env is None else env
        base_url = api_url or env.get("GITHUB_API_URL") or DEFAULT_API_URL
        token = env.get("GITHUB_TOKEN") or None
        return cls(base_url=base_url, token=token, **options)

    @property
    def web_host(self) -> str:
        """The host of github.com-style URLs for this API (GitHub Enterprise: the API host itself)."""
        host = httpx.URL(self.base_url).host
        return "github.com" if host == "api.github.com" else host

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> GitHubClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the one request loop ---------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json_body: Any = None,
        accept: str = JSON_ACCEPT,
        max_bytes: int | None = None,
    ) -> GitHubResponse:
        """Send one request, retrying 5xx / rate limits / transport errors a bounded number of times.

        Non-idempotent requests (POST, PATCH) are retried only when GitHub certainly did not act on
        them (a rate-limit refusal, a connection that never opened), so a review is never posted twice.
        """
        method = method.upper()
        idempotent = method in _IDEMPOTENT
        cap = min(max_bytes or self.max_body_bytes, self.max_body_bytes)
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                response = await self._send(method, path, params, json_body, accept, cap)
            except httpx.TransportError as error:
                retryable = idempotent or isinstance(error, httpx.ConnectError)
                log.warning(
                    "github.transport_error",
                    method=method,
                    path=path,
                    attempt=attempt,
                    error=type(error).__name__,
                )
                if retryable and attempt < self.max_retries:
                    await self._sleep(self._backoff(attempt))
                    attempt += 1
                    continue
                raise GitHubError(
                    f"GitHub unreachable ({type(error).__name__}) for {path}", path=path
                ) from error
            log.info(
                "github.request",
                method=method,
                path=path,
                status=response.status,
                attempt=attempt,
                ms=round((time.monotonic() - started) * 1000),
            )
            if response.status < 400:
                return response
            wait = self._rate_limit_wait(response)
            if wait is not None:
                if wait > self.max_rate_limit_wait or attempt >= self.max_retries:
                    raise GitHubRateLimited(
                        f"GitHub rate limit hit for {path}; retry in about {round(wait)}s",
                        status=response.status,
                        path=path,
                        wait_seconds=wait,
                    )
                await self._sleep(wait)
                attempt += 1
                continue
            if response.status >= 500 and idempotent and attempt < self.max_retries:
                await self._sleep(self._backoff(attempt))
                attempt += 1
                continue
            raise _error_for(response)

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str | int] | None,
        json_body: Any,
        accept: str,
        cap: int,
    ) -> GitHubResponse:
        async with self._http.stream(
            method, path.lstrip("/"), params=params, json=json_body, headers={"Accept": accept}
        ) as response:
            limit = cap if response.status_code < 400 else min(cap, ERROR_BODY_BYTES)
            chunks: list[bytes] = []
            size = 0
            truncated = False
            async for chunk in response.aiter_bytes():
                room = limit - size
                if len(chunk) > room:
                    chunks.append(chunk[:room])
                    truncated = True
                    break
                chunks.append(chunk)
                size += len(chunk)
            return GitHubResponse(response.status_code, response.headers, b"".join(chunks), truncated, path)

    def _backoff(self, attempt: int) -> float:
        return float(min(self.backoff_base * (2**attempt), self.max_backoff))

    def _rate_limit_wait(self, response: GitHubResponse) -> float | None:
        """Seconds to wait when this is a rate-limit refusal (403/429), else None."""
        if response.status not in (403, 429):
            return None
        headers = response.headers
        retry_after = headers.get("retry-after", "").strip()
        if retry_after.isdigit():
            return float(retry_after)
        if headers.get("x-ratelimit-remaining", "").strip() == "0":
            reset = headers.get("x-ratelimit-reset", "").strip()
            if reset.isdigit():
                return max(0.0, float(reset) - self._clock())
            return self._backoff(0)
        if response.status == 429:
            return self._backoff(0)
        return None

    async def get_json(
        self, path: str, params: Mapping[str, str | int] | None = None, *, max_bytes: int | None = None
    ) -> Any:
        return (await self.request("GET", path, params=params, max_bytes=max_bytes)).json()

    # -- the calls the bot makes ------------------------------------------------------------------

    async def get_repo(self, full_name: str) -> dict[str, Any]:
        """GET /repos/{owner}/{repo}: a 404 means missing *or* invisible to this token."""
        owner, name = split_repo(full_name)
        return _as_dict(await self.get_json(f"repos/{owner}/{name}"), "repository")

    async def get_file(
        self, full_name: str, path: str, ref: str | None = None, *, max_bytes: int
    ) -> GitHubResponse:
        """A file's raw bytes (read under `max_bytes`), or the JSON listing when `path` is a directory."""
        owner, name = split_repo(full_name)
        params = {"ref": ref} if ref else None
        return await self.request(
            "GET",
            f"repos/{owner}/{name}/contents/{_quote_path(path)}",
            params=params,
            accept=RAW_ACCEPT,
            max_bytes=max_bytes,
        )

    async def list_directory(self, full_name: str, path: str = "", ref: str | None = None) -> Any:
        owner, name = split_repo(full_name)
        params = {"ref": ref} if ref else None
        return await self.get_json(f"repos/{owner}/{name}/contents/{_quote_path(path)}", params)

    async def search_code(self, full_name: str, query: str, *, per_page: int = 20) -> dict[str, Any]:
        split_repo(full_name)
        params: dict[str, str | int] = {"q": f"{query} repo:{full_name}", "per_page": per_page}
        return _as_dict(await self.get_json("search/code", params), "search result")

    async def get_issue(self, full_name: str, number: int) -> dict[str, Any]:
        owner, name = split_repo(full_name)
        return _as_dict(await self.get_json(f"repos/{owner}/{name}/issues/{int(number)}"), "issue")

    async def list_issue_comments(self, full_name: str, number: int, *, per_page: int = 30) -> list[Any]:
        owner, name = split_repo(full_name)
        path = f"repos/{owner}/{name}/issues/{int(number)}/comments"
        return _as_list(await self.get_json(path, {"per_page": per_page}), "comments")

    async def get_pull(self, full_name: str, number: int) -> dict[str, Any]:
        owner, name = split_repo(full_name)
        return _as_dict(await self.get_json(f"repos/{owner}/{name}/pulls/{int(number)}"), "pull request")

    async def list_pull_files(self, full_name: str, number: int, *, per_page: int = 100) -> list[Any]:
        owner, name = split_repo(full_name)
        path = f"repos/{owner}/{name}/pulls/{int(number)}/files"
        return _as_list(await self.get_json(path, {"per_page": per_page}), "pull request files")

    async def list_commits(
        self, full_name: str, *, ref: str | None = None, path: str | None = None, per_page: int = 10
    ) -> list[Any]:
        owner, name = split_repo(full_name)
        params: dict[str, str | int] = {"per_page": per_page}
        if ref:
            params["sha"] = ref
        if path:
            params["path"] = path
        return _as_list(await self.get_json(f"repos/{owner}/{name}/commits", params), "commits")

    async def create_review(
        self, full_name: str, number: int, body: str, *, event: str = "COMMENT"
    ) -> dict[str, Any]:
        owner, name = split_repo(full_name)
        response = await self.request(
            "POST",
            f"repos/{owner}/{name}/pulls/{int(number)}/reviews",
            json_body={"body": body, "event": event},
        )
        return _as_dict(response.json(), "review")


def _quote_path(path: str) -> str:
    return quote(path.strip("/"), safe="/")


def _as_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise GitHubError(f"GitHub sent an unexpected {what} shape")
    return value


def _as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise GitHubError(f"GitHub sent an unexpected {what} shape")
    return value


def _error_for(response: GitHubResponse) -> GitHubError:
    """A short error naming the status and GitHub's own message (never the request's token)."""
    detail = ""
    try:
        payload = json.loads(response.body) if response.body and not response.truncated else None
        if isinstance(payload, dict) and isinstance(payload.get("message"), str):
            detail = payload["message"][:300]
    except ValueError:
        detail = ""
    message = f"GitHub {response.status} for {response.path}" + (f": {detail}" if detail else "")
    if response.status == 404:
        return GitHubNotFound(message, status=404, path=response.path)
    return GitHubError(message, status=response.status, path=response.path)
