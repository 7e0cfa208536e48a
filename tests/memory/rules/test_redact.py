import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.rules.redact import REDACTED, normalize_untrusted, redact_secrets
from tests.memory.redact_corpus import BENIGN, SECRET_CASES, SecretCase
from tests.memory.rules.vendor_corpus import VENDOR_CASES

# Realistic shapes, made-up values.
SAMPLES = {
    "slack bot token": "xoxb-2223334445-5556667778889-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack user token": "xoxp-2223334445-5556667778-9990001112-0f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "slack app token": "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef0123456789abcdef0123456789",
    "anthropic key": "sk-ant-api03-" + "Ab1_" * 20 + "xyzAA",
    "openai key": "sk-proj-" + "Zy9x" * 12,
    "openai legacy key": "sk-" + "a1B2c3D4e5F6" * 4,
    "github classic token": "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8",
    "github oauth token": "gho_" + "Q" * 36,
    "github app token": "ghs_" + "9z" * 18,
    "github fine-grained token": "github_pat_11ABCDEFG0" + "x" * 12 + "_" + "Y" * 59,
    "aws access key id": "AKIAIOSFODNN7EXAMPLE",
    "braintree access token": "access_token$production$x7k2m9q4w8r1t5y3$0f1e2d3c4b5a69788796a5b4c3d2e1f0",
}

# Characters that draw nothing: zero-width space/non-joiner/joiner, word joiner, BOM, soft hyphen,
# bidi marks, embeddings, overrides and isolates, the Mongolian vowel separator, a variation selector,
# the combining grapheme joiner, a tag character, a private-use character, a NUL.
INVISIBLE = (
    "\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e"
    "\u2066\u2067\u2068\u2069\u180e\ufe0f\u034f\U000e0041\ue000\x00"
)


def _escapes(case: SecretCase, out: str) -> list[str]:
    return [secret for secret in case.secrets if secret in out]


def test_secret_corpus_has_no_escapes() -> None:
    escaped = {case.kind: _escapes(case, redact_secrets(case.text)) for case in SECRET_CASES}
    escaped = {kind: parts for kind, parts in escaped.items() if parts}
    print(f"secret corpus: {len(SECRET_CASES)} forms, {len(escaped)} escaped")
    assert len(SECRET_CASES) >= 40, f"the corpus has only {len(SECRET_CASES)} secret forms"
    assert not escaped, f"{len(escaped)} of {len(SECRET_CASES)} secret forms escaped: {escaped}"


def test_benign_corpus_is_at_most_one_percent_altered() -> None:
    altered = [(text, out) for text in BENIGN if (out := redact_secrets(text)) != text]
    print(f"benign corpus: {len(BENIGN)} sentences, {len(altered)} altered")
    assert len(BENIGN) >= 200, f"the corpus has only {len(BENIGN)} benign sentences"
    assert len(altered) <= len(BENIGN) // 100, (
        f"{len(altered)} of {len(BENIGN)} benign sentences altered: {altered}"
    )


@given(case=st.sampled_from(SECRET_CASES), data=st.data())
def test_invisible_characters_inserted_anywhere_in_a_secret_never_let_it_through(
    case: SecretCase, data: st.DataObject
) -> None:
    secret = max(case.secrets, key=len)
    start = case.text.index(secret) if secret in case.text else 0
    end = start + len(secret)
    positions = data.draw(st.lists(st.integers(start, end), min_size=1, max_size=6))
    chars = data.draw(st.lists(st.sampled_from(INVISIBLE), min_size=len(positions), max_size=len(positions)))
    text = case.text
    for position, char in sorted(zip(positions, chars, strict=True), reverse=True):
        text = text[:position] + char + text[position:]
    out = redact_secrets(text)
    assert not _escapes(case, out), f"{case.kind}: {out!r}"
    assert not any(char in out for char in INVISIBLE if char != "\u200d" and char != "\ufe0f")


@given(
    text=st.text(max_size=200)
    | st.sampled_from([c.text for c in SECRET_CASES] + [c.text for c in VENDOR_CASES] + list(BENIGN))
)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_secrets(text)
    assert redact_secrets(once) == once


@given(text=st.text(max_size=200))
def test_normalized_text_has_no_invisible_or_control_character_left(text: str) -> None:
    out = normalize_untrusted(text)
    assert not any(char in out for char in INVISIBLE if char not in "\u200d\ufe0f")
    assert all(char in "\n\t" or not (char < " " or "\x7f" <= char <= "\x9f") for char in out)


def test_normalization_keeps_newlines_tabs_and_emoji_sequences() -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    heart = "\u2764\ufe0f"
    assert normalize_untrusted(f"a\tb\r\nc\rd {family} {heart}") == f"a\tb\nc\nd {family} {heart}"


def test_normalization_drops_a_joiner_next_to_ascii() -> None:
    assert normalize_untrusted("ab\u200dcd \U0001f468\u200dx") == "abcd \U0001f468x"


def _joiner_kept_per_character(text: str, at: int) -> bool:
    """The joiner rule spelled out one character at a time (the slow, obvious reading)."""

    def emoji_side(char: str) -> bool:
        return bool(char) and not char.isascii() and not char.isspace() and not char.isalnum()

    def neighbour(index: int, step: int) -> str:
        while 0 <= index < len(text) and text[index] in JOINERS:
            index += step
        return text[index] if 0 <= index < len(text) else ""

    if text[at] == "\u200d":
        return emoji_side(neighbour(at - 1, -1)) and emoji_side(neighbour(at + 1, 1))
    return at > 0 and text[at - 1] not in JOINERS and emoji_side(text[at - 1])


JOINERS = "\u200d\ufe0e\ufe0f\U000e0100"


@given(text=st.text(alphabet=st.sampled_from([*JOINERS, "a", "1", " ", "\U0001f600", "\u2764", "\u30c8"])))
def test_each_joiner_and_selector_in_a_run_is_kept_exactly_when_its_neighbours_say_so(text: str) -> None:
    expected = "".join(
        c for at, c in enumerate(text) if c not in JOINERS or _joiner_kept_per_character(text, at)
    )
    assert normalize_untrusted(text) == expected


def test_a_long_joiner_run_is_dropped_between_letters_and_kept_between_emoji() -> None:
    run = "\u200d" * 20_000
    assert normalize_untrusted(f"ab{run}cd") == "abcd"
    assert (
        normalize_untrusted(f"deploy notes \U0001f600{run}\U0001f600")
        == f"deploy notes \U0001f600{run}\U0001f600"
    )
    assert redact_secrets(f"ghp_A1b2C3d4E5{run}A1b2C3d4E5A1b2C3d4E5f6G7h8") == REDACTED


def test_full_width_and_compatibility_forms_are_folded_before_matching() -> None:
    out = redact_secrets("ｇｈｐ＿" + "Ａ1ｂ2Ｃ3ｄ4Ｅ5" * 3 + "f6G7h8")
    assert out == REDACTED


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_redacts_each_secret_kind_in_running_text(kind: str) -> None:
    secret = SAMPLES[kind]
    out = redact_secrets(f"set it to {secret} and restart")
    assert secret not in out
    assert out == f"set it to {REDACTED} and restart"


def test_a_zapier_catch_hook_keeps_its_host_and_account_and_loses_its_hook_id() -> None:
    text = "the form posts to https://hooks.zapier.com/hooks/catch/4815162/o2xk9qa/ on submit"
    assert redact_secrets(text) == (
        f"the form posts to https://hooks.zapier.com/hooks/catch/4815162/{REDACTED}/ on submit"
    )


def test_redacts_an_assignment_value_but_keeps_the_name_and_the_quotes() -> None:
    assert redact_secrets('DB_PASSWORD=hunter2 and "password": "x y"') == (
        f'DB_PASSWORD={REDACTED} and "password": "{REDACTED}"'
    )


def test_leaves_references_placeholders_and_code_alone() -> None:
    for text in ("password: ${DB_PASSWORD}", "token = get_token(scope)", "password: str", "max_tokens = 800"):
        assert redact_secrets(text) == text


def test_redacts_authorization_bearer_values_but_keeps_the_header_name() -> None:
    out = redact_secrets("curl -H 'Authorization: Bearer abc.def-ghi_jkl123' https://api")
    assert "abc.def-ghi_jkl123" not in out
    assert "Authorization: Bearer [REDACTED]" in out


def test_redacts_pem_private_key_blocks() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
    out = redact_secrets(f"key:\n{pem}\nthanks")
    assert "MIIEow" not in out and "BEGIN" not in out
    assert out == f"key:\n{REDACTED}\nthanks"


def test_redacts_an_unterminated_pem_block_to_the_end() -> None:
    out = redact_secrets("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk")
    assert "b3Blbn" not in out


def test_redacts_credentials_in_urls_but_keeps_scheme_and_host() -> None:
    out = redact_secrets("DATABASE_URL=postgres://admin:hunter2@db.internal:5432/app")
    assert "hunter2" not in out and "admin" not in out
    assert out == f"DATABASE_URL=postgres://{REDACTED}@db.internal:5432/app"


@pytest.mark.parametrize(
    "text",
    [
        "We deploy on Tuesdays; CI runs `make test` on main.",
        "The task-runner key is skipped in sk-learn docs",  # short sk- word
        "see https://github.com/owner/repo/pull/12 and https://example.com/a:b",
        "ghp_short is not a token",
        "AKIA is a prefix, AKIAshort too",
        "bearer of bad news",
        "email me at someone@example.com",
        "",
    ],
)
def test_ordinary_text_passes_unchanged(text: str) -> None:
    assert redact_secrets(text) == text


def test_a_joiner_after_a_combining_mark_cannot_hide_the_rest_of_a_key() -> None:
    # Found by the property test above: the joiner kept the mark from being dropped before NFKC composed
    # it into É, which then split the AWS key id at its seventh character.
    text = "key AKIAIOSFODNN7E\u0301\u200dXAMPLE"
    assert redact_secrets(text) == "key [REDACTED]"


@pytest.mark.parametrize(
    "text",
    [
        "export SLACK_BOT_TOKEN=xoxb-2223334445-5556667778889-AbCdEf\\\nGhIjKlMnOpQrStUvWx",
        'curl -H "Authorization: Bearer Zk3pQ9rT2vX7yB4n\\\nM8wL1cD6fG5hJ0sA" https://api.example',
    ],
)
def test_a_token_continued_onto_the_next_line_by_a_backslash_is_redacted_whole(text: str) -> None:
    out = redact_secrets(text)
    assert "GhIjKlMnOpQrStUvWx" not in out and "M8wL1cD6fG5hJ0sA" not in out
