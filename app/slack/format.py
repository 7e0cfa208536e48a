"""Markdown (what models write) → Slack mrkdwn, and splitting long text under Slack's message limits.

Pure functions: the Slack surface streams Markdown as-is (the streaming API renders Markdown) and uses
these only for the `chat.postMessage` fallback and for splitting.
"""

from __future__ import annotations

import re
from collections.abc import Collection

# chat.postMessage truncates long `text`; Slack asks to keep messages under 4,000 characters.
POST_TEXT_LIMIT = 3900
# chat.startStream / appendStream / stopStream accept at most 12,000 characters of markdown per call;
# one streamed message stays under that too.
STREAM_TEXT_LIMIT = 11_000

_FENCE = re.compile(r"^\s*(```|~~~)")
# Slack's own angle-bracket tokens the model may legitimately write: mentions, channels, links.
_SLACK_TOKEN = re.compile(r"<(?:[@#!][^<>\s]+|(?:https?|mailto):[^<>\s]+)>")
# The tokens that notify a whole channel or a user group: text a model wrote (or read, in a file or
# a web page) never pings everyone, so these lose their brackets and the @ keeps its name apart.
# `<!group>` is Slack's legacy spelling of `<!channel>` for a private channel.
_BROADCAST = re.compile(r"<!(channel|here|everyone|group|subteam\^[^<>\s|]*)(?:\|([^<>]*))?>", re.IGNORECASE)
# One person's mention, `<@U…>` or `<@U…|name>` (W… in an Enterprise Grid org).
_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^<>]*))?>")
# How many people an answer may ping that the asker did not name in their message: a reply that
# points to the owner of something pings them; a list of dozens is a planted instruction or a
# directory dump, and from the fourth person on they are named, not notified.
MENTION_CAP = 3
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_LINK = re.compile(r"\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^<>\s|]+)>")
_BOLD_ITALIC = re.compile(r"(\*\*\*|___)(?=\S)(.+?)(?<=\S)\1")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?!\[[ xX]\]\s)")
_TASK = re.compile(r"^(\s*)[-*+]\s+\[([ xX])\]\s+")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")

# Placeholders never produced by model text (private-use characters).
_BOLD_MARK = "\ue000"
_SLOT = "\ue001"


def escape_mrkdwn(text: str) -> str:
    """Slack's three control characters in message text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mentioned_users(text: str) -> frozenset[str]:
    """The people a message's text mentions (`<@U…>`): those its author chose to notify."""
    return frozenset(match.group(1) for match in _USER_MENTION.finditer(text))


def defuse_mentions(text: str, named: Collection[str] = (), cap: int = MENTION_CAP) -> str:
    """Text the bot posts, with the notifications it may carry. `<!channel>`, `<!here>`,
    `<!everyone>`, `<!group>` and a user group's `<!subteam^…>` are always inert text: `@`, an
    invisible word joiner (so Slack reads no mention), then the name. A person's `<@U…>` stays a
    mention when the asker named them (`named`: their own message's mentions, and the asker) or while
    fewer than `cap` other people were pinged before it in the text; past that it is inert the same
    way, as the mention's label or the user id."""

    def inert(label: str) -> str:
        return "@\u2060" + label.lstrip("@")

    def broadcast(match: re.Match[str]) -> str:
        return inert(match.group(2) or match.group(1).split("^")[0])

    pinged: set[str] = set()

    def person(match: re.Match[str]) -> str:
        user = match.group(1)
        if user in named or user in pinged:
            return match.group(0)
        if len(pinged) < cap:
            pinged.add(user)
            return match.group(0)
        return inert(match.group(2) or user)

    return _USER_MENTION.sub(person, _BROADCAST.sub(broadcast, text))


def markdown_to_mrkdwn(markdown: str) -> str:
    """Convert the Markdown a model writes into Slack mrkdwn.

    Code blocks and inline code keep their content (only escaped); headings become bold lines; bold,
    italic, strikethrough, links, images, bullets and task lists get their mrkdwn spelling; tables are
    kept readable inside a code block; Slack mentions and links the model wrote (`<@U…>`, `<https://…>`)
    survive; every other `&`, `<`, `>` is escaped.
    """
    out: list[str] = []
    lines = markdown.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            out.append("```")
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                out.append(escape_mrkdwn(lines[i]))
                i += 1
            out.append("```")
            i += 1  # the closing fence (or past the end of an unclosed block)
            continue
        if _TABLE_ROW.match(line):
            table: list[str] = []
            while i < len(lines) and _TABLE_ROW.match(lines[i]):
                table.append(escape_mrkdwn(lines[i].strip()))
                i += 1
            out.append("```")
            out.extend(table)
            out.append("```")
            continue
        out.append(_convert_line(line))
        i += 1
    return "\n".join(out)


def _convert_line(line: str) -> str:
    if _RULE.match(line):
        return "──────────"
    heading = _HEADING.match(line)
    if heading:
        inner = _convert_inline(heading.group(1)).strip()
        inner = inner.replace(_BOLD_MARK, "")
        return f"*{inner}*" if inner else ""
    task = _TASK.match(line)
    if task:
        box = "☑" if task.group(2) in "xX" else "☐"
        line = f"{task.group(1)}{box} {line[task.end() :]}"
    else:
        line = _BULLET.sub(lambda m: f"{m.group(1)}• ", line, count=1)
    quote = ""
    stripped = line.lstrip()
    if stripped.startswith(">"):
        quote = "> "
        line = stripped[1:].lstrip()
    return quote + _convert_inline(line).replace(_BOLD_MARK, "*")


def _convert_inline(text: str) -> str:
    """Inline Markdown → mrkdwn; protected pieces (code, links, Slack tokens) are swapped out first."""
    slots: list[str] = []

    def keep(piece: str) -> str:
        slots.append(piece)
        return f"{_SLOT}{len(slots) - 1}{_SLOT}"

    text = _INLINE_CODE.sub(lambda m: keep(f"`{escape_mrkdwn(m.group(2))}`"), text)
    text = _IMAGE.sub(lambda m: keep(_link(m.group(2), m.group(1) or m.group(2))), text)
    text = _LINK.sub(lambda m: keep(_link(m.group(2), m.group(1))), text)
    text = _AUTOLINK.sub(lambda m: keep(f"<{m.group(1)}>"), text)
    text = _SLACK_TOKEN.sub(lambda m: keep(m.group(0)), text)
    text = escape_mrkdwn(text)
    text = _BOLD_ITALIC.sub(lambda m: f"{_BOLD_MARK}_{m.group(2)}_{_BOLD_MARK}", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC_STAR.sub(lambda m: f"_{m.group(1)}_", text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    return re.sub(f"{_SLOT}(\\d+){_SLOT}", lambda m: slots[int(m.group(1))], text)


def _link(url: str, label: str) -> str:
    label = escape_mrkdwn(label.replace("|", "¦")).strip()
    if url.startswith(("!", "@")):
        # Slack reads `<!…>` and `<@…>` as a command or a mention, never a link: `[hi](!channel)` would
        # notify the channel, `[hi](@U1)` ping a person past the mention cap, which counts only `<@…>`.
        return f"{label} ({escape_mrkdwn(url)})" if label and label != url else escape_mrkdwn(url)
    url = url.replace(">", "%3E").replace("|", "%7C")
    return f"<{url}|{label}>" if label and label != url else f"<{url}>"


def split_message(text: str, limit: int) -> list[str]:
    """Split `text` into pieces of at most `limit` characters, at the gentlest boundary available.

    Prefers a blank line, then a line break, then a space; a piece that ends inside a ``` code block
    closes it and the next piece reopens it, so every piece renders on its own.
    """
    if limit < 16:
        raise ValueError(f"split limit must be at least 16 characters, got {limit}")
    text = text.strip("\n")
    if not text:
        return []
    pieces: list[str] = []
    reopen = ""
    while text:
        budget = limit - len(reopen)
        if len(text) <= budget:
            pieces.append((reopen + text).rstrip())
            break
        cut = _cut_point(text, budget - 4)  # room to close an open fence
        head, text = text[:cut].rstrip(), text[cut:].lstrip("\n")
        if text.startswith(" "):
            text = text.lstrip(" ")
        piece = reopen + head
        if _inside_fence(piece):
            piece += "\n```"
            reopen = "```\n"
        else:
            reopen = ""
        pieces.append(piece)
    return [piece for piece in pieces if piece.strip()]


def _cut_point(text: str, budget: int) -> int:
    """Where to cut: the last blank line, line break or space past a third of the budget, else the
    last edge of a backtick run there (a fence or code span glued to a word); failing both, the same
    anywhere in the budget. A word is cut only when it alone fills the budget."""
    window = text[:budget]
    tick = _last_backtick_edge(text, budget)
    for floor in (budget // 3, -1):
        for boundary in ("\n\n", "\n", " "):
            at = window.rfind(boundary)
            if at > floor:
                return at + len(boundary)
        if tick > floor:
            return tick
    return budget


def _last_backtick_edge(text: str, budget: int) -> int:
    """The last cut point within `budget` with a backtick on either side (0 when there is none)."""
    return next((at for at in range(budget, 0, -1) if "`" in text[at - 1 : at + 1]), 0)


def _inside_fence(piece: str) -> bool:
    fences = sum(1 for line in piece.split("\n") if line.lstrip().startswith("```"))
    return fences % 2 == 1
