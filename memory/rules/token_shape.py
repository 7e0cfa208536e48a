"""What a credential looks like when nobody listed its vendor: a long run of token characters that
is random, not one of the long runs ordinary engineering text is full of.

Random means several character classes, many switches between them and high entropy per
character. Not random: hex alone (commit SHAs, digests; a vendor prefix in front makes it a token),
UUIDs, version strings, Kubernetes pod names, branches named after an issue key, OpenSSH public
keys, words joined by `-`, `_`, `.` or `/` or in camelCase (identifiers, paths, module names,
URLs), digests named by their algorithm (`sha512-…`, `/` and all), base64 that decodes to plain text
(a badge's inline SVG), ids that prove themselves by checksum or header (`public_ids`: addresses,
CIDs, inline images), a path of names after a key word, a resource id inside a URL's path, and a
value a noun before it names as an id. A vendor prefix (`glpat-`, `hvs.`, `NRAK-`) lowers the bar for
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

from memory.rules.public_ids import is_public_id, is_secret_encoding

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
_DIGEST_NAME = r"(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?|xxh\d*|crc32)"
_DIGEST_PREFIX = re.compile(rf"(?i){_DIGEST_NAME}[_.:-]")
# A digest named by its algorithm is one value, `/` and `+` included (they are base64's, not a
# path's): Subresource Integrity (`sha512-` + standard base64 of the digest: npm's lockfile
# `integrity`, CSP source hashes) and a digest after its label and a colon (`sha256:`, go.sum's `h1:`,
# which is SHA-256). Only at a digest's length, so the name vouches for nothing longer.
_NAMED_DIGEST = re.compile(rf"(?i){_DIGEST_NAME}[_.-](?P<body>[A-Za-z0-9+/]+={{0,2}})")
_DIGEST_LABEL = re.compile(rf"(?i)(?<![A-Za-z0-9])(?:{_DIGEST_NAME}|h1):$")
_DIGEST_BYTES = frozenset((16, 20, 28, 32, 48, 64))
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
_HEX = re.compile(r"[0-9a-fA-F]+")


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
    random = prefix is not None and len(run) - prefix.end() >= 20 and _random(run[prefix.end() :], 2)
    return (random or _random(run, 3)) and not _public(run)


def _public(run: str) -> bool:
    """The run is a public id by its own structure, or a DNS name whose random labels are
    (`<cid>.ipfs.dweb.link`): judged without them."""
    if is_public_id(run):
        return True
    labels = run.split(".")
    rest = ".".join(label for label in labels if not is_public_id(label))
    return len(labels) > 1 and rest != run and not is_random_token(rest)


def _named(run: str) -> bool:
    """A label or an issue-key slug: a name, and a path holding one is a path, not base64."""
    return _LABEL_NAME.fullmatch(run) is not None or _ISSUE_SLUG.fullmatch(run) is not None


def _replace_run(match: re.Match[str]) -> str:
    """A random run → the marker; a run with `/` in it is judged by its parts first (a URL or path
    keeps its words, only a random part of it goes), then whole (base64 holds `/` too). A run that
    names itself (a digest, an address, a content id, an inline file) or is named by the words
    before it stays; those are asked only of a run that looks random."""
    run = match.group(0)
    if "/" not in run:
        return _marked(run) if is_random_token(run) and not _vouched(match) else run
    parts = run.split("/")
    randoms = [is_random_token(part) for part in parts]
    if any(randoms):
        if _vouched(match) or is_public_id(run.strip(_EDGE)):
            return run
        kept = _resource_segments(match, parts, randoms)
        marked = (flag and not keep for flag, keep in zip(randoms, kept, strict=True))
        return "/".join(_marked(part) if mark else part for part, mark in zip(parts, marked, strict=True))
    whole = "." not in run and not run.startswith(("/", "~")) and not any(map(_named, parts))
    if whole and is_random_token(run) and not _vouched(match):
        return _marked(run)
    return run


def _vouched(match: re.Match[str]) -> bool:
    return _ssh_public_key(match) or _named_digest(match) or _named_id(match)


def _named_digest(match: re.Match[str]) -> bool:
    """The run is a digest its algorithm names: `sha512-<base64>` (SRI), or after `sha256:`/`h1:`."""
    core = match.group(0).strip(_EDGE)
    named = _NAMED_DIGEST.fullmatch(core)
    if named is not None:
        return _digest_length(named.group("body"))
    label = _DIGEST_LABEL.search(match.string, max(match.start() - 8, 0), match.start())
    return label is not None and _digest_length(core)


def _digest_length(body: str) -> bool:
    """`body` is hex or standard base64 of as many bytes as a digest has."""
    if re.fullmatch(r"[0-9a-fA-F]+", body):
        return len(body) // 2 in _DIGEST_BYTES and len(body) % 2 == 0
    if len(body) % 4:
        return False
    try:
        return len(base64.b64decode(body, validate=True)) in _DIGEST_BYTES
    except binascii.Error:
        return False


# A URL path goes from container to resource to view (`/document/d/<id>/edit`, `/runs/<id>/logs`):
# a random segment with a segment after it names a resource the rest of the path acts on, when the
# segment before it says what kind of resource. A capability URL's token ends its path (Slack,
# Discord and generic webhooks), shares its segment with other text (Telegram's `bot<id>:<token>`) or
# follows a host, a version or an API's root with more path after it (Bark's `/<key>/<title>`,
# Cronitor's `/p/<key>/<monitor>`, `/api/<key>/…`); one a segment names as a credential stays a
# secret wherever it stands (`/hooks/<token>/run`).
_RESOURCE_SEGMENT = re.compile(
    r"(?i)d|documents?|files?|folders?|spreadsheets?|presentations?|sheets?|slides|playlists?|videos?"
    r"|runs?|builds?|jobs?|pipelines?|deployments?|commits?|blobs?|trees?|objects?|items?|records?"
    r"|boards?|designs?|projects?|issues?|pages?|posts?|assets?|images?|attachments?|notebooks?"
    r"|datasets?|ipfs|ipns|address(?:es)?|tx"
)
_CREDENTIAL_SEGMENT = re.compile(
    r"(?i)key|token|secret|pass|auth|cred|hook|sig|session|bot|trigger|integration"
)
_URL_BEFORE = re.compile(r"://[^\s<>\"'`|]*$")


def _resource_segments(match: re.Match[str], parts: list[str], random: list[bool]) -> list[bool]:
    """For each part: a random whole segment of a URL's path between a resource noun and another
    segment."""
    kept = [False] * len(parts)
    candidates = [
        at
        for at in range(1, len(parts) - 1)
        if random[at]
        and parts[at + 1]
        and _RESOURCE_SEGMENT.fullmatch(parts[at - 1])
        and not _CREDENTIAL_SEGMENT.search(parts[at - 1])
        and not is_secret_encoding(parts[at])
    ]
    if candidates and _in_url(match):
        for at in candidates:
            kept[at] = True
    return kept


def _in_url(match: re.Match[str]) -> bool:
    run, start = match.group(0), match.start()
    if run.startswith("//") and match.string[start - 1 : start] == ":":
        return True
    return _URL_BEFORE.search(match.string, max(start - 256, 0), start) is not None


# The noun right before a value says what it is, as a credential word does the other way round
# (`secret_names`): "playlist PL…", "the doc id 1Bx…", "CID …". Not "commit": commit ids are hex,
# never random here, so the word (a verb as often: "don't commit …") would vouch only for others.
# Not after a word that makes the id a credential ("session id", "key id"), nor where the clause the
# noun ends calls the value one ("the password for the file: …", "zip password, see video …").
_ID_NOUN = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(?P<words>(?:[A-Za-z0-9_-]+[ \t]+){0,2}"
    r"(?:playlists?|videos?|channels?|documents?|docs?|sheets?|spreadsheets?|slides|files?|folders?"
    r"|cids?|address(?:es)?|objects?|ids?|identifiers?))"
    r"(?:[ \t]+(?:id|ids|is|was|are))?[ \t]*[:#]?[ \t]*$"
)
_CREDENTIAL_WORD = re.compile(
    r"(?i)key|token|secret|pass|pwd|auth|cred|session|cookie|sig|private|api|bearer|login|jwt|hmac"
)


_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")


def _named_id(match: re.Match[str]) -> bool:
    start = max(match.start() - 64, 0)
    named = _ID_NOUN.search(match.string, start, match.start())
    if named is None:
        return False
    clause = _SENTENCE_END.split(match.string[start : named.end()])[-1]
    if _CREDENTIAL_WORD.search(clause):
        return False
    return not is_secret_encoding(match.group(0).strip(_EDGE))


def path_of_names(value: str) -> bool:
    """`/` separates names, as in an object key or a file path (`reports/2026/q3/summary.csv`,
    `/run/secrets/db`): two parts or a leading `/`, none of base64's own marks (`+`, `=` padding at
    the end), half the parts or more names and no part random. Base64 of a key holds `/` about once
    in 64 characters, between random parts."""
    parts = [part for part in value.split("/") if part]
    if not parts or (len(parts) < 2 and not value.startswith("/")) or "+" in value or value.endswith("="):
        return False
    names = sum(
        all(_NAME_PIECE.fullmatch(piece) for piece in _SEPARATORS.split(part) if piece) for part in parts
    )
    return names * 2 >= len(parts) and not any(map(_random_part, parts))


# Words in camelCase or PascalCase, acronyms and numbers, end to end (`UserProfile`, `AWSLogs2`):
# random base62 rarely spells a capital with two lowercase letters after it at every capital.
_CAMEL_WORDS = re.compile(r"(?:[A-Z]?[a-z]{2,}|[A-Z]{2,}(?![a-z])|[0-9]+)+")
# A piece of a path that reads as a name: lower case and digits (`q3`, `summary`), camelCase words,
# or capitals and digits (`000000010000000A000000FE`, a WAL segment).
_NAME_PIECE = re.compile(r"[a-z0-9]+|[A-Z0-9]+|" + _CAMEL_WORDS.pattern)


def _random_part(part: str) -> bool:
    """A path part that is one random piece of eight characters or more, or holds one of twelve or
    more (a file name may carry a short random suffix: `…_20261207T1205Z_Q8mWtY2r.json.gz`)."""
    for piece in _SEPARATORS.split(part):
        if (
            len(piece) < (8 if piece == part else 12)
            or _HEX.fullmatch(piece)
            or not any(c.islower() for c in piece)
        ):
            continue
        if _classes(piece) >= 2 and not _CAMEL_WORDS.fullmatch(piece) and _switch_ratio(piece) >= 0.3:
            return True
    return False


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
    if len(value) < 16 or not re.fullmatch(r"[A-Za-z0-9+/=_.~-]+", value) or path_of_names(value):
        return False
    return _classes(value) >= 2 and entropy(value) >= 3.5


def keyed_value(value: str) -> bool:
    """Random enough to be a key where a key word stands right before it ("the app key 3f2a…"):
    ≥ 16 token characters of two classes or more, not words (hex and UUIDs count here)."""
    if len(value) < 16 or _classes(value) < 2 or _wordy(value) or _VERSION.fullmatch(value):
        return False
    if path_of_names(value) or is_public_id(value):
        return False
    return entropy(value) >= 3.0 and not _plain_base64(value)
