"""Secrets never leave the process through memory: not to the extractor, not into a record."""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM private key blocks, whole.
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        REDACTED,
    ),
    # Authorization: Bearer <value> (keep the header name so the text stays readable).
    (re.compile(r"(?i)(authorization\s*[:=]\s*[\"']?bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/-]{16,}=*"), r"\1" + REDACTED),
    # scheme://user:password@host → keep scheme and host.
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^\s:/@]+:[^\s@/]+@"), r"\1" + REDACTED + "@"),
    # Slack tokens: xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxe-, and app-level xapp-.
    (re.compile(r"\bxox[a-z]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bxapp-[A-Za-z0-9-]{10,}"), REDACTED),
    # Anthropic before OpenAI: both start with sk-.
    (re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), REDACTED),
    # GitHub tokens.
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), REDACTED),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}"), REDACTED),
    # AWS access key ids.
    (re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"), REDACTED),
)


def redact_secrets(text: str) -> str:
    """Replace every recognizable credential in `text` with [REDACTED]."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
