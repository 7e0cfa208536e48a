"""`switchboard serve`: run the Slack bot.

Socket Mode when SLACK_APP_TOKEN is set (development: no public URL needed), otherwise HTTP mode on
$PORT (default 3000) with Slack's Events API and the `/memory` slash command at /slack/events, every
request signature-checked with SLACK_SIGNING_SECRET (production; the Procfile's `web:` line).
SLACK_API_URL points the Web API client somewhere else (tests use a local fake).

SIGTERM/SIGINT: stop taking events (Slack gets a 503 and redelivers later), wait for answers in flight
and their post-run work (settings.shutdown_deadline_seconds), then exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence

import structlog

from app.lifecycle import Lifecycle
from app.slack.bot import SlackBot, build_slack_app, make_web_client
from app.slack.home.tab import Permalinks as SlackPermalinks
from app.slack.options import SlackOptions
from app.slack.review_digest import SlackDigestSender
from app.slack.slash import ChannelRepo
from app.slack.transports.http_site import EVENTS_PATH, bound_port, start_http
from app.slack.transports.socket_mode import ConnectPolicy, SocketModeStartError, connect_socket_mode
from commands.browse import MemoryBrowser
from config.settings import ConfigError, Settings, load_settings
from ops.heap import settle_heap
from ops.http_guard import GuardLimits, serving_limits
from ops.log_setup import configure_logging
from ops.metrics import Metrics
from ops.tracing import configure_tracing

log = structlog.get_logger("slack")

PROG = "switchboard serve"
DEFAULT_PORT = 3000
MANIFEST_HINT = (
    "create the Slack app from manifest.yml (api.slack.com/apps → Create New App → From an app "
    'manifest) and install it to your workspace; README.md, "Slack in five steps", walks through it'
)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run the Slack bot: Socket Mode when SLACK_APP_TOKEN is set, else HTTP on $PORT.",
    )
    parser.add_argument("--config", help="config file (default: switchboard.toml or $SWITCHBOARD_CONFIG)")
    parser.add_argument("--host", default="0.0.0.0", help="HTTP mode: interface to bind (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=None, help="HTTP mode: port (default $PORT, else 3000)")
    parser.add_argument("--log-level", default=None, help="debug|info|warning|error (default info)")
    return parser.parse_args(list(argv))


def slack_credentials_problem(settings: Settings) -> str | None:
    """One line naming the missing variable, or None when the chosen mode has what it needs."""
    secrets = settings.secrets
    if not secrets.slack_bot_token:
        return (
            "SLACK_BOT_TOKEN is not set: export the app's Bot User OAuth Token (xoxb-…, from OAuth & "
            f"Permissions) — to get one, {MANIFEST_HINT}"
        )
    if not secrets.slack_app_token and not secrets.slack_signing_secret:
        return (
            "SLACK_SIGNING_SECRET is not set (HTTP mode, because SLACK_APP_TOKEN is not set either): export "
            "the Signing Secret from the app's Basic Information page, or set SLACK_APP_TOKEN (xapp-…) for "
            f"Socket Mode — to create the app, {MANIFEST_HINT}"
        )
    return None


def http_port(args_port: int | None, env: Mapping[str, str], settings: Settings) -> int:
    if args_port is not None:
        return args_port
    raw = env.get("PORT")
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 65536:
            raise ConfigError(f"config error: PORT = {raw!r}: expected a TCP port number 1-65535")
        return int(raw)
    return settings.slack.port or DEFAULT_PORT


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env = os.environ
    try:
        settings = load_settings(config_path=args.config)
        port = http_port(args.port, env, settings)
    except ConfigError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    from app.runtime import credentials_problem

    # Everything a first start lacks, said at once: a newcomer fixes it in one go, not one restart each.
    problems = [p for p in (slack_credentials_problem(settings), credentials_problem(settings, env)) if p]
    if problems:
        print(f"{PROG}: {'; and '.join(problems)}", file=sys.stderr)
        return 2
    try:
        configure_logging(args.log_level or env.get("SWITCHBOARD_LOG_LEVEL") or "info")
    except ValueError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    configure_tracing(env, "switchboard")
    try:
        return asyncio.run(serve(settings, env, host=args.host, port=port))
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were installed (still starting up)
        print(f"{PROG}: interrupted while starting", file=sys.stderr)
        return 130


async def serve(settings: Settings, env: Mapping[str, str], *, host: str, port: int) -> int:
    """Build the bot, serve until a signal, drain, close. Returns the process exit code."""
    from app.runtime import build_commands, build_memory, start_runtime

    metrics = Metrics()
    try:
        store = build_memory(settings, env)
        secrets = settings.secrets
        client = make_web_client(
            secrets.reveal(secrets.slack_bot_token) or "", env.get("SLACK_API_URL") or settings.slack.api_url
        )
        permalinks = SlackPermalinks(client)  # one cache: the typed `memory why` and the Why? button
        commands, make_caller = build_commands(settings, store, permalinks=permalinks)
        runtime = await start_runtime(
            settings,
            environ=env,
            memory_store=store,
            commands=commands,
            make_caller=make_caller,
            github=True,
            metrics=metrics,
            review_digest=SlackDigestSender(client),  # the admins hear by DM of what waits for review
        )
    except ConfigError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2

    secrets = settings.secrets
    app_token = secrets.reveal(secrets.slack_app_token)
    bot = build_slack_app(
        dispatcher=runtime.dispatcher,
        registry=commands,
        bot_token=secrets.reveal(secrets.slack_bot_token) or "",
        signing_secret=None if app_token else secrets.reveal(secrets.slack_signing_secret),
        base_url=env.get("SLACK_API_URL") or settings.slack.api_url,
        options=slack_options(settings),
        caller_factory=make_caller,
        channel_repo=_channel_repo(settings),
        client=client,
        memory_store=store if settings.memory.enabled else None,
        permalinks=permalinks,
        browser=MemoryBrowser(
            store=store,
            memory_enabled=settings.memory.enabled,
            organization=settings.organization,
            admins=settings.admins,
            review=settings.memory.review == "shared",
        ),
    )
    lifecycle = runtime.lifecycle
    lifecycle.add_on_stop(bot.stop_accepting)
    lifecycle.add_waiter(bot.drain)
    lifecycle.install_signal_handlers()
    settle_heap()
    failures: list[str] = []
    try:
        if app_token:
            policy = ConnectPolicy(deadline_seconds=settings.slack.connect_timeout_seconds)
            drained = await _socket_mode(bot, app_token, runtime.lifecycle, policy, failures)
        else:
            metrics_token = secrets.reveal(secrets.metrics_token)
            drained = await _http_mode(bot, host, port, runtime.lifecycle, metrics, metrics_token)
    except SocketModeStartError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    finally:
        lifecycle.remove_signal_handlers()
        await bot.aclose()
        await runtime.aclose()
    log.info("slack.stopped", drained=drained)
    return 0 if drained and not failures else 1


def slack_options(settings: Settings) -> SlackOptions:
    slack = settings.slack
    return SlackOptions(
        allow_bots=slack.respond_to_bots,
        multi_workspace=slack.multi_workspace,
    )


def _channel_repo(settings: Settings) -> ChannelRepo:
    """The slash command has no thread: its repo is the channel's configured default."""

    async def channel_repo(channel_id: str) -> str | None:
        channel = settings.channel(channel_id)
        return channel.repo if channel is not None else None

    return channel_repo


async def _http_mode(
    bot: SlackBot, host: str, port: int, lifecycle: Lifecycle, metrics: Metrics, metrics_token: str | None
) -> bool:
    limits = serving_limits(GuardLimits())  # the open-file limit raised, the cap kept below it
    runner = await start_http(
        bot, host=host, port=port, limits=limits, metrics=metrics, metrics_token=metrics_token
    )
    log.info("slack.serving", mode="http", host=host, port=bound_port(runner), path=EVENTS_PATH)
    try:
        await lifecycle.wait_for_stop()
        # Still listening while draining: new deliveries get a 503 and Slack redelivers them later.
        return await lifecycle.drain()
    finally:
        await runner.cleanup()


async def _socket_mode(
    bot: SlackBot, app_token: str, lifecycle: Lifecycle, policy: ConnectPolicy, failures: list[str]
) -> bool:
    """Connect (a stop request wins over connecting), serve until a stop, drain."""

    def on_fatal(message: str) -> None:  # the token was refused on a reconnect: stop, do not loop
        failures.append(message)
        print(f"{PROG}: {message}", file=sys.stderr)
        lifecycle.request_stop("slack_app_token_refused")

    connecting = asyncio.ensure_future(
        connect_socket_mode(bot.app, bot.client, app_token, policy, on_fatal=on_fatal)
    )
    stop = asyncio.ensure_future(lifecycle.wait_for_stop())
    try:
        await asyncio.wait({connecting, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if not connecting.done():
        connecting.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        log.info("slack.connect_abandoned", reason="stop_requested")
        return await lifecycle.drain()
    connection = connecting.result()  # SocketModeStartError: one line, exit code 1
    log.info("slack.serving", mode="socket")
    try:
        await lifecycle.wait_for_stop()
        # Unacknowledged envelopes go back to Slack, which redelivers them to the next connection.
        await connection.handler.disconnect_async()
        return await lifecycle.drain()
    finally:
        await connection.close()
