"""Fixtures of the local fakes (model servers, Slack Web API, GitHub API) live in tests/fakes/."""

pytest_plugins = [
    "tests.fakes.model_server",
    "tests.fakes.slack_api",
    "tests.fakes.github_api",
    "tests.ops.tracing_support",
]
