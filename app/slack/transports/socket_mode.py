"""Socket Mode that starts and stops cleanly.

The SDK's client retries a failed connection forever (a traceback every few seconds, whatever the
cause). Here opening a connection (`apps.connections.open` with SLACK_APP_TOKEN) follows one policy:
an auth error (a mistyped, revoked or wrong-kind token) fails at once; a network error, a 5xx or a rate
limit is retried with bounded exponential backoff until the connect deadline; either failure is one
line naming SLACK_APP_TOKEN and Slack's error. A stop request (SIGTERM/SIGINT) wins over connecting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

log = structlog.get_logger("slack")

# Slack errors that no retry can fix: the token itself is wrong.
AUTH_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
        "missing_scope",
        "no_permission",
        "team_access_not_granted",
        "app_deleted",
    }
)
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
TOKEN_HINT = (
    "an app-level token (xapp-…) with the connections:write scope, from the app's Basic Information → "
    "App-Level Tokens"
)


class SocketModeStartError(RuntimeError):
    """Socket Mode cannot connect; the message is one line for the operator."""


@dataclass(frozen=True, slots=True)
class ConnectPolicy:
    """How long to keep trying a transient failure, and how the waits grow."""

    deadline_seconds: float = 20.0
    first_backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0


def _slack_error(error: SlackApiError) -> tuple[str, int | None]:
    response: Any = error.response
    try:
        code = str(response.get("error") or "unknown_error")
    except AttributeError:
        code = "unknown_error"
    return code, getattr(response, "status_code", None)


async def open_connection_url(
    client: AsyncWebClient,
    app_token: str,
    policy: ConnectPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """The WebSocket URL from `apps.connections.open`, or SocketModeStartError (one line)."""
    started = clock()
    backoff = policy.first_backoff_seconds
    attempts = 0
    while True:
        attempts += 1
        try:
            response = await client.apps_connections_open(app_token=app_token)
            return str(response["url"])
        except SlackApiError as error:
            code, status = _slack_error(error)
            transient = code in TRANSIENT_ERRORS or (status is not None and status >= 500)
            if not transient:
                why = f"Slack refused SLACK_APP_TOKEN ({code})"
                if code in AUTH_ERRORS:
                    why += f": it must be {TOKEN_HINT}"
                raise SocketModeStartError(why) from None
            problem = f"Slack answered {code}"
        except (aiohttp.ClientError, OSError, TimeoutError, SlackClientError) as error:
            problem = f"{type(error).__name__}: {str(error)[:160] or 'no detail'}"
        waited = clock() - started
        if waited + backoff > policy.deadline_seconds:
            raise SocketModeStartError(
                f"cannot open a Socket Mode connection with SLACK_APP_TOKEN: {problem} "
                f"({attempts} attempts in {waited:.0f}s; check the network and SLACK_API_URL)"
            )
        log.warning("slack.socket_retry", attempt=attempts, backoff_seconds=backoff, problem=problem)
        await sleep(backoff)
        backoff = min(backoff * 2, policy.max_backoff_seconds)


class OneLineLogs(logging.Filter):
    """The SDK logs each failed connect with a traceback; keep its message, drop the traceback (and
    drop a refused token entirely: the caller reports it once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, SocketModeStartError) or "SocketModeStartError" in record.getMessage():
            return False  # already said, in the one line the operator gets
        record.exc_info = None
        record.exc_text = None
        return True


def socket_logger() -> logging.Logger:
    logger = logging.getLogger("switchboard.socket_mode")
    if not any(isinstance(f, OneLineLogs) for f in logger.filters):
        logger.addFilter(OneLineLogs())
    return logger


@dataclass
class SocketConnection:
    """The Bolt Socket Mode handler, connected under the policy; `fatal` says why it gave up."""

    handler: Any
    fatal: str | None = None
    connected: bool = False

    async def close(self) -> None:
        await self.handler.close_async()


async def connect_socket_mode(
    app: Any,
    client: AsyncWebClient,
    app_token: str,
    policy: ConnectPolicy,
    *,
    on_fatal: Callable[[str], None],
) -> SocketConnection:
    """Connect within the policy's deadline or raise SocketModeStartError. Later reconnects use the
    same policy; a token refused then calls `on_fatal` (the process stops) instead of looping."""
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    handler = AsyncSocketModeHandler(app, app_token=app_token, web_client=client, logger=socket_logger())
    connection = SocketConnection(handler)
    sdk_client = handler.client
    # Its own client without the SDK's retry handlers: the policy above is the only retry loop.
    opener = AsyncWebClient(base_url=client.base_url, timeout=int(min(10, policy.deadline_seconds)) or 1)

    async def issue_new_wss_url() -> str:
        try:
            return await open_connection_url(opener, app_token, policy)
        except SocketModeStartError as error:
            sdk_client.closed = True  # ends the SDK's own retry loop
            connection.fatal = str(error)
            if connection.connected:  # a reconnect: at start-up the caller gets the error raised
                on_fatal(str(error))
            raise

    # The SDK's one seam for where a connection URL comes from (SocketModeClient.issue_new_wss_url).
    sdk_client.issue_new_wss_url = issue_new_wss_url  # type: ignore[method-assign]
    try:
        async with asyncio.timeout(policy.deadline_seconds + 5):
            await handler.connect_async()  # type: ignore[no-untyped-call]
    except TimeoutError:
        await connection.close()
        raise SocketModeStartError(
            "cannot open a Socket Mode connection with SLACK_APP_TOKEN: the WebSocket did not connect "
            f"within {policy.deadline_seconds + 5:.0f}s"
        ) from None
    except BaseException:
        await connection.close()
        raise
    if connection.fatal is not None:
        await connection.close()
        raise SocketModeStartError(connection.fatal)
    connection.connected = True
    return connection
