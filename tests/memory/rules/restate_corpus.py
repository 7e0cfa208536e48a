"""Pairs of engineering facts for telling a restatement from a near miss (memory/rules/restate.py).

`NEAR_MISSES`: two facts worded almost alike that say different things (another command, another day,
a negation, a number, swapped roles) — a restatement check must never match them. `RESTATEMENTS`: the
same fact reworded — what a similarity threshold would have to catch. Written from the phrasing of
real engineering notes (runbooks, READMEs, on-call handbooks), not from any detector's output.
"""

from __future__ import annotations

NEAR_MISSES: tuple[tuple[str, str], ...] = (
    ("Deploys go through make ship", "Releases go through make ship"),
    ("Deploys go through make ship", "Deploys go through make test"),
    ("Deploys go through make ship", "Deploys do not go through make ship"),
    ("Deploys go through make ship", "Rollbacks go through make ship"),
    ("the api deploys with make ship", "the web app deploys with make ship"),
    ("staging deploys run on fridays", "production deploys run on fridays"),
    ("staging deploys run on fridays", "staging deploys never run on fridays"),
    ("staging deploys run on fridays", "staging deploys run on mondays"),
    ("the payments service uses postgres 15", "the payments service uses postgres 14"),
    ("the payments service uses postgres", "the billing service uses postgres"),
    ("CI runs pytest with -x", "CI runs pytest without -x"),
    ("the default branch is main", "the default branch is master"),
    ("tests must pass before merging", "tests need not pass before merging"),
    ("the on-call rotation changes every monday", "the on-call rotation changes every tuesday"),
    ("this user prefers tabs over spaces", "this user prefers spaces over tabs"),
    ("this user prefers dark mode", "this user prefers light mode"),
    ("this user is interviewing at another company", "this user is hiring at another company"),
    (
        "this user is interviewing at another company",
        "this user's manager is interviewing at another company",
    ),
    ("the cache TTL is 60 seconds", "the cache TTL is 600 seconds"),
    ("the cache TTL is 60 seconds", "the session TTL is 60 seconds"),
    ("use ruff for linting", "use ruff for formatting"),
    ("use ruff for linting", "use pylint for linting"),
    ("the frontend is built with vite", "the frontend is built with webpack"),
    ("secrets live in vault", "secrets live in the repo"),
    (
        "the api is rate limited to 100 requests per minute",
        "the api is rate limited to 1000 requests per minute",
    ),
    ("migrations run before the deploy", "migrations run after the deploy"),
    ("the release captain approves deploys", "the release captain approves hotfixes"),
    ("feature flags are managed in launchdarkly", "feature flags are removed after launch"),
    ("logs are shipped to datadog", "metrics are shipped to datadog"),
    ("logs are shipped to datadog", "logs are shipped to splunk"),
    ("the docker image is built on every push", "the docker image is built on every tag"),
    ("the team uses squash merges", "the team never uses squash merges"),
    ("the kubernetes cluster runs in us-east-1", "the kubernetes cluster runs in eu-west-1"),
    ("error budgets reset monthly", "error budgets reset quarterly"),
    ("code review needs two approvals", "code review needs one approval"),
    ("the mobile app ships every two weeks", "the mobile app ships every week"),
    ("the python version is 3.11", "the python version is 3.12"),
    ("the repo uses poetry for dependencies", "the repo uses pip for dependencies"),
    ("backups are taken nightly", "backups are restored nightly"),
    ("the search index is rebuilt on deploy", "the search index is not rebuilt on deploy"),
    ("alerts page the on-call engineer", "alerts email the on-call engineer"),
    ("this channel is for incident reports", "this channel is for deploy announcements"),
)
RESTATEMENTS: tuple[tuple[str, str], ...] = (
    ("Deploys go through make ship", "Deployments go through make ship"),
    ("Deploys go through make ship", "deploys go via make ship"),
    ("this user is interviewing at another company", "this user is interviewing with another company"),
    ("this user prefers tabs over spaces", "this user likes tabs over spaces"),
    ("staging deploys run on fridays", "staging deploys happen on fridays"),
    ("the default branch is main", "the default git branch is main"),
    ("tests must pass before merging", "tests have to pass before merging"),
    ("use ruff for linting", "ruff is used for linting"),
    ("logs are shipped to datadog", "logs get shipped to datadog"),
    ("code review needs two approvals", "code reviews need two approvals"),
    ("the cache TTL is 60 seconds", "the cache ttl is sixty seconds"),
    ("backups are taken nightly", "backups are taken every night"),
)
