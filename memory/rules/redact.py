"""Secrets never leave the process through memory: not to the extractor, not into a record, not into
a prompt, a list or a service reply.

Complete by construction: `redact_secrets` first normalizes (`normalize_untrusted`: NFKC, then every
format, control, private-use, unassigned and invisible filler character dropped), and only then
matches. Nothing downstream strips a character redaction did not see, so a token split by a
zero-width space or a bidi mark, or spelled in full-width letters, is matched whole. Every later
cleaning step (the prompt sanitizer in memory/scorer.py, `memory list`) goes through this module.

Engine: our own patterns, not Yelp's `detect-secrets` (1.5.0), which was evaluated first on this
module's corpora (tests/memory/redact_corpus.py; `bench/bench_redact.py --detect-secrets`, figures in
BENCHMARKS.md). Its ad-hoc `scan_line` with the default plugins flags 266 of the 269 benign sentences
(on one line it reports every word as a "high entropy string"); without its two entropy plugins it
detects only 33 of the 78 secret forms (it misses OpenAI, Anthropic, Google, PyPI, fine-grained GitHub,
Slack app and refresh tokens, env/YAML/prose passwords, anything split by invisible characters). It reports
a plugin's first capture group and no offsets (for a GitHub token: `gho`), so it cannot drive a
replacement at all; it is 50-100x slower per line, and it keeps mutable global settings, which a pure
module cannot have. Its plugin list served as a checklist of shapes instead.

Pure and fast: no I/O, no state; a record takes ~15 µs, a 24,000-character transcript full of
credential-like text ~5-8 ms.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from memory.types import MemoryCandidate, MemoryRecord

REDACTED = "[REDACTED]"

# ---------------------------------------------------------------------------------------------------
# Normalization: one pass, before any matching

_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
# Characters that draw nothing yet are letters or marks, so a category test misses them: Hangul
# fillers, the combining grapheme joiner, Khmer inherent vowels, Mongolian variation selectors, the
# braille blank, the musical null notehead.
_INVISIBLE = "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2800\u3164\uffa0\U0001d159"
_LINE_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# Joiners and selectors are decided by their neighbours (see `_joiner_run`), not dropped outright.
_JOINER_RUN = re.compile("[\u200d\ufe00-\ufe0f\U000e0100-\U000e01ef]+")
# A run of non-ASCII characters between two ASCII letters or digits: dropped when all are marks.
_BETWEEN_ASCII = re.compile(r"(?<=[A-Za-z0-9])[^\x00-\x7f]+(?=[A-Za-z0-9])")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _bmp_dropped() -> re.Pattern[str]:
    """One character class of every dropped character below U+10000 (built once, at import)."""
    keep = "\n\t\u200d" + "".join(map(chr, range(0xFE00, 0xFE10)))
    dropped = [
        cp
        for cp in range(0x10000)
        if (chr(cp) in _INVISIBLE or unicodedata.category(chr(cp)) in _DROPPED_CATEGORIES)
        and chr(cp) not in keep
    ]
    ranges: list[str] = []
    first = last = dropped[0]
    for cp in [*dropped[1:], -1]:
        if cp == last + 1:
            last = cp
            continue
        ranges.append(
            re.escape(chr(first)) if first == last else f"{re.escape(chr(first))}-{re.escape(chr(last))}"
        )
        first = last = cp
    return re.compile("[" + "".join(ranges) + "]")


_BMP_DROPPED = _bmp_dropped()


def normalize_untrusted(text: str) -> str:
    """NFKC, line breaks as `\\n`, and nothing invisible left: every Cc (but `\\n`, `\\t`), Cf, Cs, Co and
    Cn character and the invisible fillers are dropped, and so are nonspacing marks (Mn) between two
    ASCII letters or digits (`AKIA\u0301…`; before NFKC, which would compose them into a letter).

    Dropped, not replaced by a space, so a token someone split with one is matched whole. Two
    exceptions keep emoji intact and cannot join ASCII: a zero-width joiner between two emoji-side
    characters (non-ASCII, not a letter, digit or space), and a variation selector right after one.
    Linear in the length of the text, whatever runs of joiners it holds.
    """
    text = _LINE_BREAKS.sub("\n", text)
    if text.isascii():
        return _ASCII_CONTROL.sub("", text)
    text = unicodedata.normalize("NFKC", _drop_marks(_drop(text)))
    text = _drop(text)
    if _JOINER_RUN.search(text):
        text = _JOINER_RUN.sub(_joiner_run, text)
    return _drop_marks(text)


def _drop(text: str) -> str:
    text = _BMP_DROPPED.sub("", text)
    return _ASTRAL.sub(_astral, text) if _ASTRAL.search(text) else text


def _astral(match: re.Match[str]) -> str:
    char = match.group(0)
    if _is_joiner(char):
        return char
    return "" if char in _INVISIBLE or unicodedata.category(char) in _DROPPED_CATEGORIES else char


def _drop_marks(text: str) -> str:
    return _BETWEEN_ASCII.sub(_marks, text) if not text.isascii() else text


def _marks(match: re.Match[str]) -> str:
    run = match.group(0)
    return "" if all(unicodedata.category(char) == "Mn" for char in run) else run


def _joiner_run(match: re.Match[str]) -> str:
    """In a run of joiners and selectors, a joiner stays when the characters around the whole run are
    both emoji-side, a selector only when it opens the run right after an emoji-side character.

    Decided once per run (the neighbours are the same for every joiner in it), so a run costs its
    length, and no kept joiner ever touches ASCII.
    """
    text, start, end = match.string, match.start(), match.end()
    before = text[start - 1] if start > 0 else ""
    after = text[end] if end < len(text) else ""
    joiners_stay = _emoji_side(before) and _emoji_side(after)
    selector_stays = _emoji_side(before)
    kept = [
        char
        for at, char in enumerate(match.group(0))
        if (joiners_stay if char == "\u200d" else at == 0 and selector_stays)
    ]
    return "".join(kept)


def _is_joiner(char: str) -> bool:
    return char == "\u200d" or "\ufe00" <= char <= "\ufe0f" or "\U000e0100" <= char <= "\U000e01ef"


def _emoji_side(char: str) -> bool:
    return (
        bool(char)
        and not char.isascii()
        and not char.isspace()
        and not char.isalnum()
        and not _is_joiner(char)
    )


# ---------------------------------------------------------------------------------------------------
# Shapes: tokens recognizable by themselves


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
    return _secretlike(value) or len(value) >= 16


def _shape(pattern: str, *triggers: str, **options: Any) -> _Shape:
    return _Shape(re.compile(pattern), triggers, **options)


# In order: a PEM block goes before anything inside it is looked at, Anthropic before OpenAI (`sk-`).
_SHAPES: tuple[_Shape, ...] = (
    # PEM / OpenSSH / PGP private key blocks, whole, across lines. A header that ends its line (or a
    # JSON-escaped `\n`) starts a block, redacted to its END line or, unterminated, to the end; a header
    # inside a sentence only with an END marker after it, so prose naming the header is left alone.
    _shape(
        r"(?s)-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?=[ \t]*(?:\n|\\r\\n|\\n)|[ \t]+[A-Za-z0-9+/=]{16})"
        r".*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
        r"|.*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----)",
        bounded=False,
    ),
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
        r"(?<![A-Za-z0-9_.:/@\\-])[A-Za-z0-9_.-]{1,64}:[^\s/?#:\\\"'`]{4,}@"
        r"(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+:[0-9])",
        "@",
        bounded=False,
        suffix="@",
    ),
    # Authorization headers, whatever the scheme word; the value must look like a credential.
    _shape(
        r"(?i)(?P<keep>authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?:(?:bearer|basic|token|bot|digest)[ \t]+)?)(?P<value>[A-Za-z0-9._~+/=-]{6,})",
        "authorization",
        keep=True,
        check=_header_value,
    ),
    _shape(r"(?i)(?P<keep>bearer[ \t]+)[A-Za-z0-9._~+/-]{16,}=*", "bearer", keep=True),
)


# ---------------------------------------------------------------------------------------------------
# Names: values assigned to credential-like names, in env, YAML, JSON, TOML, CLI and prose styles

# A name ending in one of these holds a secret whatever its value looks like.
_STRONG = (
    r"pass(?:word|wd|phrase|code)|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key"
    r"|private[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|credentials?|auth|pw"
)
# A name ending in one of these holds a secret when its value looks random (long, high entropy).
_WEAK = r"key|salt|hmac|sig|signature|cookie|session|license|dsn|cert"

_NAME_END = r"(?![A-Za-z0-9])"
_STRONG_NAME = rf"(?:[A-Za-z0-9_.-]*?(?:{_STRONG})|(?:[A-Za-z0-9_.-]*?[_.-])?pass){_NAME_END}"
_WEAK_NAME = rf"[A-Za-z0-9_.-]*?(?:{_WEAK}){_NAME_END}"
# name, closing quote, separator (=, :, =>, -> or →, never == or ::), a YAML block indicator the
# collapsed sanitizer line may still hold, opening quote; the value follows.
_ASSIGN = (
    r"[\"']?(?i:{name})[\"']?[ \t]*(?:=>|->|\u2192|=(?!=)|:(?!:))[ \t]*"
    r"(?:[|>][+-]?[0-9]?[ \t]+(?=\S))?"
)
# A quoted value holds backslash escapes (`"hun\"ter2"`); a lone backslash may end it (`"C:\"`).
_VALUE = (
    r"(?:\"(?P<dq>(?:[^\"\\\n]|\\.)*\\?)\"|'(?P<sq>(?:[^'\\\n]|\\.)*\\?)'|`(?P<bq>[^`\n]*)`"
    r"|(?P<bare>[^\s\"'`]+))"
)

_ASSIGNMENT = re.compile(
    # Only where a separator follows the word: most words are not assignments, so most starts fail here.
    r"(?<![A-Za-z0-9_.$-])(?=[\"']?[A-Za-z0-9_.-]+[\"']?[ \t]*(?:[:=]|->|\u2192))"
    + _ASSIGN.format(name=f"(?P<strong>{_STRONG_NAME})|{_WEAK_NAME}")
    + _VALUE
)

_PROSE = re.compile(
    r"(?i)\b(?P<word>pass(?:word|wd|phrase|code)|pwd|secret|token|api[ _-]?key|apikey|access[ _-]?key"
    r"|secret[ _-]?key|private[ _-]?key)s?"
    r"(?:[ \t]+(?:for|of|on|to|in)[ \t]+(?:the[ \t]+)?[A-Za-z0-9./@_-]+)?"
    r"(?P<verb>[ \t]+(?:(?:is|was|are|were|has[ \t]+been|got)(?:[ \t]+(?:now|still))?"
    r"(?:[ \t]+(?:set|changed|reset|updated)[ \t]+to)?|became|(?:set|changed|reset|updated)[ \t]+to):?[ \t]+)"
    + _VALUE
)

# CLI spellings: `--password VALUE`, mysql's `-pVALUE`, curl's `-u user:VALUE`; and `password VALUE`.
_CLI_FLAG = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])--?(?:password|passwd|pass|pwd|token|secret|api-key|apikey|auth-token"
    r"|access-token)[ \t]+(?=[^\s-])" + _VALUE
)
_MYSQL_PASSWORD = re.compile(r"(?i:\b(?:mysql|mysqldump|mysqladmin|mariadb)\b)[^\n]*?[ \t]-p(?=\S)" + _VALUE)
_USER_PASSWORD = re.compile(r"(?<![A-Za-z0-9_-])(?:-u|--user)(?:[ \t]+|=)?[\"']?[^\s:\"']*:(?=\S)" + _VALUE)
_NAME_THEN_VALUE = re.compile(r"(?i)\b(?:password|passwd|passphrase|pwd)[ \t]+(?=[^\s-])" + _VALUE)

# Values that are no secret: references (`${…}`, `$(…)`, `$NAME`), placeholders (`<your token>`),
# code (a call or an index), types, paths, auth scheme names, YAML block indicators, the marker.
_NOT_A_VALUE = re.compile(
    r"""(?x)^(?:
        |\$\{.*\}|\$\(.*\)|\$[A-Z_][A-Z0-9_]*|%\(.*|\{\{.*|<[A-Za-z][A-Za-z _-]*>?|\[REDACTED.*
        |\*+|\#+|\.{3}|…|(?i:x{3,})|[|>][+-]?[0-9]?|(?:~|\.{1,2})?/[^\s]*
        |(?i:null|none|nil|true|false|yes|no|on|off|undefined|required|optional|empty|n/?a|tbd|todo)
        |(?i:str|string|bytes|int|integer|number|bool|boolean|any|secretstr|optional\[.*|dict.*|list.*)
        |(?i:oauth2?|bearer|basic|digest|jwt|saml|oidc|ntlm|kerberos|mtls|sso|ldap|iam)
        |[A-Za-z_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(.*\)|\[.*\]|[(\[])  # a call, an index: code
        |(?:os|process|settings|config|env|self|cls|ctx|request|args|options)\.[A-Za-z_.]+
    )$"""
)
# Prose words that follow "the password is" without being one.
_PROSE_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "in",
        "on",
        "at",
        "of",
        "to",
        "for",
        "by",
        "from",
        "not",
        "never",
        "always",
        "still",
        "now",
        "also",
        "only",
        "just",
        "being",
        "been",
        "too",
        "very",
        "so",
        "set",
        "unset",
        "stored",
        "saved",
        "kept",
        "hashed",
        "salted",
        "encrypted",
        "rotated",
        "changed",
        "reset",
        "generated",
        "shown",
        "hidden",
        "masked",
        "managed",
        "sent",
        "missing",
        "wrong",
        "incorrect",
        "correct",
        "invalid",
        "valid",
        "expired",
        "revoked",
        "required",
        "optional",
        "blank",
        "empty",
        "there",
        "here",
        "mine",
        "yours",
        "ours",
        "theirs",
        "it",
        "this",
        "that",
        "same",
        "different",
        "longer",
        "shorter",
        "weak",
        "strong",
        "case",
        "sensitive",
        "insensitive",
        "protected",
        "leaked",
        "compromised",
        "public",
        "private",
        "available",
        "needed",
        "necessary",
        "used",
        "checked",
        "verified",
        "given",
        "provided",
        "handled",
        "passed",
        "read",
        "loaded",
        "fetched",
        "injected",
        "mounted",
        "configured",
        "defined",
        "ignored",
        "included",
        "excluded",
        "cached",
        "logged",
        "printed",
        "what",
        "how",
        "why",
        "where",
        "when",
        "which",
        "who",
        "whatever",
        "probably",
        "likely",
        "usually",
        "definitely",
        "actually",
        "really",
        "fine",
        "ok",
        "okay",
        "good",
        "bad",
        "easy",
        "hard",
        "simple",
        "long",
        "short",
        "old",
        "new",
    ]
)
_PUNCTUATION_TAIL = ".,;:!?)]}…"
# Unquoted prose after "the password is" that reads as a word: a participle, an adverb, a compound.
_PROSE_SHAPE = re.compile(r"[a-z]+(?:ed|ing|ly|ive|ous|ble)|[a-z]+(?:-[a-z]+)+")


def _secretlike(value: str) -> bool:
    """Random-looking enough to be a token: ≥ 6 characters, letters with digits or symbols."""
    if len(value) < 6:
        return False
    has_alpha = any(c.isalpha() for c in value)
    has_other = any(c.isdigit() or not c.isalnum() for c in value)
    return has_alpha and has_other


def _looks_random(value: str) -> bool:
    """Stricter than `_secretlike`: a digit, a symbol other than `-`, `'` or `.`, or a capital after
    the first letter — what a secret has and a prose word does not."""
    if len(value) < 6 or not any(c.isalpha() for c in value):
        return False
    return any(c.isdigit() or (not c.isalnum() and c not in "-'.") for c in value) or (
        any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    )


def _strong_value(name: str, value: str) -> bool:
    """A password-like name: any value (a number of ≥ 4 digits). Another strong name (token, secret,
    key, auth): a number never (a count), a word only when it looks random or is ≥ 16 characters."""
    if value.isdigit():
        return _password_name(name) and len(value) >= 4
    if _password_name(name):
        return True
    return _looks_random(value) or len(value) >= 16


def _password_name(name: str) -> bool:
    name = name.lower()
    return "pass" in name or name.endswith(("pwd", "pw"))


def _not_a_value(match: re.Match[str], value: str) -> bool:
    """A reference, placeholder or code, judged on the value and (bare) on its untrimmed spelling."""
    raw = match.group("bare")
    return _NOT_A_VALUE.match(value) is not None or (raw is not None and _NOT_A_VALUE.match(raw) is not None)


def _high_entropy(value: str) -> bool:
    """Long, several character classes, and ≥ 3.5 bits of Shannon entropy per character."""
    if len(value) < 16 or not re.fullmatch(r"[A-Za-z0-9+/=_.~-]+", value):
        return False
    classes = sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
        )
    )
    if classes < 2:
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 3.5


def _value_of(match: re.Match[str]) -> tuple[str, int, int]:
    for group in ("dq", "sq", "bq", "bare"):
        if match.group(group) is not None:
            start, end = match.span(group)
            value = match.group(group)
            if group == "bare":
                trimmed = value.rstrip(_PUNCTUATION_TAIL)
                if trimmed:
                    end -= len(value) - len(trimmed)
                    value = trimmed
            return value, start, end
    raise AssertionError("the value pattern always sets one group")


def _replace_value(match: re.Match[str], redact: bool, length: int | None = None) -> str:
    """The match with its value (or the value's first `length` characters) replaced by the marker."""
    if not redact:
        return match.group(0)
    _, start, end = _value_of(match)
    if length is not None:
        end = start + length
    whole_start = match.start()
    text = match.group(0)
    return text[: start - whole_start] + REDACTED + text[end - whole_start :]


# A weak name's value is judged up to the first character no token holds (`AccountKey=…;Endpoint…`).
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_.~-]*")


def _assignment(match: re.Match[str]) -> str:
    """A strong name: any value but a reference or placeholder. A weak name: a random-looking value."""
    value, _, _ = _value_of(match)
    name = match.group("strong")
    if name is not None:
        return _replace_value(match, not _not_a_value(match, value) and _strong_value(name, value))
    run = _TOKEN_RUN.match(value)
    token = run.group(0) if run else ""
    return _replace_value(match, _high_entropy(token), len(token))


def _prose(match: re.Match[str]) -> str:
    """After "the password is": a quoted value, a random-looking one, or a last word that does not read
    as prose ("… is swordfish", not "… is probably wrong"); after "the token is" only a random-looking
    or quoted value, or one of ≥ 20 token characters."""
    value, _, end = _value_of(match)
    if _not_a_value(match, value) or value.lower() in _PROSE_WORDS:
        return match.group(0)
    if match.group("bare") is None:
        return _replace_value(match, len(value) >= 6 or _password_word(match.group("word")))
    if _looks_random(value):
        return _replace_value(match, True)
    if _password_word(match.group("word")):
        last = not match.string[end:].strip(_PUNCTUATION_TAIL + " \t")
        return _replace_value(match, last and _PROSE_SHAPE.fullmatch(value) is None)
    return _replace_value(match, len(value) >= 20 and re.fullmatch(r"[A-Za-z0-9_+/=-]+", value) is not None)


def _password_word(word: str) -> bool:
    word = word.lower()
    return word.startswith("pass") or word == "pwd"


def _flag(match: re.Match[str]) -> str:
    """`--password VALUE`, `password VALUE`: only a value that looks random or is ≥ 8 characters."""
    value, _, _ = _value_of(match)
    if _not_a_value(match, value) or value.lower() in _PROSE_WORDS:
        return match.group(0)
    return _replace_value(match, _looks_random(value) or (match.group("bare") is None and len(value) >= 8))


def _attached(match: re.Match[str]) -> str:
    """mysql's `-pVALUE`, curl's `-u user:VALUE`: the value whatever it is, but a reference."""
    value, _, _ = _value_of(match)
    return _replace_value(match, not _not_a_value(match, value))


# Every name and prose rule needs one of these words on the line (lowercase): lines without one are
# skipped, which is most lines of a transcript.
_NAME_WORDS = (
    "pass", "pwd", "secret", "token", "key", "auth", "cred", "salt", "hmac", "sig", "cookie", "session",
    "license", "dsn", "cert", "pw", "mysql", "mariadb", "-u",
)  # fmt: skip


def redact_secrets(text: str) -> str:
    """`text` normalized (see `normalize_untrusted`), every recognizable credential → [REDACTED].

    Idempotent: redacting twice changes nothing more.
    """
    text = normalize_untrusted(text)
    lowered = text.lower()
    for shape in _SHAPES:
        if not shape.triggers or any(trigger in lowered for trigger in shape.triggers):
            text = shape.pattern.sub(shape.replace, text)
    if any(word in lowered for word in _NAME_WORDS):
        if "\n" in text:
            text = _redact_continuations(text)
        text = "\n".join(_redact_names(line) for line in text.split("\n"))
    return text


# A strong name (last on its line, after a list dash or a `user:` prefix) whose value is not on its
# line: YAML's `password:` or `password: |` with the value on the more-indented lines below, or a
# quote opened and not closed on the line.
_CONTINUED = re.compile(
    rf"(?m)^(?P<indent>[ \t]*)(?:[^\n]*?[ \t])?[\"']?(?i:{_STRONG_NAME})[\"']?[ \t]*:[ \t]*"
    r"(?:[|>][+-]?[0-9]?[ \t]*|(?P<quote>[\"'])[^\"'\n]*)?$"
)

# What such a line ends with (searched first: a colon, a block indicator or an open quote at the end
# of a line is rare, so the full pattern runs on few lines).
_CONTINUED_END = re.compile(r"(?m):[ \t]*(?:[|>][+-]?[0-9]?[ \t]*|[\"'][^\"'\n]*)?$")


def _redact_continuations(text: str) -> str:
    """The value of each such name → the marker: up to the closing quote, or every following line
    indented deeper than the name (blank lines between them included)."""
    out: list[str] = []
    pos = 0
    for candidate in _CONTINUED_END.finditer(text):
        line_start = text.rfind("\n", 0, candidate.start()) + 1
        match = _CONTINUED.match(text, line_start)
        if match is None or match.start() < pos:
            continue
        quote = match.group("quote")
        if quote is not None:
            start = match.start("quote") + 1
            close = text.find(quote, match.end())
            stop = close if close >= 0 else len(text)
            replacement = REDACTED
        else:
            start = stop = match.end()
            depth = len(match.group("indent"))
            while stop < len(text):
                end = text.find("\n", stop + 1)
                end = len(text) if end < 0 else end
                line = text[stop + 1 : end]
                if line.strip() and len(line) - len(line.lstrip(" \t")) <= depth:
                    break
                stop = end
            if stop == start or not text[start:stop].strip():
                continue
            replacement = "\n" + " " * (depth + 2) + REDACTED
        out.append(text[pos:start] + replacement)
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def _redact_names(line: str) -> str:
    """Assignments and prose never span lines; a line without a credential word is left alone."""
    lowered = line.lower()
    if not any(word in lowered for word in _NAME_WORDS):
        return line
    line = _ASSIGNMENT.sub(_assignment, line)
    line = _CLI_FLAG.sub(_flag, line)
    line = _MYSQL_PASSWORD.sub(_attached, line)
    line = _USER_PASSWORD.sub(_attached, line)
    line = _PROSE.sub(_prose, line)
    return _NAME_THEN_VALUE.sub(_flag, line)


def redact_candidate(candidate: MemoryCandidate) -> MemoryCandidate:
    """The candidate as a store may hold it: text and keywords redacted."""
    text = redact_secrets(candidate.text)
    return replace(candidate, text=text, keywords=_keywords(candidate.keywords, candidate.text, text))


def redact_record(record: MemoryRecord) -> MemoryRecord:
    """The record as it may leave a store: text and keywords redacted (a row written before redaction
    covered a shape is cleaned on the way out)."""
    text = redact_secrets(record.text)
    return replace(record, text=text, keywords=_keywords(record.keywords, record.text, text))


def _keywords(keywords: tuple[str, ...], before: str, after: str) -> tuple[str, ...]:
    """Each keyword redacted; and a keyword that redaction removed from the text (`hunter2` of
    `password=hunter2`) is a secret even where it stands alone."""
    was, now = before.lower(), after.lower()
    out: list[str] = []
    for keyword in keywords:
        clean = redact_secrets(keyword)
        needle = clean.strip().lower()
        out.append(REDACTED if needle and needle in was and needle not in now else clean)
    return tuple(out)
