"""When two texts say the same thing: the one normalization restatement and duplicate folding share.

Bytes are not meaning: `**Deploys go through make ship!**` restates `deploys go through make ship`.
The key drops what formatting and punctuation add — case (Unicode case folding after NFKC, so a
full-width or ligature form folds too), punctuation of every script, the markup characters people and
models wrap text in (`**`, backticks, `_`, `~`, `^`, `|`, a `>` opening a line), invisible format
characters — and collapses whitespace. Symbols that carry meaning (`+`, `=`, `<`, `>`, `$`) stay,
so `C++` is not `C`.
"""

from __future__ import annotations

import re
import unicodedata

# Markup symbols outside Unicode's punctuation categories (backtick and caret are Sk, tilde and bar Sm).
_MARKUP = frozenset("`~^|")
_WHITESPACE = re.compile(r"\s+")
# A quote marker opening a line (`> text`), unlike `>` inside a line (`a > b`), is markup.
_QUOTE_MARKER = re.compile(r"^[ \t]*(?:>[ \t]*)+", re.MULTILINE)


def meaning_key(text: str) -> str:
    """The text with case, punctuation, markup and spacing gone: equal keys restate each other."""
    folded = _QUOTE_MARKER.sub("", unicodedata.normalize("NFKC", text).casefold())
    kept = [
        " " if _dropped(char) else char
        for char in folded
        if unicodedata.category(char) != "Cf"  # zero-width and other invisible format characters
    ]
    return _WHITESPACE.sub(" ", "".join(kept)).strip()


def _dropped(char: str) -> bool:
    return char in _MARKUP or unicodedata.category(char).startswith("P")
