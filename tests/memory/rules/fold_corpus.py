"""Pairs for choosing the embedder fold threshold (bench/bench_fold.py, memory/rules/fold.py).

Every statement is a paraphrase of one found in public engineering documents — CONTRIBUTING guides,
RELEASING notes, changelogs, deployment and rollback runbooks, on-call handbooks, backup plans and
`.env` set-up pages — cut down to the one-line fact a memory would keep. `FOLD_RESTATEMENTS` says each
fact again the way a colleague would: other words, other order, other punctuation or casing (a few
differ only in formatting, which `meaning_key` already folds). `FOLD_NEAR_MISSES` changes what the
fact says while keeping its words: another tool, service, environment, owner, number, version, date,
direction or a negation — a fold must never join them. Each list holds at least 60 pairs.
"""

from __future__ import annotations

Pair = tuple[str, str]

# One fact told three times in different styling (the README's example of a restatement).
RESTYLED_TRIPLE: tuple[str, str, str] = (
    "Deploys go through make ship",
    "**Deploys** go through `make ship`!",
    "deploys go through make ship.",
)

FOLD_RESTATEMENTS: tuple[Pair, ...] = (
    # formatting only: meaning_key folds these already
    (
        "Deploys go through make ship from the main branch.",
        "**deploys go through `make ship` from the main branch**",
    ),
    ("Pushing a tag triggers the PyPI release in CI.", "**pushing a tag triggers the PyPI release in CI**"),
    ("The changelog is kept in CHANGES.rst.", "the changelog is kept in `CHANGES.rst`"),
    ("All incidents are tracked in JIRA.", "all incidents are tracked in Jira!"),
    ("Do not commit .env; it is in .gitignore.", "Do not commit .env — it is in .gitignore"),
    ("Hand off open incidents at the rotation change.", "> HAND OFF OPEN INCIDENTS AT THE ROTATION CHANGE"),
    # reworded
    ("Deploys go through make ship from the main branch.", "We deploy with `make ship` from main"),
    ("The on-call rotation is managed in PagerDuty.", "PagerDuty manages the on-call rotation"),
    ("All alerts are sent to the #alerts channel in Slack.", "Every alert goes to the #alerts Slack channel"),
    ("All incidents are tracked in JIRA.", "Incidents get tracked in Jira"),
    ("Acknowledge a page within 5 minutes.", "Pages must be acknowledged within five minutes"),
    (
        "If the primary does not acknowledge within 15 minutes, the page escalates to the secondary.",
        "Unacknowledged pages escalate to the secondary on-call after 15 minutes",
    ),
    (
        "Primary on-call rotates weekly, handing off on Mondays at 10:00 UTC.",
        "The primary on-call handoff is weekly, Monday 10:00 UTC",
    ),
    ("Open pull requests against main.", "Pull requests should target the main branch"),
    (
        "Rebase your branch instead of merging main into it.",
        "Use git rebase rather than git merge to pull in changes from main",
    ),
    ("Every commit on main must have all tests passing.", "All tests must pass on every commit to main"),
    (
        "A pull request needs approval from at least one reviewer before it is merged.",
        "Merging a PR requires at least one reviewer's approval",
    ),
    (
        "Format Rust code with cargo fmt before opening a PR.",
        "Run cargo fmt on your changes before you open a pull request",
    ),
    (
        "Pull requests should have no more than two commits; squash the rest.",
        "Squash your PR down to at most two commits",
    ),
    ("Run yarn lint to check the coding style.", "The style linter runs with `yarn lint`"),
    (
        "Bump the version in pyproject.toml and update the changelog before tagging.",
        "Before tagging a release, update the changelog and bump the version in pyproject.toml",
    ),
    ("Pushing a tag triggers the PyPI release in CI.", "CI publishes to PyPI when a tag is pushed"),
    ("The changelog is kept in CHANGES.rst.", "CHANGES.rst holds the changelog"),
    ("Update the changelog in a separate commit.", "Changelog updates go in their own commit"),
    (
        "The version is set from git tags with setuptools_scm.",
        "setuptools_scm takes the version from the git tags",
    ),
    ("Upload the build to PyPI with twine upload dist/*.", "twine upload dist/* publishes the build to PyPI"),
    ("Do not commit .env; it is in .gitignore.", ".env is gitignored and must never be committed"),
    (
        "Copy .env.example to .env before starting the services.",
        "Before starting services, create .env from .env.example",
    ),
    (
        "Docker Compose reads variables from .env automatically.",
        "Variables in .env are picked up by docker compose automatically",
    ),
    ("In CI, secrets are set in the pipeline provider.", "CI gets its secrets from the pipeline provider"),
    (
        "Take a database backup before every batch of migrations.",
        "Back up the database before running each batch of migrations",
    ),
    (
        "Test a restore on staging before applying it to production.",
        "Restores are tried on the staging environment before production",
    ),
    (
        "Keep deployment backups for at least 30 days.",
        "Backups from deployments are retained for a minimum of thirty days",
    ),
    (
        "Never edit an applied migration; create a new one.",
        "Applied migrations are never edited, write a new migration instead",
    ),
    (
        "Alembic upgrade runs during the deploy; downgrade only in emergencies.",
        "Deploys run alembic upgrade, and downgrades are for emergencies only",
    ),
    (
        "The application runs alembic upgrade head on startup.",
        "On start-up the app upgrades the schema to alembic head",
    ),
    (
        "Production uses PostgreSQL, with credentials in .env.",
        "The production database is PostgreSQL and its credentials live in .env",
    ),
    (
        "Roll back to the previous stable version when 5xx errors and p95 latency spike after a deploy.",
        "When a deploy makes 5xx and p95 latency spike, roll back to the last stable version",
    ),
    (
        "Automatic rollback triggers when the error rate stays above 5% for 2 minutes.",
        "If errors stay over 5% for two minutes the system rolls back automatically",
    ),
    (
        "Staging deploys are triggered with gh workflow run deploy.yml.",
        "Trigger a staging deployment by running the deploy.yml workflow with gh",
    ),
    (
        "Production deploys need manual approval.",
        "A manual approval is required before deploying to production",
    ),
    (
        "Run the smoke tests against staging after each deploy.",
        "After every deploy, smoke tests run on staging",
    ),
    ("Dropped support for Python 3.8.", "Python 3.8 is no longer supported"),
    ("The minimum supported Python version is now 3.9.", "Python 3.9 is the oldest supported version"),
    ("We use ruff instead of flake8 for linting.", "Linting is done with ruff, not flake8"),
    ("CI moved from CircleCI to GitHub Actions.", "We migrated CI off CircleCI onto GitHub Actions"),
    ("Tests run automatically on every pull request.", "Every PR gets its tests run automatically"),
    ("New features must come with test cases.", "Add tests for any new feature you implement"),
    ("Run the tests locally with run_tests.sh.", "To run the test suite locally, use run_tests.sh"),
    ("Binaries are not allowed in the commit history.", "No binary files may be committed"),
    (
        "Commit messages should explain why a change was made, not only what changed.",
        "Write commit messages that say why you changed something as well as what",
    ),
    (
        "SEV-1 incidents page the incident commander and notify leadership.",
        "For a SEV-1, page the incident commander and let leadership know",
    ),
    (
        "Post updates every 15 minutes during SEV-1 and SEV-2 incidents.",
        "During a SEV-1 or SEV-2, send an update every fifteen minutes",
    ),
    ("Write a postmortem for every P1 and P2 incident.", "P1 and P2 incidents each get a postmortem"),
    (
        "Real-time incident coordination happens in #incidents.",
        "Coordinate incidents live in the #incidents Slack channel",
    ),
    (
        "Customers get outage updates from the status page.",
        "The public status page is where customers see outage updates",
    ),
    (
        "Severity 2 alerts are acknowledged in Slack and investigated within an hour.",
        "Sev 2: acknowledge in Slack, investigate within 1 hour",
    ),
    (
        "The on-call rotation needs at least six engineers.",
        "At least 6 engineers are required for the on-call rotation",
    ),
    (
        "Configure feature flags before a production deploy.",
        "Feature flags are set up ahead of deploying to production",
    ),
    ("Database migrations must be backward compatible.", "Every migration has to stay backwards-compatible"),
    (
        "A production deploy needs a database backup less than an hour old.",
        "Back up the database within the hour before deploying to production",
    ),
    ("Run make release once the tag is pushed.", "After pushing the tag, publish with make release"),
    ("Clean the dist folder before building a release.", "Remove dist/ before you build the release"),
    (
        "Work happens on the development branch and is merged into main later.",
        "Changes go to the development branch first and reach main afterwards",
    ),
    ("Don't work directly on the main branch.", "Never commit straight to main"),
    (
        "Run pnpm run lint before opening a PR or the pipeline fails.",
        "Lint with pnpm run lint before a PR, otherwise the CI checks fail",
    ),
    (
        "Set git config pull.rebase true so that pulls rebase.",
        "Configure pull.rebase=true to make git pull rebase",
    ),
    ("The contact list lives in the ops runbook index.", "The ops runbook index holds the contact list"),
    (
        "Hand off open incidents at the rotation change.",
        "Open incidents are handed over when the rotation changes",
    ),
    (
        "In CHANGELOG.md, rename Unreleased to the new version with today's date.",
        "The Unreleased section of CHANGELOG.md becomes the new version, dated today",
    ),
    ("Every contribution requires accepting the CLA.", "Contributors must agree to the CLA"),
    ("Main must always pass cargo fmt and the tests.", "main has to stay green on the tests and cargo fmt"),
    ("Ship one feature per pull request.", "Each pull request should contain a single feature"),
    (
        "Creating a GitHub release triggers the PyPI publish.",
        "PyPI publishing starts automatically when a GitHub release is created",
    ),
)

FOLD_NEAR_MISSES: tuple[Pair, ...] = (
    # another tool, service, place or owner
    ("The on-call rotation is managed in PagerDuty.", "The on-call rotation is managed in Opsgenie."),
    (
        "All alerts are sent to the #alerts channel in Slack.",
        "All alerts are sent to the #incidents channel in Slack.",
    ),
    ("Open pull requests against main.", "Open pull requests against develop."),
    (
        "Format Rust code with cargo fmt before opening a PR.",
        "Lint Rust code with cargo clippy before opening a PR.",
    ),
    ("Bump the version in pyproject.toml before tagging.", "Bump the version in setup.py before tagging."),
    ("Pushing a tag triggers the PyPI release in CI.", "Pushing a tag triggers the npm release in CI."),
    ("Pushing a tag triggers the PyPI release in CI.", "Pushing to main triggers the PyPI release in CI."),
    ("The changelog is kept in CHANGES.rst.", "The changelog is kept in CHANGELOG.md."),
    (
        "Copy .env.example to .env before starting the services.",
        "Copy .env.example to .env.production before starting the services.",
    ),
    ("Production uses PostgreSQL.", "Production uses MySQL."),
    ("Development uses SQLite.", "Production uses SQLite."),
    ("Production deploys need manual approval.", "Staging deploys need manual approval."),
    ("Tests run automatically on every pull request.", "Tests run automatically on every release."),
    (
        "The status page is updated by the incident commander.",
        "The status page is updated by the support team.",
    ),
    ("The api service is owned by the platform team.", "The api service is owned by the payments team."),
    ("The api service is owned by the platform team.", "The web service is owned by the platform team."),
    ("Alice is the release captain this week.", "Bob is the release captain this week."),
    ("Deploy the frontend to us-central1.", "Deploy the frontend to europe-west1."),
    ("Secrets are rotated every 90 days.", "API keys are rotated every 90 days."),
    (
        "Smoke tests run against staging after each deploy.",
        "Load tests run against staging after each deploy.",
    ),
    (
        "Smoke tests run against staging after each deploy.",
        "Smoke tests run against production after each deploy.",
    ),
    ("The latest changes are always in master.", "The latest changes are always in the release branch."),
    ("The JWT secret must be at least 32 characters.", "The encryption key must be at least 32 characters."),
    ("The web app listens on port 3000.", "The admin app listens on port 3000."),
    ("Health checks hit /health.", "Health checks hit /ready."),
    ("The incident channel is #incidents.", "The incident channel is #incident-review."),
    (
        "Deploys go through make ship from the main branch.",
        "Deploys go through make ship from the release branch.",
    ),
    (
        "Deploys go through make ship from the main branch.",
        "Rollbacks go through make ship from the main branch.",
    ),
    ("The mobile team owns the iOS release.", "The mobile team owns the Android release."),
    ("SEV-1 incidents page the incident commander.", "SEV-3 incidents page the incident commander."),
    ("Write a postmortem for every P1 incident.", "Write a postmortem for every P3 incident."),
    # another number, version or date
    ("Acknowledge a page within 5 minutes.", "Acknowledge a page within 15 minutes."),
    (
        "Primary on-call hands off on Mondays at 10:00 UTC.",
        "Primary on-call hands off on Fridays at 10:00 UTC.",
    ),
    (
        "Primary on-call hands off on Mondays at 10:00 UTC.",
        "Primary on-call hands off on Mondays at 16:00 UTC.",
    ),
    (
        "A pull request needs approval from at least one reviewer.",
        "A pull request needs approval from at least two reviewers.",
    ),
    (
        "Pull requests should have no more than two commits.",
        "Pull requests should have no more than ten commits.",
    ),
    ("Keep deployment backups for at least 30 days.", "Keep deployment backups for at least 90 days."),
    (
        "Automatic rollback triggers when the error rate stays above 5% for 2 minutes.",
        "Automatic rollback triggers when the error rate stays above 1% for 2 minutes.",
    ),
    (
        "Automatic rollback triggers when the error rate stays above 5% for 2 minutes.",
        "Automatic rollback triggers when the error rate stays above 5% for 10 minutes.",
    ),
    ("Dropped support for Python 3.8.", "Dropped support for Python 3.9."),
    (
        "Post updates every 15 minutes during SEV-1 incidents.",
        "Post updates every 60 minutes during SEV-1 incidents.",
    ),
    (
        "The on-call rotation needs at least six engineers.",
        "The on-call rotation needs at least four engineers.",
    ),
    (
        "Release 2.5 was the last version supporting Python 3.6.",
        "Release 2.4 was the last version supporting Python 3.6.",
    ),
    ("Version 1.3.0 was released on 2023-10-05.", "Version 1.3.0 was released on 2023-11-05."),
    (
        "The Cloud Run service scales from 2 to 100 instances.",
        "The Cloud Run service scales from 2 to 10 instances.",
    ),
    ("The deploy requires terraform 1.5 or newer.", "The deploy requires terraform 1.3 or newer."),
    ("Secrets are rotated every 90 days.", "Secrets are rotated every 30 days."),
    ("Releases are cut every Tuesday.", "Releases are cut every other Tuesday."),
    ("The release freeze starts on December 15.", "The release freeze starts on December 20."),
    ("Logs are kept for 14 days.", "Logs are kept for 14 months."),
    ("The web app listens on port 3000.", "The web app listens on port 8080."),
    ("The payment worker retries failed jobs 3 times.", "The payment worker retries failed jobs 5 times."),
    ("Use Node 18 for the frontend.", "Use Node 20 for the frontend."),
    ("Alice is the release captain this week.", "Alice is the release captain next week."),
    ("Staging is reset every night.", "Staging is reset every week."),
    # a negation, the opposite direction or swapped roles
    (
        "Rebase your branch instead of merging main into it.",
        "Merge main into your branch instead of rebasing it.",
    ),
    (
        "Take a database backup before every batch of migrations.",
        "Take a database backup after every batch of migrations.",
    ),
    (
        "Test a restore on staging before applying it to production.",
        "Test a restore on production before applying it to staging.",
    ),
    ("Keep deployment backups for at least 30 days.", "Keep deployment backups for at most 30 days."),
    ("Alembic upgrade runs during the deploy.", "Alembic downgrade runs during the deploy."),
    ("Production deploys need manual approval.", "Production deploys do not need manual approval."),
    ("Dropped support for Python 3.8.", "Added support for Python 3.8."),
    ("The minimum supported Python version is now 3.9.", "The maximum supported Python version is now 3.9."),
    ("We use ruff instead of flake8 for linting.", "We use flake8 instead of ruff for linting."),
    ("CI moved from CircleCI to GitHub Actions.", "CI moved from GitHub Actions to CircleCI."),
    ("Binaries are not allowed in the commit history.", "Binaries are allowed in the commit history."),
    (
        "Database migrations must be backward compatible.",
        "Database migrations need not be backward compatible.",
    ),
    ("Merging to main is disabled; rebase instead.", "Rebasing onto main is disabled; merge instead."),
    ("The release freeze starts on December 15.", "The release freeze ends on December 15."),
    ("Run the tests with four GPUs.", "Run the tests without GPUs."),
    ("The JWT secret must be at least 32 characters.", "The JWT secret must be at most 32 characters."),
    (
        "If the primary does not acknowledge within 15 minutes, the page escalates to the secondary.",
        "If the secondary does not acknowledge within 15 minutes, the page escalates to the manager.",
    ),
    ("Every commit on main must have all tests passing.", "Every commit on main may have failing tests."),
    ("Do not commit .env; it is in .gitignore.", "Commit .env; it is not in .gitignore."),
)
