"""Secrets never leave the process through memory: not to the extractor, not into a record, not into
a prompt, a list or a service reply.

Three detectors, so a shape nobody listed is still caught: the shapes vendors document
(`secret_shapes`), credential context — a value after a name, flag or phrase that says it is a secret,
whatever the value looks like (`secret_names`), and token shape — a long random run of token
characters that is none of the long runs engineering text is full of (`token_shape`). They run on
the normalized text (`normalize`: nothing invisible, NFKC), then on a line's decoded spelling where it
holds HTML entities or percent-escapes, inside base64 that decodes to text, then across a line
break that split a token in two. Every
later cleaning step (the prompt sanitizer, `memory list`) goes through this module.

Engine: our own patterns, not Yelp's `detect-secrets` (1.5.0), evaluated first on this module's
corpora (`bench/bench_redact.py --detect-secrets`): its default plugins flag
nearly every benign sentence, without its entropy plugins it misses most modern token formats, it
reports no offsets (so it cannot drive a replacement), and it keeps mutable global settings. No
maintained gitleaks-style rule set ships as data on PyPI either (the packages that wrap gitleaks run
its binary; `trufflehogregexes` last changed in 2018), and an enumerated list is one vendor behind by
construction, which is why the two generic detectors carry the weight.

Pure and linear: no I/O, no state, and every pattern is free of nested quantifiers that could
backtrack, so a text costs its length.
"""

from __future__ import annotations

import re
from dataclasses import replace

from memory.rules.normalize import ESCAPE, decode_escapes, normalize_untrusted
from memory.rules.secret_names import redact_names
from memory.rules.secret_shapes import redact_shapes
from memory.rules.token_shape import REDACTED, looks_random, redact_encoded_secrets, redact_random_runs
from memory.types import MemoryCandidate, MemoryRecord

__all__ = ["REDACTED", "normalize_untrusted", "redact_candidate", "redact_record", "redact_secrets"]


# Passes until nothing changes: a match can hide another that overlapped it (`-p token: token: …`),
# which the next pass finds. Text without a secret takes one pass; text with one, usually two.
_MAX_PASSES = 4


def redact_secrets(text: str) -> str:
    """`text` normalized (see `normalize_untrusted`), every recognizable credential → [REDACTED].

    Idempotent: redacting twice changes nothing more.
    """
    text = normalize_untrusted(text)
    for _ in range(_MAX_PASSES):
        redacted = _pass(text)
        if redacted == text:
            break
        text = redacted
    return text


def _pass(text: str) -> str:
    # Decoded first: a raw pass would redact the part of a token after its first escape, and the
    # decoded pass would then see too little of it to redact the part before.
    if ESCAPE.search(text):
        text = "\n".join(_redact_decoded(line) for line in text.split("\n"))
    text = _redact(text)
    if "\n" in text:
        text = _rejoin(text)
    return text


def _redact(text: str) -> str:
    return redact_encoded_secrets(_detect(text), _detect)


def _detect(text: str) -> str:
    return redact_random_runs(redact_names(redact_shapes(text)))


def _redact_decoded(line: str) -> str:
    """A line with escapes, redacted as it reads decoded when that finds a secret (the line is then
    kept decoded); otherwise the line as it was, escapes and all."""
    if not ESCAPE.search(line):
        return line
    decoded = decode_escapes(line)
    if decoded == line:
        return line
    redacted = _redact(decoded)
    return redacted if redacted != decoded else line


# The token characters a line may end with and the next begin with when one token was wrapped.
_TAIL = re.compile(r"[A-Za-z0-9+/_~=-]+$")
_HEAD = re.compile(r"[A-Za-z0-9+/_~-]+={0,2}(?=$|[\s\"'`,;)\]}])")


def _rejoin(text: str) -> str:
    """A token wrapped onto the next line is one token: where a line ends in the marker or in token
    characters (either perhaps followed by the `\\` that continues a shell line) and the next begins
    with random-looking token characters, the two are redacted as the one line they were; the second
    half goes into the first half's marker."""
    lines = text.split("\n")
    for at in range(len(lines) - 1):
        first, second = lines[at], lines[at + 1]
        head = _HEAD.match(second)
        if head is None or not looks_random(head.group(0)):
            continue
        first = first.removesuffix("\\")
        joined = first + head.group(0)
        if first.endswith(REDACTED):
            lines[at + 1] = second[head.end() :]
        elif _TAIL.search(first) and (redacted := _redact(joined)).endswith(REDACTED):
            lines[at], lines[at + 1] = redacted, second[head.end() :]
    return "\n".join(lines)


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
