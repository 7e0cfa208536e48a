"""Command replies for a terminal: the same words as everywhere, without the Markdown.

Replies are written once, in the Markdown every chat surface renders. A terminal shows that Markdown
as it is (`**`, backticks), so for a terminal reader the registry turns a reply into plain text here.
Everything a person or a record supplied sits inside one code span (`commands.render.code_span`: one
line, no backtick inside), so only the reply's own markup is taken apart and quoted text is kept as
it is — only the control and format characters that could drive the terminal are dropped.
"""

from __future__ import annotations

import re
import unicodedata

# The surfaces that print into a terminal (`switchboard chat`, `switchboard memory …`).
TERMINAL_SURFACES = frozenset({"cli"})

_CODE_SPAN = re.compile(r"`([^`]*)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((\S+?)\)")
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")


def terminal_text(value: str) -> str:
    """`value` without control or format characters: nothing in it can move the cursor or recolour."""
    return "".join(c for c in value if c == "\n" or unicodedata.category(c) not in ("Cc", "Cf"))


def plain_text(markdown: str) -> str:
    """A reply's Markdown as plain text: code spans unwrapped (their text kept verbatim), bold and
    emphasis markers dropped, links written `text (url)`."""
    parts = _CODE_SPAN.split(markdown)  # even: the reply's own words; odd: a code span's text
    for index, part in enumerate(parts):
        if index % 2 == 0:
            part = _EMPHASIS.sub(r"\1", _STRONG.sub(r"\1", _LINK.sub(r"\1 (\2)", part)))
        parts[index] = terminal_text(part)
    return "".join(parts)
