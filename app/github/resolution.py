"""Which repository a run is about, and whether the bot can actually see it.

Resolution order (first hit wins): `--repo owner/name` in the message, a GitHub URL, a bare
`owner/name` mention, the thread's earlier binding, the channel's configured default. The winner is
verified with `GET /repos/{owner}/{repo}` and its canonical `full_name` becomes the run's repo (and the
thread's binding). The dispatcher starts this as a task while the memory read begins, so the GitHub
round trip never delays the org/channel/user retrieves; the read takes the repo as an awaitable.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import structlog

from app.dispatch import RepoUnavailable as DispatchRepoUnavailable
from app.github.client import GitHubClient, GitHubError, GitHubNotFound, GitHubRateLimited, split_repo
from app.incoming import IncomingMessage

log = structlog.get_logger("github")

RepoSourceKind = Literal["flag", "url", "mention", "thread", "channel"]
ResolutionStatus = Literal["bound", "none", "not_found", "invalid", "error"]

_OWNER = r"[A-Za-z0-9][A-Za-z0-9-]{0,38}"
_NAME = r"[A-Za-z0-9_.-]{1,100}"
_FLAG = re.compile(r"(?:^|(?<=\s))--repo(?:=|\s+)(\S+)")
_FLAG_BARE = re.compile(r"(?:^|(?<=\s))--repo(?=\s*$)")
_MENTION = re.compile(rf"(?<![\w@/.:~#-])({_OWNER})/({_NAME})(?![\w/-])")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
# Path segments of github.com that are not owners.
_RESERVED_OWNERS = frozenset(
    {
        "orgs",
        "settings",
        "marketplace",
        "topics",
        "features",
        "enterprise",
        "sponsors",
        "login",
        "logout",
        "notifications",
        "explore",
        "apps",
        "search",
        "pulls",
        "issues",
        "collections",
        "about",
        "pricing",
        "codespaces",
        "new",
        "organizations",
        "users",
        "site",
        "trending",
    }
)
# Slash pairs that are prose, not repositories.
_PROSE_PAIRS = frozenset(
    {
        "and/or",
        "either/or",
        "i/o",
        "n/a",
        "w/o",
        "w/",
        "yes/no",
        "true/false",
        "on/off",
        "read/write",
        "input/output",
        "client/server",
        "he/him",
        "she/her",
        "they/them",
        "his/her",
        "s/he",
        "tcp/ip",
        "ci/cd",
        "pass/fail",
        "win/loss",
        "am/pm",
        "km/h",
        "a/b",
    }
)


@dataclass(frozen=True, slots=True)
class RepoRequest:
    """A repository named by a source, before verification (`repo` may still be malformed for a flag)."""

    repo: str
    source: RepoSourceKind


@dataclass(frozen=True, slots=True)
class RepoResolution:
    """The outcome: a verified canonical repo, or why there is none."""

    status: ResolutionStatus
    repo: str | None = None
    requested: str | None = None
    source: RepoSourceKind | None = None
    detail: str | None = None

    @property
    def unavailable_reply(self) -> str | None:
        """What a repo-bound agent says instead of running (None: bound, or no repo named at all —
        the dispatcher has its own "which repository?" reply for that)."""
        if self.status == "not_found":
            return f"I can't see {self.requested} — is the app installed there?"
        if self.status == "invalid":
            got = f", got `{self.requested}`" if self.requested else ""
            return f"⚠️ `--repo` needs owner/name{got}."
        if self.status == "error":
            return f"⚠️ I couldn't reach GitHub to check {self.requested}: {self.detail}"
        return None


class RepoUnavailable(DispatchRepoUnavailable):
    """Raised by the resolver hook for a repo-bound agent; its message is the reply the dispatcher sends."""

    def __init__(self, resolution: RepoResolution) -> None:
        super().__init__(resolution.unavailable_reply or "repository unavailable")
        self.resolution = resolution


def find_requested_repo(text: str, *, web_hosts: Iterable[str] = ("github.com",)) -> RepoRequest | None:
    """The repo the message itself names: `--repo` beats a URL beats a bare `owner/name`."""
    flag = _FLAG.search(text)
    if flag:
        value = flag.group(1)
        from_url = _find_url(value, web_hosts)
        return RepoRequest(from_url or _clean_name(value), "flag")
    if _FLAG_BARE.search(text):
        return RepoRequest("", "flag")
    from_url = _find_url(text, web_hosts)
    if from_url:
        return RepoRequest(from_url, "url")
    prose = _CODE.sub(" ", text)
    for match in _MENTION.finditer(prose):
        owner, name = match.group(1), _clean_name(match.group(2))
        candidate = f"{owner}/{name}"
        if _looks_like_repo(owner, name) and candidate.lower() not in _PROSE_PAIRS:
            return RepoRequest(candidate, "mention")
    return None


def _find_url(text: str, web_hosts: Iterable[str]) -> str | None:
    hosts = "|".join(re.escape(host) for host in sorted(set(web_hosts)))
    pattern = re.compile(rf"https?://(?:www\.)?(?:{hosts})/({_OWNER})/({_NAME})(?![\w-])", re.IGNORECASE)
    for match in pattern.finditer(text):
        owner, name = match.group(1), _clean_name(match.group(2))
        if owner.lower() not in _RESERVED_OWNERS and _looks_like_repo(owner, name):
            return f"{owner}/{name}"
    return None


def _clean_name(value: str) -> str:
    value = value.strip().rstrip(".,;:!?)>]'\"")
    return value.removesuffix(".git")


def _looks_like_repo(owner: str, name: str) -> bool:
    if not name or name in (".", "..") or owner.isdigit() or name.isdigit():
        return False
    try:
        split_repo(f"{owner}/{name}")
    except ValueError:
        return False
    return True


class ThreadBindings:
    """thread key → bound repo; in memory, optionally persisted as one small JSON file."""

    def __init__(self, path: Path | None = None, *, max_entries: int = 10_000) -> None:
        self._path = path
        self._max_entries = max_entries
        self._lock = asyncio.Lock()
        self._bindings: dict[str, str] = self._load(path) if path else {}

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> ThreadBindings:
        return cls(data_dir / "repo_bindings.json")

    def get(self, thread_key: str) -> str | None:
        return self._bindings.get(thread_key)

    def __len__(self) -> int:
        return len(self._bindings)

    async def bind(self, thread_key: str, repo: str) -> None:
        """Remember `repo` for the thread (the newest binding wins; the oldest threads fall off)."""
        if self._bindings.get(thread_key) == repo:
            return
        self._bindings.pop(thread_key, None)
        self._bindings[thread_key] = repo
        while len(self._bindings) > self._max_entries:
            self._bindings.pop(next(iter(self._bindings)))
        if self._path is not None:
            async with self._lock:  # one writer at a time, each writing the newest state
                await asyncio.to_thread(_write_json, self._path, dict(self._bindings))

    @staticmethod
    def _load(path: Path) -> dict[str, str]:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            log.warning("github.bindings_unreadable", path=str(path), error=type(error).__name__)
            return {}
        if not isinstance(raw, dict):
            log.warning("github.bindings_unreadable", path=str(path), error="not_an_object")
            return {}
        return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def _write_json(path: Path, data: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


class RepoResolver:
    """Resolve + verify a message's repo; remember it for the thread."""

    def __init__(
        self,
        client: GitHubClient,
        bindings: ThreadBindings,
        *,
        channel_repos: Mapping[str, str] | None = None,
        web_hosts: Iterable[str] | None = None,
    ) -> None:
        self._client = client
        self._bindings = bindings
        self._channel_repos = dict(channel_repos or {})
        self._web_hosts = (
            tuple(web_hosts) if web_hosts is not None else tuple({"github.com", client.web_host})
        )

    @property
    def bindings(self) -> ThreadBindings:
        return self._bindings

    def request_for(self, message: IncomingMessage) -> RepoRequest | None:
        """The unverified winner among the four sources, in precedence order."""
        named = find_requested_repo(message.text, web_hosts=self._web_hosts)
        if named is not None:
            return named
        bound = self._bindings.get(message.thread_key)
        if bound:
            return RepoRequest(bound, "thread")
        default = self._channel_repos.get(message.channel_id or "")
        if default:
            return RepoRequest(default, "channel")
        return None

    async def resolve(self, message: IncomingMessage, *, bind: bool = True) -> RepoResolution:
        """Never raises: a missing, invisible or unreachable repo is a status the caller decides on.
        `bind=False` looks the repo up without remembering it for the thread."""
        request = self.request_for(message)
        if request is None:
            return RepoResolution("none")
        try:
            split_repo(request.repo)
        except ValueError:
            return RepoResolution("invalid", requested=request.repo, source=request.source)
        try:
            found = await self._client.get_repo(request.repo)
        except GitHubNotFound:
            log.info("github.repo_unresolved", repo=request.repo, source=request.source, reason="not_found")
            return RepoResolution("not_found", requested=request.repo, source=request.source)
        except GitHubRateLimited as error:
            log.warning(
                "github.repo_unresolved", repo=request.repo, source=request.source, reason="rate_limited"
            )
            return RepoResolution(
                "error", requested=request.repo, source=request.source, detail=error.message
            )
        except GitHubError as error:
            log.warning(
                "github.repo_unresolved", repo=request.repo, source=request.source, status=error.status
            )
            return RepoResolution(
                "error", requested=request.repo, source=request.source, detail=error.message
            )
        canonical = found.get("full_name")
        repo = canonical if isinstance(canonical, str) and "/" in canonical else request.repo
        if bind:
            await self._bindings.bind(message.thread_key, repo)
            log.info("github.repo_bound", repo=repo, source=request.source)
        return RepoResolution("bound", repo=repo, requested=request.repo, source=request.source)

    def start(self, message: IncomingMessage) -> asyncio.Task[RepoResolution]:
        """The resolution as a task, so the caller can start the memory read beside it."""
        return asyncio.create_task(self.resolve(message), name=f"repo-resolution:{message.thread_key}")

    async def repo_for(self, message: IncomingMessage, *, repo_bound: bool, bind: bool = True) -> str | None:
        """The verified repo or None; for a repo-bound agent a named repo it cannot use raises
        RepoUnavailable (the reply), while no repo at all stays None (the dispatcher asks which)."""
        resolution = await self.resolve(message, bind=bind)
        if repo_bound and resolution.unavailable_reply is not None:
            raise RepoUnavailable(resolution)
        return resolution.repo
