"""The agents: `general` (no tools), `coding` and `review` (repo-bound), and how a message picks one.

Selection: a leading agent word (`review …`, `code …`) wins; otherwise a thread that a sticky agent
started stays with it; otherwise the channel's configured default; otherwise `general`. Each agent's
model ref comes from the settings (`agents.<name>.model`, else the top-level `model`) — never from code.
Tools are pluggable: the GitHub tools join `coding`/`review` through `AgentRegistry.with_tools`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from app.agent.runner import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS
from app.agent.tools import Tool, ToolContext, Toolset
from app.incoming import IncomingMessage
from config.settings import ConfigError, Settings, check_model_ref

DEFAULT_AGENT = "general"

GENERAL_INSTRUCTIONS = """\
You are Switchboard, a helpful assistant for an engineering organization, answering in a chat thread.
Answer directly and concisely; use Markdown where it helps (lists, code blocks). Say so plainly when you \
do not know something or cannot check it, rather than guessing. Earlier messages of the thread are the \
conversation so far."""

CODING_INSTRUCTIONS = """\
You are Switchboard's coding agent, working on one GitHub repository (named in your context when it is \
bound). Use your tools to read the repository's code, issues, pull requests and history before answering; \
cite file paths (and line numbers where you have them) for every claim about the code. Your tools are \
read-only: propose changes as diffs or code blocks in the reply. If the repository or a file cannot be \
read, say so rather than guessing."""

REVIEW_INSTRUCTIONS = """\
You are Switchboard's review agent. You review one pull request: read its description, files and diff, \
then write a review that leads with the most important problems (correctness, security, data loss, \
missing tests), then smaller suggestions, each tied to a file and line. Be specific and brief; do not \
restate the diff. If the diff is truncated, say which parts you could not see."""


@dataclass(frozen=True, slots=True)
class Agent:
    name: str
    instructions: str
    model_ref: str | None
    repo_bound: bool = False
    words: tuple[str, ...] = ()
    sticky: bool = False
    tools: tuple[Tool, ...] = ()
    toolset: Toolset | None = None
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = DEFAULT_MAX_TOKENS

    def tools_for(self, context: ToolContext) -> tuple[Tool, ...]:
        """The static tools plus whatever the per-run toolset builds for this run."""
        extra = tuple(self.toolset(context)) if self.toolset is not None else ()
        return self.tools + extra


@dataclass(frozen=True, slots=True)
class Selection:
    agent: Agent
    text: str  # the request with the agent word removed
    by: Literal["word", "thread", "channel", "default"]


BUILTIN_AGENTS: tuple[Agent, ...] = (
    Agent(name="general", instructions=GENERAL_INSTRUCTIONS, model_ref=None),
    Agent(
        name="coding",
        instructions=CODING_INSTRUCTIONS,
        model_ref=None,
        repo_bound=True,
        words=("code", "coding"),
        sticky=True,
    ),
    Agent(
        name="review",
        instructions=REVIEW_INSTRUCTIONS,
        model_ref=None,
        repo_bound=True,
        words=("review",),
    ),
)


class AgentRegistry:
    def __init__(
        self,
        agents: Iterable[Agent],
        *,
        channel_defaults: Mapping[str, str] | None = None,
        default: str = DEFAULT_AGENT,
    ) -> None:
        self._agents = {agent.name: agent for agent in agents}
        self._channel_defaults = dict(channel_defaults or {})
        if default not in self._agents:
            raise ValueError(f"default agent {default!r} is not registered")
        self._default = default
        self._words = {word: agent.name for agent in self._agents.values() for word in agent.words}

    def names(self) -> list[str]:
        return sorted(self._agents)

    def get(self, name: str) -> Agent:
        return self._agents[name]

    def __iter__(self) -> Iterator[Agent]:
        return iter(self._agents.values())

    @property
    def default(self) -> Agent:
        return self._agents[self._default]

    def select(self, message: IncomingMessage) -> Selection:
        word, rest = _leading_word(message.text)
        if word in self._words:
            return Selection(self._agents[self._words[word]], rest or message.text.strip(), "word")
        thread_agent = self._thread_agent(message)
        if thread_agent is not None:
            return Selection(thread_agent, message.text, "thread")
        channel_default = self._channel_defaults.get(message.channel_id or "")
        if channel_default is not None and channel_default in self._agents:
            return Selection(self._agents[channel_default], message.text, "channel")
        return Selection(self.default, message.text, "default")

    def with_tools(
        self, name: str, tools: Sequence[Tool] = (), toolset: Toolset | None = None
    ) -> AgentRegistry:
        """A registry where agent `name` also has these tools (and this per-run toolset)."""
        agent = self._agents[name]
        updated = replace(agent, tools=agent.tools + tuple(tools), toolset=toolset or agent.toolset)
        return self.replace(updated)

    def replace(self, agent: Agent) -> AgentRegistry:
        agents = {**self._agents, agent.name: agent}
        return AgentRegistry(agents.values(), channel_defaults=self._channel_defaults, default=self._default)

    def _thread_agent(self, message: IncomingMessage) -> Agent | None:
        first = next((turn for turn in message.history if turn.role == "user"), None)
        if first is None:
            return None
        word, _ = _leading_word(first.text)
        name = self._words.get(word)
        agent = self._agents.get(name) if name else None
        return agent if agent is not None and agent.sticky else None


def build_agents(settings: Settings, agents: Sequence[Agent] = BUILTIN_AGENTS) -> AgentRegistry:
    """The built-in agents with their model refs and instruction overrides from the settings."""
    known = {agent.name for agent in agents}
    for name in settings.agents:
        if name not in known:
            raise ConfigError(
                f"config error: agents.{name} is not an agent (known: {', '.join(sorted(known))})"
            )
    for channel, options in settings.channels.items():
        if options.agent is not None and options.agent not in known:
            raise ConfigError(
                f"config error: channels.{channel}.agent = {options.agent!r} is not an agent "
                f"(known: {', '.join(sorted(known))})"
            )
    built = []
    for agent in agents:
        ref = settings.agent_model_ref(agent.name)
        if ref is not None:
            _check_provider(settings, agent.name, ref)
        override = settings.agents.get(agent.name)
        instructions = override.instructions if override is not None and override.instructions else None
        built.append(replace(agent, model_ref=ref, instructions=instructions or agent.instructions))
    defaults = {channel: o.agent for channel, o in settings.channels.items() if o.agent is not None}
    return AgentRegistry(built, channel_defaults=defaults)


def missing_model_message(agent: Agent) -> str:
    return (
        f'no model is configured for the {agent.name} agent: set model = "<provider>/<model>" '
        f"(or agents.{agent.name}.model) in switchboard.toml, or SWITCHBOARD_MODEL"
    )


def _check_provider(settings: Settings, agent: str, ref: str) -> None:
    check_model_ref(ref)
    provider = ref.split("/", 1)[0]
    if provider not in settings.models:
        key = (
            f"agents.{agent}.model"
            if settings.agents.get(agent) and settings.agents[agent].model
            else "model"
        )
        raise ConfigError(
            f"config error: {key} = {ref!r}: unknown provider {provider!r} "
            f"(configured: {', '.join(sorted(settings.models))}; add a [models.{provider}] section)"
        )


def _leading_word(text: str) -> tuple[str, str]:
    stripped = text.lstrip()
    head, _, rest = stripped.partition(" ")
    if "\n" in head:
        head, _, tail = head.partition("\n")
        rest = tail + (" " + rest if rest else "")
    return head.rstrip(":,").lower(), rest.strip()
