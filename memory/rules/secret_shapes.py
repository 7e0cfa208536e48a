"""Tokens recognizable by themselves: the shapes vendors document, matched case-insensitively where
they can be typed either way, bounded so a word that merely contains one is left alone."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memory.rules.token_shape import REDACTED, keyed_value, secretlike

# PEM / OpenSSH / PGP private key blocks, whole, across lines. A header that ends its line (or a
# JSON-escaped `\n`) starts a block, redacted to its END line or, unterminated, to the end; a header
# inside a sentence only with an END marker after it, so prose naming the header is left alone.
_PEM_BEGIN = r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_OPEN = _PEM_BEGIN + r"(?=[ \t]*(?:\n|\\r\\n|\\n)|[ \t]+[A-Za-z0-9+/=]{16}).*?(?:" + _PEM_END + r"|\Z)"
_PEM = re.compile(f"{_PEM_OPEN}|{_PEM_BEGIN}.*?{_PEM_END}", re.DOTALL)
# After the last END marker only an open block can match: searched without the END alternative,
# which would otherwise scan to the end of the text from every header (quadratic).
_PEM_AFTER_LAST_END = re.compile(_PEM_OPEN, re.DOTALL)
_PEM_END_MARKER = re.compile(_PEM_END)


def _redact_pem(text: str) -> str:
    if "-----BEGIN" not in text:
        return text
    cut = max((end.end() for end in _PEM_END_MARKER.finditer(text)), default=0)
    return _PEM.sub(REDACTED, text[:cut]) + _PEM_AFTER_LAST_END.sub(REDACTED, text[cut:])


@dataclass(frozen=True, slots=True)
class _Shape:
    """One token shape. It is only searched for when one of its `triggers` (lowercase) is in the text:
    a case-insensitive scan costs far more than a substring test. Without triggers it always runs
    (case-sensitive literal prefixes are searched fast). `bounded` shapes only start where no ASCII
    letter or digit precedes them (CJK text, `_` of Slack italics do not protect a token); a `keep`
    group stays in front of the marker (a URL's scheme, a header's
    name); `check` vets the `value` group."""

    pattern: re.Pattern[str]
    triggers: tuple[str, ...] = ()
    bounded: bool = True
    keep: bool = False
    suffix: str = ""
    check: Callable[[str], bool] | None = None

    def replace(self, match: re.Match[str]) -> str:
        start = match.start()
        if self.bounded and start > 0 and _is_word(match.string[start - 1]):
            return match.group(0)
        if self.check is not None and not self.check(match.group("value")):
            return match.group(0)
        return (match.group("keep") if self.keep else "") + REDACTED + self.suffix


def _is_word(char: str) -> bool:
    return char.isascii() and char.isalnum()


def _mixed_hex(value: str) -> bool:
    return sum(c.isdigit() for c in value) >= 4 and sum(c.isalpha() for c in value) >= 4


def _header_value(value: str) -> bool:
    return secretlike(value) or len(value) >= 16


def _shape(pattern: str, *triggers: str, **options: Any) -> _Shape:
    return _Shape(re.compile(pattern), triggers, **options)


# In order (after the PEM blocks, before anything inside them is looked at): Anthropic before OpenAI.
_SHAPES: tuple[_Shape, ...] = (
    # Slack webhooks (incoming, workflow, trigger), any case, with or without the scheme, `/` or
    # JSON's `\/`: keep the host.
    _shape(
        r"(?i)(?P<keep>(?:https?:(?://|\\/\\/))?hooks\.slack\.com(?:/|\\/))(?:services|workflows|triggers)"
        r"(?:[A-Za-z0-9/_-]|\\/){8,}",
        "hooks.slack.com",
        bounded=False,
        keep=True,
    ),
    # Slack tokens, any case: xoxb- xoxp- xoxa- xoxr- xoxs- xoxe- xoxe.xoxp-, app-level xapp-.
    _shape(r"(?i)(?:xox[a-z](?:\.xox[a-z])?|xapp)-[A-Za-z0-9-]{8,}", "xox", "xapp-"),
    # Anthropic, then OpenAI project / service-account / admin / legacy keys.
    _shape(r"(?i)sk-ant-[A-Za-z0-9_-]{16,}", "sk-ant-", bounded=False),
    _shape(
        r"(?i)sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}",
        "sk-proj-",
        "sk-svcacct-",
        "sk-admin-",
        bounded=False,
    ),
    _shape(r"(?i)sk-[A-Za-z0-9_-]{20,}", "sk-"),
    # GitHub: classic (ghp_ gho_ ghu_ ghs_ ghr_), fine-grained github_pat_ (the retired `v1.<hex>`
    # installation tokens look like version tags; they are caught by name only).
    _shape(r"(?i)gh[pousr]_[A-Za-z0-9]{20,}", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _shape(r"(?i)github_pat_[A-Za-z0-9_]{20,}", "github_pat_"),
    # AWS access key ids.
    _shape(r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    # Google API keys.
    _shape(r"(?i)aiza[0-9A-Za-z_-]{30,}", "aiza"),
    # Stripe secret, restricted and webhook-signing keys (publishable pk_ keys are public).
    _shape(r"(?i)[sr]k_(?:live|test)_[0-9A-Za-z]{10,}", "k_live_", "k_test_"),
    _shape(r"whsec_[0-9A-Za-z]{20,}"),
    # npm, PyPI.
    _shape(r"(?i)npm_[A-Za-z0-9]{30,}", "npm_"),
    _shape(r"(?i)pypi-[A-Za-z0-9_-]{40,}", "pypi-"),
    # Twilio API key and account SIDs: lower-case hex with letters and digits both (not a SKU).
    _shape(r"(?P<value>(?:SK|AC)[0-9a-f]{32})(?![A-Za-z0-9])", check=lambda value: _mixed_hex(value[2:])),
    # Mailchimp API keys: 32 lower-case hex and the data center (`-us21`).
    _shape(r"(?P<value>[0-9a-f]{32})-us[0-9]{1,2}(?![A-Za-z0-9])", "-us", check=_mixed_hex),
    # Braintree access tokens: environment, merchant id, then 32 hex (hex alone is no random run).
    _shape(r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}", "access_token$"),
    # SendGrid.
    _shape(r"(?i)sg\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", "sg."),
    # JWTs (signed or not).
    _shape(r"(?i)eyj[A-Za-z0-9_-]{8,}\.eyj[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", "eyj"),
    # scheme://user:password@host (or JSON's `:\/\/`) → keep scheme and host (the last @ of the
    # authority ends it); without a scheme, user:password@ before a dotted host or a port.
    _shape(
        r"(?<=[A-Za-z0-9+.-])(?P<keep>:(?://|\\/\\/))[^\s/?#@:\\]*:[^\s/?#\\]*@",
        "://",
        ":\\/\\/",
        bounded=False,
        keep=True,
        suffix="@",
    ),
    _shape(
        r"(?<![A-Za-z0-9_.:/@\\-])(?!mailto:)[A-Za-z0-9_.-]{1,64}:[^\s/?#:\\\"'`]{4,}@"
        r"(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+:[0-9])",
        "@",
        bounded=False,
        suffix="@",
    ),
    # Discord webhooks: keep the host and the webhook id's path, the token goes.
    _shape(
        r"(?i)(?P<keep>discord(?:app)?\.com/api/(?:v[0-9]+/)?webhooks/[0-9]{5,}/)[A-Za-z0-9_-]{20,}",
        "discord",
        bounded=False,
        keep=True,
    ),
    # Zapier's catch hooks (whoever has the URL starts the Zap): keep the host and the account's id.
    _shape(
        r"(?i)(?P<keep>hooks\.zapier\.com/hooks/(?:catch|standard)/[0-9]{3,}/)[A-Za-z0-9]{4,}",
        "hooks.zapier.com",
        bounded=False,
        keep=True,
    ),
    # A URL whose user is a random key and has no password (a Sentry DSN): keep scheme and host.
    _shape(
        r"(?P<keep>://)(?P<value>[A-Za-z0-9_-]{16,})@",
        "://",
        bounded=False,
        keep=True,
        suffix="@",
        check=keyed_value,
    ),
    # Authorization headers, whatever the scheme word (Bearer, Basic, Splunk, SSWS …); the value must
    # look like a credential.
    _shape(
        r"(?i)(?P<keep>authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?:[A-Za-z][A-Za-z0-9_-]{1,24}[ \t]+(?=[A-Za-z0-9._~+/=-]{6,}))?)(?P<value>[A-Za-z0-9._~+/=-]{6,})",
        "authorization",
        keep=True,
        check=_header_value,
    ),
    _shape(r"(?i)(?P<keep>bearer[ \t]+)[A-Za-z0-9._~+/-]{16,}=*", "bearer", keep=True),
)


def redact_shapes(text: str) -> str:
    """Every named shape in `text` → the marker (a shape with triggers only where one is in the text)."""
    text = _redact_pem(text)
    lowered = text.lower()
    for shape in _SHAPES:
        if not shape.triggers or any(trigger in lowered for trigger in shape.triggers):
            text = shape.pattern.sub(shape.replace, text)
    return text
