"""Credential context an attack review found escaping: program flags, Java's keytool, XML settings
named by an attribute, and generated passphrases in prose. Each form is its vendor's documented
command or file shape, with made-up values (the corpus in tests/memory/redact_corpus.py holds them too)."""

import pytest

from memory.rules.redact import REDACTED, redact_secrets


def redacted_away(text: str, secret: str) -> bool:
    """The secret is gone from the redacted text, and the marker stands in its place."""
    out = redact_secrets(text)
    return secret not in out and REDACTED in out


def test_keytool_store_and_key_password_flags_are_redacted_whatever_the_value() -> None:
    text = "keytool -importkeystore -srcstorepass changeit -deststorepass myKeypass -destkeypass hunter"
    assert redact_secrets(text) == text.replace("changeit", REDACTED).replace("myKeypass", REDACTED).replace(
        "hunter", REDACTED
    )


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("sqlcmd -S tcp:db,1433 -U sa -P Winter2026sa -Q 'select 1'", "Winter2026sa"),
        ("bcp db.dbo.t out t.dat -S db -U sa -PWinter2026bc", "Winter2026bc"),
        ("az login -u ops@contoso.example -p Winter2026az", "Winter2026az"),
        ("mongosh mongodb://db -u admin -p Winter2026mg", "Winter2026mg"),
        ("ldapsearch -x -D cn=admin,dc=example,dc=org -w Winter2026ld -b dc=example,dc=org", "Winter2026ld"),
        ("ldapmodify -D cn=admin -wWinter2026lm -f change.ldif", "Winter2026lm"),
    ],
)
def test_the_password_flag_of_sqlcmd_az_login_mongosh_and_the_ldap_tools_is_redacted(
    text: str, secret: str
) -> None:
    assert redacted_away(text, secret)


def test_samba_user_percent_password_is_redacted_keeping_the_user() -> None:
    assert redact_secrets("smbclient //fs/share -U alice%Winter2026sm -c ls") == (
        f"smbclient //fs/share -U alice%{REDACTED} -c ls"
    )


@pytest.mark.parametrize(
    "text",
    [
        '<add key="DbPassword" value="Winter2026nt" />',
        "<add key='ApiToken' value='Winter2026tk'/>",
        '<property name="password" value="Winter2026sp"/>',
        '<add name="smtp" key="smtp.password" value="Winter2026sm"/>',
    ],
)
def test_an_xml_element_naming_a_secret_by_key_or_name_has_its_value_attribute_redacted(text: str) -> None:
    assert redacted_away(text, "Winter2026")


def test_a_passphrase_of_joined_words_after_the_password_is_is_redacted() -> None:
    assert (
        redact_secrets("the wifi password is purple-monkey-dishwasher.")
        == f"the wifi password is {REDACTED}."
    )


@pytest.mark.parametrize(
    "text",
    [
        "the password is case-sensitive",
        "the password is up-to-date",
        "the password is state-of-the-art",
        '<add key="LogLevel" value="Debug"/>',
        '<add key="DbPassword" value="${DB_PASSWORD}"/>',
        "keytool -list -keystore ca.jks -storepass $STOREPASS",
        "ldapsearch -x -b dc=example,dc=org -W",
        "sqlcmd -S db -E -Q 'select 1'",
        "smbclient //fs/share -U alice%$SMB_PASSWORD",
    ],
)
def test_prose_settings_and_references_in_those_forms_are_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "https://b.s3.amazonaws.com/k.pdf?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
            "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
        ),
        ("https://x.example/cb?pwd=/home/ci&token=hunter2hunter2hunter2", "hunter2hunter2hunter2"),
        (
            "https://x.example/cb?token=${TOKEN}&api_key=Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA",
            "Zk3pQ9rT2vX7yB4nM8wL",
        ),
    ],
)
def test_a_query_parameter_after_one_whose_value_is_kept_is_still_read_on_its_own(
    text: str, secret: str
) -> None:
    assert secret not in redact_secrets(text)


def test_an_ampersand_inside_a_password_stays_part_of_it() -> None:
    assert redact_secrets("DB_PASSWORD=p&ssw0rd&more") == f"DB_PASSWORD={REDACTED}"


def test_a_totp_secret_in_an_otpauth_uri_is_redacted() -> None:
    uri = "otpauth://totp/ACME:alice@acme.example?secret=JBSWY3DPEHPK3PXP&issuer=ACME&digits=6"
    assert (
        redact_secrets(uri)
        == f"otpauth://totp/ACME:alice@acme.example?secret={REDACTED}&issuer=ACME&digits=6"
    )


def test_a_query_parameter_a_strong_word_names_is_redacted_whatever_its_length() -> None:
    assert redact_secrets("https://hooks.example/in?secret=swordfish&channel=ops") == (
        f"https://hooks.example/in?secret={REDACTED}&channel=ops"
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example/v1?page_token=2",
        "https://x.example/?auth=oauth2",
        "https://x.example/?token=${T}",
    ],
)
def test_a_query_parameter_that_is_a_number_a_scheme_or_a_reference_is_left_alone(url: str) -> None:
    assert redact_secrets(url) == url


SEED = "witch collapse practice feed shame open despair creek road again ice least"


@pytest.mark.parametrize(
    "text",
    [
        f"mnemonic: {SEED}",
        f'my seed phrase is "{SEED}"',
        f"BACKUP PHRASE = {SEED}.",
        f"seed words: {SEED.replace(' ', ', ')}",
        f"recovery phrase: {SEED} {SEED}",  # 24 words
    ],
)
def test_a_wallet_seed_phrase_after_the_words_that_name_it_is_redacted(text: str) -> None:
    assert redacted_away(text, "collapse")


@pytest.mark.parametrize(
    "text",
    [
        "the seed phrase is stored in the vault and never leaves the hardware module",
        "mnemonic: a way to remember a list, like the planets",
        f"seed phrase: {' '.join(SEED.split()[:11])}",  # not a mnemonic's length
        f"seed phrase: {SEED} and then some more words follow here",  # the clause goes on
    ],
)
def test_prose_about_seed_phrases_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "I changed my password to Summer2026!",
        "set the wifi password to Summer2026",
        "resetting the admin password to Summer2026.",
    ],
)
def test_a_password_set_to_a_value_in_prose_is_redacted(text: str) -> None:
    assert redacted_away(text, "Summer2026")


@pytest.mark.parametrize(
    "text",
    ["the password for the db: Summer2026", "password for prod db -> Summer2026", "the pw is Summer2026"],
)
def test_a_password_after_a_for_clause_and_its_separator_or_after_pw_is_is_redacted(text: str) -> None:
    assert redacted_away(text, "Summer2026")


@pytest.mark.parametrize(
    "text",
    [
        "set the password to something stronger",
        "I changed my password to match the policy",
        "set password to expire",
        "the password for the db: see the vault",
        "the password for staging: rotate it monthly",
        "pw is wrong",
        "the password manager",
    ],
)
def test_prose_about_setting_a_password_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "requests.get('https://api.github.com/user', auth=('user', 'Winter2026'))",
        "httpx.get(url, auth=['user', 'Winter2026'])",
        "requests.get(url, auth=HTTPBasicAuth('user', 'Winter2026'))",
        "HTTPDigestAuth('user', 'Winter2026')",
        'var cred = new NetworkCredential("ops", "Winter2026", "CONTOSO");',
        "server.login('ops@example.com', 'Winter2026')",
        "ftp.login('ops', 'Winter2026')",
    ],
)
def test_a_quoted_password_after_a_quoted_user_in_a_credential_call_is_redacted(text: str) -> None:
    assert redacted_away(text, "Winter2026")


@pytest.mark.parametrize(
    "text",
    [
        "server.login(sender_email, password)",
        "requests.get(url, auth=(user, token))",
        "session.auth = HTTPBasicAuth(username, password)",
        'new NetworkCredential(userName, securelyStoredPassword, "CONTOSO")',
    ],
)
def test_a_credential_call_given_variables_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    "text",
    [
        '$Secure_String_Pwd = ConvertTo-SecureString "Winter2026" -AsPlainText -Force',
        "$s = ConvertTo-SecureString -AsPlainText -Force -String 'Winter2026'",
    ],
)
def test_convertto_securestring_from_plain_text_is_redacted(text: str) -> None:
    assert redacted_away(text, "Winter2026")


@pytest.mark.parametrize(
    "text",
    [
        "echo 'Winter2026' | sudo -S apt-get update",
        "printf '%s\\n' 'Winter2026' | sudo --stdin -p '' -v",
        'echo "Winter2026" | passwd --stdin ops',
    ],
)
def test_a_password_echoed_into_a_program_reading_standard_input_is_redacted(text: str) -> None:
    assert redacted_away(text, "Winter2026")


def test_chpasswd_input_keeps_the_user_and_loses_the_password() -> None:
    assert redact_secrets("echo 'ops:Winter2026' | chpasswd") == f"echo 'ops:{REDACTED}' | chpasswd"


@pytest.mark.parametrize(
    "text",
    [
        "echo $SUDO_PASSWORD | sudo -S apt-get update",
        'ConvertTo-SecureString "$plain" -AsPlainText -Force',
        "echo hello | sudo -s",
        "echo done | tee -a deploy.log",
        "net use k: \\\\fs01\\projects * /user:CONTOSO\\ops",
    ],
)
def test_a_variable_a_prompt_or_another_pipe_in_those_commands_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


def test_usermod_password_flag_is_redacted() -> None:
    assert redacted_away("usermod -p '$6$Xk2mP9qR$Winter2026' ops", "Winter2026")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("htpasswd -b /usr/web/.htpasswd-all jones Winter2026", "htpasswd -b /usr/web/.htpasswd-all jones "),
        ("htpasswd -c -B -C 10 -b .htpasswd jones Winter2026", ".htpasswd jones "),
        ("htpasswd -nb jones Winter2026", "htpasswd -nb jones "),
    ],
)
def test_htpasswd_batch_mode_password_is_redacted_keeping_file_and_user(text: str, kept: str) -> None:
    assert redacted_away(text, "Winter2026") and kept in redact_secrets(text)


@pytest.mark.parametrize(
    "text", ["rabbitmqctl add_user janeway Winter2026", "rabbitmqctl change_password janeway Winter2026"]
)
def test_rabbitmqctl_user_password_argument_is_redacted(text: str) -> None:
    assert redact_secrets(text) == text.replace("Winter2026", REDACTED)


@pytest.mark.parametrize(
    "text",
    [
        "net use k: \\\\fs01\\projects Winter2026 /user:CONTOSO\\ops",
        "net use \\\\fs01\\ipc$ /user:ops Winter2026",
    ],
)
def test_net_use_password_argument_is_redacted(text: str) -> None:
    assert redacted_away(text, "Winter2026")


@pytest.mark.parametrize(
    "text",
    [
        "login with admin/hunter2",
        "credentials admin:hunter2",
        "the login is root:toor",
        "logged in as ops@example.com/Winter2026!",
        "creds: deploy/1234",
    ],
)
def test_a_user_and_password_pair_after_login_words_is_redacted(text: str) -> None:
    password = text.rsplit("/", 1)[-1].rsplit(":", 1)[-1].rstrip("!")
    assert redacted_away(text, password)


@pytest.mark.parametrize(
    "text",
    [
        "log in with Google/GitHub",
        "sign in with email/password",
        "login at 10:30",
        "login 10:30:00 today",
        "login with https://sso.example.com",
        "login with user/pass",
    ],
)
def test_login_words_before_alternatives_placeholders_times_or_urls_are_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


def test_a_python_triple_quoted_password_is_redacted() -> None:
    assert redact_secrets('password = """hunter2"""') == f'password = """{REDACTED}"""'


@pytest.mark.parametrize("text", ["DB_PASSWORD=Tr0ub&dor=3horse", "password: hunter2&x=Staple42battery"])
def test_a_password_holding_an_ampersand_and_an_equals_sign_is_redacted_whole(text: str) -> None:
    assert REDACTED in redact_secrets(text) and "=3horse" not in redact_secrets(text)
    assert "Staple42battery" not in redact_secrets(text)
