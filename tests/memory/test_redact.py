import pytest

from memory.redact import REDACTED, redact_secrets

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
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_redacts_each_secret_kind_in_running_text(kind: str) -> None:
    secret = SAMPLES[kind]
    out = redact_secrets(f"set it to {secret} and restart")
    assert secret not in out
    assert out == f"set it to {REDACTED} and restart"


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
