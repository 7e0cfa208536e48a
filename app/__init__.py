"""The bot: the core every surface shares, and one package per edge.

Here at the top: the dispatcher (`dispatch`), `IncomingMessage` (`incoming`), the `Surface` protocol,
policy, the reflection hook, runtime assembly, lifecycle, logging and the CLI entry point.
Packages: `agent` (agents, the agent loop, tools, model providers), `github` (the GitHub binding),
`slack` and `terminal` (the two surfaces).

Imports run one way: surfaces → core → `agent` / `github` → `commands`, `memory`, `config`. `agent` and
`github` never import a surface, and no surface imports another (pyproject's import-linter contracts).
"""
