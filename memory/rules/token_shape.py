"""What a credential looks like when nobody listed its vendor: a long run of token characters that
is random, not one of the long runs ordinary engineering text is full of.

Random means several character classes, many switches between them and high entropy per
character. Not random: hex alone (commit SHAs, digests; a vendor prefix in front makes it a token),
UUIDs, version strings, Kubernetes pod names, branches named after an issue key, OpenSSH public
keys, words joined by `-`, `_`, `.` or `/` or in camelCase (identifiers, paths, module names,
URLs), digests named by their algorithm (`sha512-…`), and base64 that decodes to plain text (a
badge's inline SVG). A vendor prefix (`glpat-`, `hvs.`, `NRAK-`) lowers the bar for
the rest: two character classes are enough.

Every judgment here costs the run's length, and runs never overlap, so a text costs its length.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from itertools import pairwise

REDACTED = "[REDACTED]"

# A run of token characters (base64, base64url, `.` and `~` of some vendors), padding at its end.
_RUN = re.compile(r"(?<![A-Za-z0-9+/_.~=-])[A-Za-z0-9+/_.~-]{20,}={0,2}")
_EDGE = "._~-/"
# The first word of a run and its separator: a vendor's prefix when the rest is random.
_PREFIX = re.compile(r"[A-Za-z]{1,12}[0-9]{0,2}[_.-]")
# Identifiers vendors document as public, random-looking as they are: Stripe object ids, AWS resource
# ids, the model APIs' message, request, tool-call and batch ids, and this project's own run ids.
_PUBLIC_ID = re.compile(
    r"(?:cus|ch|pi|pm|price|prod|sub|in|evt|acct|txn|po|src|card|ba|seti|cs|plink)_"
    r"|(?:subnet|sg|vpc|i|ami|vol|snap|eni|rtb|igw|nat|acl|eipalloc|lt|tgw|pcx|vpce|fs|db)-"
    r"|(?:msg|req|toolu|srvtoolu|msgbatch|batch|file|call|resp|asst|thread|run|step|vs|ftjob)_"
    r"|chatcmpl-"
)
_DIGEST_PREFIX = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?|xxh\d*|crc32)[_.:-]")
# Names of three or more lower-case parts joined by `-`, as DNS labels are: Kubernetes pods
# (`payments-worker-5f7b9c8d6-q2w4e`), nodes, buckets, cache keys; the hash in them is no secret.
_LABEL_NAME = re.compile(r"[a-z0-9]{1,20}(?:-[a-z0-9]{1,20}){2,}")
# A branch or slug that starts with an issue key (`JIRA-1234-add-OAuth2PKCEFlow`).
_ISSUE_SLUG = re.compile(r"[A-Z][A-Z0-9]{1,9}-[0-9]{1,6}(?:[-_][A-Za-z0-9]+)+")
# The key type an OpenSSH public key line starts with: the base64 after it is the public key.
_SSH_PUBLIC = re.compile(
    r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp[0-9]+|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)"
    r"[ \t]+$"
)
_UUID = re.compile(r"(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_VERSION = re.compile(r"(?i)v?[0-9]+(?:\.[0-9]+)+")
_SEPARATORS = re.compile(r"[_.~+/=-]+")
_WORD = re.compile(r"[A-Z]?[a-z]{4,}")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _classes(value: str) -> int:
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
        )
    )


def _class_of(char: str) -> int:
    return 0 if char.islower() else 1 if char.isupper() else 2


def _switch_ratio(value: str) -> float:
    """How often neighbouring characters differ in class (lower, upper, digit), separators breaking
    the text into parts: ~0.6 for random base62, ~0.2 for camelCase words."""
    switches = pairs = 0
    for part in _SEPARATORS.split(value):
        pairs += max(len(part) - 1, 0)
        switches += sum(_class_of(a) != _class_of(b) for a, b in pairwise(part))
    return switches / pairs if pairs else 0.0


def _wordy(value: str) -> bool:
    """Half the characters or more in words (≥ 4 lowercase letters, capitalized or not):
    identifiers, paths, sentences run together; random base62 of 20 characters is that wordy about
    once in fifty. Without capitals the words must also read as
    words (a vowel in every 3.5 letters, as in English; random lowercase has one in five)."""
    if not any(c.islower() for c in value):
        return False  # capitals and digits alone (bech32, base32) are judged by their mix
    words = "".join(_WORD.findall(value))
    if len(words) * 2 < len(value):
        return False
    if any(c.isupper() for c in value):
        return True  # camelCase: random base62 rarely spells long capitalized lowercase runs
    return sum(c in "aeiou" for c in words) >= 0.28 * len(words)


def _plain_base64(value: str) -> bool:
    """Base64 of printable text (an inline SVG, a JSON header): an encoding, not a secret (unless the
    text holds one: `redact_encoded_secrets`)."""
    return _base64_text(value) is not None


def _base64_text(value: str) -> str | None:
    """The printable text `value` is base64 (or base64url) of, or None."""
    if len(value) < 16 or _BASE64.fullmatch(value) is None:
        return None
    body = value.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    printable = bool(text) and all(c.isprintable() or c in "\n\t\r" for c in text)
    return text if printable else None


def _random(value: str, min_classes: int) -> bool:
    if len(value) < 16 or (_classes(value) < min_classes and not _two_class_random(value)):
        return False
    if _UUID.fullmatch(value) or _VERSION.fullmatch(value) or _wordy(value):
        return False
    # Behind a vendor prefix the bar is lower: hex bodies switch class less often than base62.
    prefixed = min_classes < 3
    if _switch_ratio(value) < (0.2 if prefixed else 0.3) or entropy(value) < (2.8 if prefixed else 3.3):
        return False
    return not _plain_base64(value)


def _two_class_random(value: str) -> bool:
    """Two classes where three are the rule, but plainly random: mixed-case letters switching case
    at every other character (one random base62 run of 20 in thirty has no digit), or one case of
    letters and digits, long, with letters past `f` and more entropy than hex can have (base36 keys
    like NuGet's `oy2…`)."""
    if _classes(value) != 2:
        return False
    if not any(c.isdigit() for c in value):
        return len(value) >= 20 and _switch_ratio(value) >= 0.4
    return len(value) >= 32 and any(c.isalpha() and c.lower() > "f" for c in value) and entropy(value) >= 4.2


def is_random_token(run: str) -> bool:
    """`run` (token characters only) is a credential by its shape alone."""
    run = run.strip(_EDGE)
    if len(run) < 20 or _DIGEST_PREFIX.match(run) or _PUBLIC_ID.match(run) or _UUID.fullmatch(run):
        return False
    if _named(run):
        return False
    prefix = _PREFIX.match(run)
    if prefix is not None and len(run) - prefix.end() >= 20 and _random(run[prefix.end() :], 2):
        return True
    return _random(run, 3)


def _named(run: str) -> bool:
    """A label or an issue-key slug: a name, and a path holding one is a path, not base64."""
    return _LABEL_NAME.fullmatch(run) is not None or _ISSUE_SLUG.fullmatch(run) is not None


def _replace_run(match: re.Match[str]) -> str:
    """A random run → the marker; a run with `/` in it is judged by its parts first (a URL or path
    keeps its words, only a random part of it goes), then whole (base64 holds `/` too)."""
    run = match.group(0)
    if _ssh_public_key(match):
        return run
    if "/" not in run:
        return _marked(run) if is_random_token(run) else run
    parts = run.split("/")
    if any(is_random_token(part) for part in parts):
        return "/".join(_marked(part) if is_random_token(part) else part for part in parts)
    whole = "." not in run and not run.startswith(("/", "~")) and not any(map(_named, parts))
    if whole and is_random_token(run):
        return _marked(run)
    return run


def _ssh_public_key(match: re.Match[str]) -> bool:
    """The run is an OpenSSH public key: after its key type, and its blob opens with that type's
    name (a length, then `ssh-…`, `ecdsa-…` or `sk-…`), so a secret after `ssh-rsa ` still goes."""
    if not _SSH_PUBLIC.search(match.string, max(match.start() - 48, 0), match.start()):
        return False
    try:
        head = base64.b64decode(match.group(0)[:24], validate=True)
    except binascii.Error:
        return False
    return head[:2] == b"\0\0" and head[4:].startswith((b"ssh-", b"ecdsa-", b"sk-"))


def _marked(run: str) -> str:
    """The run's random part → the marker; the punctuation at its edges (a sentence's full stop)
    stays."""
    core = run.strip(_EDGE)
    start = run.index(core)
    return run[:start] + REDACTED + run[start + len(core) :]


def redact_random_runs(text: str) -> str:
    """Every random run of ≥ 20 token characters in `text` → the marker."""
    return _RUN.sub(_replace_run, text)


def redact_encoded_secrets(text: str, redact: Callable[[str], str]) -> str:
    """Every run of `text` that is base64 of text in which `redact` finds a secret (a connection
    string, a `user:password` pair) → the marker; the rest stays, exempt as plain base64 is."""

    def replace(match: re.Match[str]) -> str:
        run = match.group(0)
        decoded = _base64_text(run.strip(_EDGE))
        return _marked(run) if decoded is not None and redact(decoded) != decoded else run

    return _RUN.sub(replace, text)


def secretlike(value: str) -> bool:
    """Random-looking enough to be a token: ≥ 6 characters, letters with digits or symbols."""
    if len(value) < 6:
        return False
    has_alpha = any(c.isalpha() for c in value)
    has_other = any(c.isdigit() or not c.isalnum() for c in value)
    return has_alpha and has_other


def looks_random(value: str) -> bool:
    """Stricter than `secretlike`: a digit, a symbol other than `-`, `'` or `.`, or a capital after
    the first letter — what a secret has and a prose word does not."""
    if len(value) < 6 or not any(c.isalpha() for c in value):
        return False
    return any(c.isdigit() or (not c.isalnum() and c not in "-'.") for c in value) or (
        any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    )


def high_entropy(value: str) -> bool:
    """Long, several character classes, and ≥ 3.5 bits of Shannon entropy per character."""
    if len(value) < 16 or not re.fullmatch(r"[A-Za-z0-9+/=_.~-]+", value):
        return False
    return _classes(value) >= 2 and entropy(value) >= 3.5


def keyed_value(value: str) -> bool:
    """Random enough to be a key where a key word stands right before it ("the app key 3f2a…"):
    ≥ 16 token characters of two classes or more, not words (hex and UUIDs count here)."""
    if len(value) < 16 or _classes(value) < 2 or _wordy(value) or _VERSION.fullmatch(value):
        return False
    return entropy(value) >= 3.0 and not _plain_base64(value)
