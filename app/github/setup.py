"""Wire GitHub into the bot once at start-up: the client, the repo resolver, the agents' GitHub parts.

Whoever builds the Dispatcher does:

    github = build_github(settings, agents)
    Dispatcher(..., agents=github.agents, repo_resolver=github.repo_resolver,
               agent_runners=github.agent_runners)
    ...
    await github.aclose()
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from app.agent.agents import Agent, AgentRegistry
from app.dispatch import AgentRunner
from app.github.client import DEFAULT_API_URL, GitHubClient
from app.github.resolution import RepoResolver, ThreadBindings
from app.github.review import review_runner
from app.github.tools import github_toolset
from app.incoming import IncomingMessage
from config.settings import Settings

CODING_AGENT = "coding"
REVIEW_AGENT = "review"


@dataclass(frozen=True, slots=True)
class GitHubSetup:
    client: GitHubClient
    resolver: RepoResolver
    agents: AgentRegistry
    agent_runners: Mapping[str, AgentRunner]
    resolve_for_unbound: bool

    async def repo_resolver(self, message: IncomingMessage, agent: Agent | None) -> str | None:
        """The Dispatcher's hook. A repo-bound agent gets the verified repo or RepoUnavailable (the
        "I can't see owner/name" reply) and binds the thread to it. A general run has no repo.
        No agent is `memory list`'s lazy lookup of the thread's repo: resolved (only with memory on,
        since only memory uses it) but never bound."""
        if agent is not None and not agent.repo_bound:
            return None
        if agent is None and not self.resolve_for_unbound:
            return None
        repo_bound = agent is not None
        return await self.resolver.repo_for(message, repo_bound=repo_bound, bind=repo_bound)

    async def aclose(self) -> None:
        await self.client.aclose()


def github_client_from_settings(settings: Settings, env: Mapping[str, str] | None = None) -> GitHubClient:
    """`github.api_url` (else GITHUB_API_URL, else api.github.com); the token from GITHUB_TOKEN."""
    environ = os.environ if env is None else env
    token = settings.secrets.reveal(settings.secrets.github_token) or environ.get("GITHUB_TOKEN") or None
    base_url = settings.github.api_url or environ.get("GITHUB_API_URL") or DEFAULT_API_URL
    return GitHubClient(base_url=base_url, token=token)


def build_github(
    settings: Settings,
    agents: AgentRegistry,
    *,
    client: GitHubClient | None = None,
    bindings: ThreadBindings | None = None,
    env: Mapping[str, str] | None = None,
) -> GitHubSetup:
    """The coding agent gets its read-only tools, `review` its runner, every channel its default repo."""
    client = client or github_client_from_settings(settings, env)
    channel_repos = {channel: options.repo for channel, options in settings.channels.items() if options.repo}
    resolver = RepoResolver(
        client,
        bindings if bindings is not None else ThreadBindings.in_data_dir(settings.data_dir),
        channel_repos=channel_repos,
    )
    wired = agents.with_tools(CODING_AGENT, toolset=github_toolset(client))
    return GitHubSetup(
        client=client,
        resolver=resolver,
        agents=wired,
        agent_runners={REVIEW_AGENT: review_runner(client)},
        resolve_for_unbound=settings.memory.enabled,
    )
