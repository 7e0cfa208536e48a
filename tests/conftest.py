"""Fixtures of the local fakes (model servers, Slack Web API, GitHub API) live in tests/fakes/.

Hypothesis runs without its per-example deadline: a busy 2-core CI machine makes wall-clock deadlines
flaky, and speed is measured in bench/, never in tests.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("switchboard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("switchboard")

pytest_plugins = [
    "tests.fakes.model_server",
    "tests.fakes.slack_api",
    "tests.fakes.github_api",
    "tests.ops.tracing_support",
]
