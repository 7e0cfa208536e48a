"""Public identifiers that look like secrets pass redaction untouched, and the secrets that share
their encodings or their places still go."""

import random
import string

import pytest

from memory.rules.redact import REDACTED, redact_secrets
from tests.memory.rules.lookalike_corpus import (
    LOOKALIKES,
    LookAlike,
    base58check,
    bech32,
    hash160,
    segwit_address,
)


@pytest.mark.parametrize("case", LOOKALIKES, ids=lambda case: case.kind)
def test_a_public_lookalike_is_left_as_typed(case: LookAlike) -> None:
    assert redact_secrets(case.text) == case.text


def test_the_lookalike_corpus_covers_every_kind_with_several_instances() -> None:
    kinds = {case.kind for case in LOOKALIKES}
    six = {"npm integrity", "s3 object key", "youtube playlist id", "google doc id", "bitcoin address"}
    assert six <= kinds and {"ipfs cid v0", "ipfs cid v1"} <= kinds
    for kind in six:
        assert len({case.value for case in LOOKALIKES if case.kind == kind}) >= 4, kind


def test_the_corpus_bech32_encoder_reproduces_the_bips_test_vectors() -> None:
    """BIP-173's and BIP-350's valid strings: the corpus's addresses are spelled as the spec says."""
    assert bech32("a", []) == "a12uel5l"
    assert bech32("abcdef", list(range(32))) == "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw"
    assert bech32("a", [], 0x2BC830A3) == "a1lqfn3a"
    assert (
        bech32("abcdef", list(range(31, -1, -1)), 0x2BC830A3)
        == "abcdef1l7aum6echk45nj3s0wdvt2fg8x9yrzpqzd3ryx"
    )


def test_an_address_with_one_character_changed_is_judged_by_its_shape_again() -> None:
    """The checksum is what makes an address public: the same shape with a broken checksum is a
    random run."""
    address = base58check(b"\x00", hash160(b"\x02" + bytes(range(32))))
    broken = address[:-1] + ("a" if address[-1] != "a" else "b")
    assert redact_secrets(f"send it to {address} please") == f"send it to {address} please"
    assert redact_secrets(f"send it to {broken} please") == f"send it to {REDACTED} please"


def test_a_segwit_string_with_a_broken_checksum_is_redacted() -> None:
    address = segwit_address("bc", 1, bytes(range(1, 33)))
    broken = address[:-1] + ("q" if address[-1] != "q" else "p")
    assert redact_secrets(f"pay {address} now") == f"pay {address} now"
    assert redact_secrets(f"pay {broken} now") == f"pay {REDACTED} now"


@pytest.mark.parametrize(
    "text",
    [
        "https://example.com/api/Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",  # a token ending its path
        "https://example.com/api/Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA/",
        "https://example.com/hooks/Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA/run",  # named by its segment
        "https://3.basecamp.com/1/integrations/Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA/buckets/2/chats/3/lines",
        "https://api.telegram.org/bot4839574812:AAFD39kkdpWt3ywyRZergyOLMaJhac60qc/getMe",
        "the session id Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",  # an id a credential word qualifies
        "the api key id Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
    ],
)
def test_a_random_token_in_a_url_or_after_a_credential_noun_still_goes(text: str) -> None:
    out = redact_secrets(text)
    assert REDACTED in out and "Zk3pQ9rT2vX7" not in out and "AAFD39kkdp" not in out, out


def test_a_random_path_segment_with_a_segment_after_it_is_a_resource_id() -> None:
    text = "https://example.com/runs/Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA/logs"
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    "template",
    ["key {}", "key: {}", '"Key": "{}"', "--key {}", "salt={}", "sig={}&x=1", "cookie: {}", "secret_key={}"],
)
def test_base64_keys_with_slashes_after_a_key_word_are_still_redacted(template: str) -> None:
    """Seeded draws of standard base64 keys holding `/`: a path of names is kept, base64 is not. At
    most one in 200 gets through (after a bare `key`, four of 978 whose letters read as words, as
    before paths were told apart; after `secret_key=` none, where 32 opening with `/` did)."""
    draws = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "+/"
    keys = [
        key
        for key in (
            "".join(draws.choice(alphabet) for _ in range(draws.choice((24, 32, 40, 44))))
            for _ in range(2400)
        )
        if "/" in key
    ]
    escaped = [key for key in keys if key in redact_secrets(template.format(key))]
    assert len(escaped) * 200 <= len(keys), escaped


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("secret_key=/lz+JMlzr8IDMemaSytMgwQS", "/lz+JMlzr8IDMemaSytMgwQS"),  # base64 opening with `/`
        ("password: /KQXwOdOA6pK6VU9zwUyyMLFi1bAjApE", "KQXwOdOA6pK6VU9zwUyyMLFi1bAjApE"),
    ],
)
def test_a_secret_value_starting_with_a_slash_is_not_taken_for_a_path(text: str, secret: str) -> None:
    assert secret not in redact_secrets(text)


@pytest.mark.parametrize(
    "text",
    [
        "credentials: ~/.aws/credentials",
        "password_file: /run/secrets/db_password",
        "The token endpoint is /oauth/token.",
    ],
)
def test_a_path_after_a_secret_name_is_still_a_path(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    "integrity",
    [
        "sha512-Zk3pQ9rT2vX7yB4nM8wL/1cD6fG5hJ0sA+" + "Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA" * 2,
        "sha256-" + "Zk3pQ9rT2vX7yB4nM8wL/1cD6fG5hJ0sA+Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA==",
    ],
)
def test_a_named_digest_of_the_wrong_length_is_judged_by_its_parts(integrity: str) -> None:
    """The algorithm's name vouches for a digest's length only: anything longer is not one."""
    assert REDACTED in redact_secrets(f"integrity {integrity} in the lockfile")


@pytest.mark.parametrize(
    "text",
    [
        # Keys that vendors document in the middle of a URL's path, a segment after them.
        "curl https://api.day.app/Zk3pQ9rT2vX7yB4nM8wL1c/Deploy/done",  # Bark: /<device key>/<title>/<body>
        "https://cronitor.link/p/Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA/nightly-backup?state=run",  # /p/<api key>/
        "GET https://api.example.com/api/Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA/messages",
        "https://ingest.example.io/v1/Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA/events",
        "https://ntfy.sh/Zk3pQ9rT2vX7yB4nM8wL1cD6/publish",  # a topic name is its only password
        "https://script.google.com/macros/s/AKfycbZk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA/exec",
    ],
)
def test_a_random_path_segment_a_resource_noun_does_not_name_still_goes(text: str) -> None:
    """A segment is a resource id only where the segment before it names a kind of resource
    (`/d/<id>/edit`, `/runs/<id>/logs`): after a host, a version or an API's root it is a key."""
    out = redact_secrets(text)
    assert REDACTED in out and "Zk3pQ9rT2vX7" not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "the password for the file: Zk3pQ9rT2vX7yB4nM8wL1cD6",
        "API token for the playlist: Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
        "the Mailgun key for the object: Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
        "webhook secret for the repo commits: Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
        "zip password, see video Zk3pQ9rT2vX7yB4nM8wL1cD6",
    ],
)
def test_an_id_noun_does_not_vouch_for_a_value_its_clause_calls_a_credential(text: str) -> None:
    """A credential word anywhere in the clause before the noun makes the value a credential, not
    only in the two words right before it."""
    out = redact_secrets(text)
    assert REDACTED in out and "Zk3pQ9rT2vX7" not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "don't commit Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA to git",  # a verb, and commit ids are hex
        "the commit is Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
        "the bearer for CI, id Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
        "login for the shared docs: Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
        "the JWT for staging, file: Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
    ],
)
def test_a_random_run_after_commit_or_in_a_bearer_or_login_clause_still_goes(text: str) -> None:
    out = redact_secrets(text)
    assert REDACTED in out and "Zk3pQ9rT2vX7" not in out, out
