"""Text as redaction must see it: one canonical spelling, nothing invisible, escapes decoded on demand.

`normalize_untrusted` runs before any matching (NFKC, then every format, control, private-use,
unassigned and invisible filler character dropped), so a token split by a zero-width space or a bidi
mark, or spelled in full-width letters, is matched whole; nothing downstream strips a character that
redaction did not see. `decode_escapes` undoes HTML entities and percent-escapes, which a secret can
hide behind (`ghp_abc&#8203;def`, `password%3Dhunter2`); redaction looks at a line's decoded spelling
only to find what to redact, so ordinary `&amp;` or `%20` in text that holds no secret is left as it was.
"""

from __future__ import annotations

import html
import re
import unicodedata
from urllib.parse import unquote

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
    # Joiners are settled before NFKC too: a joiner left between a letter's combining mark and the next
    # letter would keep the mark from being dropped, and NFKC would then compose it into the letter.
    text = _settle_joiners(_drop(text))
    text = unicodedata.normalize("NFKC", _drop_marks(text))
    text = _settle_joiners(_drop(text))
    return _drop_marks(text)


def _settle_joiners(text: str) -> str:
    return _JOINER_RUN.sub(_joiner_run, text) if _JOINER_RUN.search(text) else text


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


# An HTML entity (named, decimal or hex) or a percent-escape: what `decode_escapes` undoes.
ESCAPE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});|%[0-9A-Fa-f]{2}")


def decode_escapes(text: str) -> str:
    """HTML entities and percent-escapes decoded once, then normalized (an entity may spell an
    invisible character or a line break)."""
    if "&" in text:
        text = html.unescape(text)
    if "%" in text:
        text = unquote(text, errors="replace")
    return normalize_untrusted(text)
