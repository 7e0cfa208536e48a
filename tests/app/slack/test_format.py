"""Markdown → mrkdwn and message splitting (pure)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from app.slack.format import MENTION_CAP, defuse_mentions, markdown_to_mrkdwn, mentioned_users, split_message


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __bold__", "*bold* and *bold*"),
        ("*italic* stays italic", "_italic_ stays italic"),
        ("***both***", "*_both_*"),
        ("~~gone~~", "~gone~"),
        ("# Title", "*Title*"),
        ("### **Already bold** heading", "*Already bold heading*"),
        ("see [the docs](https://x.dev/a_b)", "see <https://x.dev/a_b|the docs>"),
        ("![diagram](https://x.dev/d.png)", "<https://x.dev/d.png|diagram>"),
        ("<https://y.dev> stays a link", "<https://y.dev> stays a link"),
        ("ping <@U123> in <#C1|general> <!here>", "ping <@U123> in <#C1|general> <!here>"),
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("- one\n* two\n  + nested", "• one\n• two\n  • nested"),
        ("1. first\n2. second", "1. first\n2. second"),
        ("- [ ] todo\n- [x] done", "☐ todo\n☑ done"),
        ("> quoted **words**", "> quoted *words*"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("---", "──────────"),
    ],
)
def test_markdown_becomes_slack_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert markdown_to_mrkdwn(markdown) == mrkdwn


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("deploy now <!channel>", "deploy now @\u2060channel"),
        ("<!here|here> look", "@\u2060here look"),
        ("<!everyone>", "@\u2060everyone"),
        ("<!CHANNEL>", "@\u2060CHANNEL"),
        ("in a private channel <!group>", "in a private channel @\u2060group"),
        ("ask <!subteam^S0614TZR7|@oncall>", "ask @\u2060oncall"),
        ("ask <!subteam^S0614TZR7>", "ask @\u2060subteam"),
    ],
)
def test_a_broadcast_mention_becomes_inert_text(text: str, shown: str) -> None:
    assert defuse_mentions(text) == shown


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("[read this](!channel)", "read this (!channel)"),
        ("![x](!here)", "x (!here)"),
        ("[team](!subteam^S0614TZR7)", "team (!subteam^S0614TZR7)"),
        ("[!everyone](!everyone)", "!everyone"),
    ],
)
def test_a_markdown_link_to_a_broadcast_target_is_text_not_a_mention(markdown: str, mrkdwn: str) -> None:
    assert markdown_to_mrkdwn(defuse_mentions(markdown)) == mrkdwn


@pytest.mark.parametrize("markdown", ["[dave](@U4)", "![x](@W5)", "[erin](<@U6>)", "[ops](@U7|ops)"])
def test_a_markdown_link_to_a_person_is_text_never_a_ping_the_cap_cannot_count(markdown: str) -> None:
    # `[a](@U1) [b](@U2) [c](@U3) [d](@U4)` would otherwise ping four people the asker never named.
    shown = markdown_to_mrkdwn(defuse_mentions(markdown, cap=0))
    assert "<@" not in shown


def test_a_person_a_channel_a_link_and_a_date_are_left_as_they_are() -> None:
    text = "ask <@U123> in <#C1|general>, see <https://x.dev|docs> by <!date^1392734382^{date}|Feb 18>"
    assert defuse_mentions(text) == text


def test_past_three_people_the_asker_did_not_name_a_mention_is_inert_text() -> None:
    text = "ask <@U1>, <@U2>, <@U3|carol>, <@U4|dave> and <@W5>"
    assert MENTION_CAP == 3
    assert defuse_mentions(text) == "ask <@U1>, <@U2>, <@U3|carol>, @\u2060dave and @\u2060W5"


def test_the_people_the_asker_named_stay_mentions_beside_the_three_others() -> None:
    text = "<@U9> <@U1> <@U2> <@U3> <@U4> <@U8>"
    assert defuse_mentions(text, named={"U8", "U9"}) == "<@U9> <@U1> <@U2> <@U3> @\u2060U4 <@U8>"


def test_a_person_mentioned_again_is_no_new_ping_and_stays_a_mention() -> None:
    text = "<@U1> <@U1> <@U2> <@U1> <@U3> <@U4>"
    assert defuse_mentions(text) == "<@U1> <@U1> <@U2> <@U1> <@U3> @\u2060U4"


def test_with_no_cap_only_the_named_people_stay_mentions() -> None:
    assert defuse_mentions("<@U1> and <@U2>", named={"U2"}, cap=0) == "@\u2060U1 and <@U2>"


def test_the_people_a_message_mentions_are_read_from_its_text() -> None:
    text = "<@U0BOT> loop in <@U1|ann> and <@W2>, not <!here> or <#C1>"
    assert mentioned_users(text) == {"U0BOT", "U1", "W2"}


def test_code_keeps_its_content_and_loses_only_the_language_tag() -> None:
    markdown = "Run:\n```python\nif a < b and x**2:\n    print(*args)\n```\nand `a*b*c` inline"
    assert markdown_to_mrkdwn(markdown) == (
        "Run:\n```\nif a &lt; b and x**2:\n    print(*args)\n```\nand `a*b*c` inline"
    )


def test_a_table_is_kept_readable_in_a_code_block() -> None:
    markdown = "| name | port |\n|---|---|\n| api | 8080 |\nafter"
    assert markdown_to_mrkdwn(markdown) == "```\n| name | port |\n|---|---|\n| api | 8080 |\n```\nafter"


def test_an_unclosed_code_block_is_closed() -> None:
    assert markdown_to_mrkdwn("```\nopen") == "```\nopen\n```"


def test_short_text_is_one_piece() -> None:
    assert split_message("hello", 100) == ["hello"]
    assert split_message("\n\n", 100) == []


def test_splitting_prefers_paragraphs_then_lines_then_spaces() -> None:
    text = "first paragraph here\n\nsecond paragraph here"
    assert split_message(text, 30) == ["first paragraph here", "second paragraph here"]
    assert split_message("line one is here\nline two is here", 24) == ["line one is here", "line two is here"]
    assert split_message("word " * 10, 20) == ["word word word", "word word word", "word word word word"]


def test_a_piece_that_ends_inside_a_code_block_closes_it_and_the_next_reopens_it() -> None:
    code = "\n".join(f"line {n}" for n in range(40))
    pieces = split_message(f"intro\n```\n{code}\n```\noutro", 120)
    assert len(pieces) > 2
    for piece in pieces:
        assert len(piece) <= 120
        assert piece.count("```") % 2 == 0, piece
    assert pieces[1].startswith("```\n")


def test_a_limit_too_small_to_hold_a_fence_is_refused() -> None:
    with pytest.raises(ValueError, match="split limit"):
        split_message("text", 8)


@example(text="```````````**````", limit=16)
@example(text="a bbbbbbbbbbb ccc", limit=16)
@given(
    text=st.text(alphabet=st.sampled_from("ab \n`#*"), max_size=600),
    limit=st.integers(min_value=16, max_value=200),
)
def test_every_piece_fits_the_limit_and_no_word_is_lost(text: str, limit: int) -> None:
    """No character of a word is lost, and a word is split only when it alone is longer than a piece
    can hold (the limit less a reopened and a closing fence)."""
    pieces = split_message(text, limit)
    assert all(len(piece) <= limit for piece in pieces)
    words = text.replace("`", " ").split()
    parts = " ".join(pieces).replace("`", " ").split()
    assert "".join(parts) == "".join(words)
    for word in words:
        if len(word) > limit - 8:
            joined = ""
            while len(joined) < len(word):
                joined += parts.pop(0)
            assert joined == word
        else:
            assert parts.pop(0) == word
