"""What the dispatcher knows about one message, built once and handed on.

`RequestContext` is built when the message arrives: who will read the reply and the scopes the message
reaches. The command caller gets it. `RunContext` adds, for an agent run, the repo's resolution and
the request's scopes once the repo resolved, each started once: the memory read, its audit, the
completed run and reflection all take them from here rather than building them again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass

from app.audience import reader_for
from app.incoming import IncomingMessage
from memory.context import scopes_with_repo
from memory.rules.scope import RequestScopes, request_scope_keys
from memory.rules.visibility import Reader


@dataclass(frozen=True, slots=True)
class RequestContext:
    """The message, who reads its reply, and the scopes it reaches before any repo is known (org,
    channel, user); `scopes` is None without a valid organization (or ids no scope key accepts)."""

    message: IncomingMessage
    reader: Reader
    scopes: RequestScopes | None


def request_context(organization: str | None, message: IncomingMessage) -> RequestContext:
    return RequestContext(message, reader_for(message), _message_scopes(organization, message))


@dataclass(frozen=True, slots=True)
class RunContext:
    """An agent run's request, its repo (None for a run that is not repo-bound) and the request's
    scopes with the repo's (None when the request has none)."""

    request: RequestContext
    repo: asyncio.Task[str | None]
    scopes: asyncio.Task[RequestScopes | None]

    @property
    def message(self) -> IncomingMessage:
        return self.request.message

    @property
    def reader(self) -> Reader:
        return self.request.reader

    def tasks(self) -> tuple[asyncio.Task[str | None], asyncio.Task[RequestScopes | None]]:
        return self.repo, self.scopes


def start_run(request: RequestContext, repo: Awaitable[str | None]) -> RunContext:
    """Start the repo's resolution and, behind it, the scopes with the repo's: both once, now."""
    repo_task = asyncio.ensure_future(repo)
    return RunContext(request, repo_task, asyncio.create_task(_bound_scopes(request.scopes, repo_task)))


async def _bound_scopes(scopes: RequestScopes | None, repo: Awaitable[str | None]) -> RequestScopes | None:
    """A repo that fails to resolve is no repo scope here: the run refuses on it, not its scopes."""
    try:
        name = await repo
    except Exception:
        name = None
    return await scopes_with_repo(scopes, name) if scopes is not None else None


def _message_scopes(organization: str | None, message: IncomingMessage) -> RequestScopes | None:
    if not organization:
        return None
    try:
        return request_scope_keys(organization, user_id=message.user_id, channel_id=message.channel_id)
    except ValueError:
        return None
