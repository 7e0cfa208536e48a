"""The redaction corpora: secret forms that must never escape, and engineering prose that must pass
unchanged. Shared by tests/memory/test_redact.py and bench/bench_redact.py. Every value is made up."""

from __future__ import annotations

from dataclasses import dataclass

_HEX32 = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
_B62 = "Zk3pQ9rT2vX7yB4nM8wL1cD6fG5hJ0sA"  # 32 random-looking characters
_PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK"
)


@dataclass(frozen=True, slots=True)
class SecretCase:
    kind: str
    text: str
    secrets: tuple[str, ...]  # each must be absent from the redacted text


def _case(kind: str, text: str, *secrets: str) -> SecretCase:
    return SecretCase(kind, text, secrets)


SLACK_BOT = "xoxb-2223334445-5556667778889-AbCdEfGhIjKlMnOpQrStUvWx"
GITHUB_CLASSIC = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
SECRET_CASES: tuple[SecretCase, ...] = (
    # Slack
    _case("slack bot token", f"set SLACK_BOT_TOKEN to {SLACK_BOT} and restart", SLACK_BOT),
    _case(
        "slack user token",
        f"my token xoxp-2223334445-5556667778-9990001112-{_HEX32}",
        f"5556667778-9990001112-{_HEX32}",
    ),
    _case("slack app token", "app token: xapp-1-A0123456789-1234567890123-" + _HEX32 * 2, _HEX32),
    _case(
        "slack refresh token",
        "refresh with xoxe-1-My0xLTIwMjMtMTIzNDU2Nzg5MC1hYmNkZWY",
        "My0xLTIwMjMtMTIzNDU2Nzg5MC1hYmNkZWY",
    ),
    _case(
        "slack config token",
        "config token xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAtYWJjZGVm",
        "Mi0yLTEyMzQ1Njc4OTAtYWJjZGVm",
    ),
    _case(
        "slack legacy xoxr token", "old xoxr-8822334455-99aabbccddeeff00 token", "8822334455-99aabbccddeeff00"
    ),
    _case(
        "slack token in upper case",
        "paste XOXB-2223334445-5556667778889-ABCDEFGHIJKLMNOPQRSTUVWX here",
        "5556667778889-ABCDEFGHIJKLMNOPQRSTUVWX",
    ),
    _case(
        "slack webhook url",
        "alerts go to https://hooks.slack.com/services/T0123ABCD/B0456EFGH/" + _B62[:24],
        "T0123ABCD/B0456EFGH",
        _B62[:24],
    ),
    _case(
        "slack webhook url in upper case",
        "HTTPS://HOOKS.SLACK.COM/SERVICES/T0123ABCD/B0456EFGH/ABCDEFGHIJKLMNOPQRSTUVWX",
        "ABCDEFGHIJKLMNOPQRSTUVWX",
    ),
    _case(
        "slack workflow webhook",
        "trigger https://hooks.slack.com/workflows/T0123ABCD/A0456EFGH/123456789012345678/" + _B62[:24],
        _B62[:24],
    ),
    # GitHub
    _case("github classic token", f"export GITHUB_TOKEN={GITHUB_CLASSIC}", GITHUB_CLASSIC),
    _case("github oauth token", "gho_" + "Q7r" * 12 + " was leaked", "Q7r" * 12),
    _case("github user-to-server token", "token ghu_" + _B62 + "wxyz", _B62),
    _case("github app installation token", "the app got ghs_" + _B62 + "ABCD", _B62),
    _case("github refresh token", "ghr_" + _B62 + "9876" + " refresh", _B62),
    _case(
        "github fine-grained token",
        "use github_pat_11ABCDEFG0" + "x7Y" * 7 + "_" + _B62 + "abcdefghijklmnopqrstuvwxyz0",
        _B62,
    ),
    _case("github app token in an upper-case note", "GHS_" + _B62.upper() + "WXYZ", _B62.upper()),
    # Model providers
    _case("openai key", "OPENAI_API_KEY=sk-" + "a1B2c3D4e5F6" * 4, "a1B2c3D4e5F6" * 4),
    _case("openai project key", "the key sk-proj-" + "Zy9x" * 12 + "T3BlbkFJ" + " works", "Zy9x" * 12),
    _case("anthropic key", "ANTHROPIC_API_KEY: sk-ant-api03-" + "Ab1_" * 20 + "xyzAA", "Ab1_" * 20),
    # AWS
    _case("aws access key id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    _case("aws temporary key id", "creds ASIAY34FZKBOKMUTVV7A expire at noon", "ASIAY34FZKBOKMUTVV7A"),
    _case(
        "aws secret key, ini style",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    _case(
        "aws secret key, env style",
        'export AWS_SECRET_ACCESS_KEY="je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"',
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    ),
    _case(
        "aws secret key, yaml style",
        "  secretAccessKey: Uq3v7pZk9xJ2mB5nC8wE1rT4yU6iO0pAsDfGhJkL",
        "Uq3v7pZk9xJ2mB5nC8wE1rT4yU6iO0pAsDfGhJkL",
    ),
    # Other vendors
    _case(
        "google api key",
        "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY in the config",
        "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    ),
    _case("stripe secret key", "STRIPE_KEY=sk_live_" + _B62[:24], _B62[:24]),
    _case("stripe restricted key", "use rk_live_" + _B62[:24] + " for reporting", _B62[:24]),
    _case("stripe test key", "in dev: sk_test_" + _B62[:26], _B62[:26]),
    _case("stripe webhook secret", "whsec_" + _B62, _B62),
    _case("npm token", "//registry.npmjs.org/:_authToken=npm_" + _B62 + "abcd", _B62),
    _case("npm token in prose", "publish with npm_" + _B62[::-1] + "WXYZ please", _B62[::-1]),
    _case(
        "pypi token",
        "password = pypi-AgEIcHlwaS5vcmcCJGE0ZmM5YjFkLTkyMzQtNGQ3Zi1hNjg0LWU2ZTUzNzU5YzVlMQ",
        "AgEIcHlwaS5vcmcCJGE0ZmM5YjFkLTkyMzQtNGQ3Zi1hNjg0LWU2ZTUzNzU5YzVlMQ",
    ),
    _case(
        "pypi token alone",
        "twine got pypi-AgENdGVzdC5weXBpLm9yZwIkZjY3NjM4YjQtYjQ5ZS00MDBkLWE0NTUtZjE",
        "AgENdGVzdC5weXBpLm9yZwIkZjY3NjM4YjQtYjQ5ZS00MDBkLWE0NTUtZjE",
    ),
    _case("twilio api key", "TWILIO_API_KEY=SK" + _HEX32, _HEX32),
    _case(
        "twilio auth token",
        "TWILIO_ACCOUNT_SID=AC" + _HEX32[::-1] + " TWILIO_AUTH_TOKEN=9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        _HEX32[::-1],
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    ),
    _case(
        "sendgrid key",
        "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",
        "ngeVfQFYQlKU0ufo8x5d1A",
        "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    ),
    # Formats
    _case(
        "jwt",
        "cookie eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ",
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    ),
    _case(
        "pem rsa private key",
        f"key:\n-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----\nthanks",
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
        "VTLw7onLRnrq0",
    ),
    _case(
        "pem openssh private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    _case(
        "pem ec private key, unterminated",
        f"-----BEGIN EC PRIVATE KEY-----\n{_PEM_BODY}",
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    ),
    _case(
        "credentials in a database url",
        "DATABASE_URL=postgres://admin:hunter2@db.internal:5432/app",
        "hunter2",
        "admin:",
    ),
    _case(
        "credentials in an https url",
        "git clone https://deploy:Tr0ub4dor&3@git.example.com/acme/app.git",
        "Tr0ub4dor&3",
    ),
    _case(
        "url password containing an at sign", "redis://default:p@ssw0rd@cache:6379/0", "p@ssw0rd", "ssw0rd"
    ),
    _case(
        "authorization bearer header",
        "curl -H 'Authorization: Bearer abc.def-ghi_jkl123' https://api",
        "abc.def-ghi_jkl123",
    ),
    _case("authorization basic header", "Authorization: Basic ZGVwbG95Omh1bnRlcjI=", "ZGVwbG95Omh1bnRlcjI="),
    # Named assignments
    _case("env password", "DB_PASSWORD=hunter2", "hunter2"),
    _case("env password, quoted", "export MYSQL_ROOT_PASSWORD='c0rrect horse'", "c0rrect horse"),
    _case("env passwd", "PASSWD=Sup3rS3cret!", "Sup3rS3cret!"),
    _case("env pass suffix", "SMTP_PASS=letmein42", "letmein42"),
    _case("yaml password", "database:\n  user: app\n  password: s3cr3t-Value\n  host: db", "s3cr3t-Value"),
    _case(
        "yaml password, quoted", 'password: "correct horse battery staple"', "correct horse battery staple"
    ),
    _case("json password", '{"username": "svc", "password": "hunter2"}', "hunter2"),
    _case("json camelCase password", '{"dbPassword":"Pa55w0rd"}', "Pa55w0rd"),
    _case("toml secret", 'client_secret = "9a8b7c6d5e4f3a2b1c0d"', "9a8b7c6d5e4f3a2b1c0d"),
    _case("pwd assignment", "pwd=qwerty123", "qwerty123"),
    _case("token assignment", "token=5f4dcc3b5aa765d61d8327deb882cf99", "5f4dcc3b5aa765d61d8327deb882cf99"),
    _case("api_key in yaml", "api_key: 4f9d2c1b8a7e6d5c", "4f9d2c1b8a7e6d5c"),
    _case("apiKey in json", '{"apiKey": "live_8d7f6e5d4c3b2a19"}', "live_8d7f6e5d4c3b2a19"),
    _case("x-api-key header", "X-API-KEY: 7c6b5a4d3e2f1a0b9c8d", "7c6b5a4d3e2f1a0b9c8d"),
    _case("cli password flag", "psql --password=Winter2024! -h db", "Winter2024!"),
    _case("upper-case yaml secret", "SECRET: zebra-Cobalt-9", "zebra-Cobalt-9"),
    _case("password with a numeric value", "admin password=123456 on the router", "123456"),
    _case("prose password", "fyi the password is hunter2", "hunter2"),
    _case("prose password with a target", "The staging password for grafana is Gr@fana-77.", "Gr@fana-77"),
    _case("prose password, upper case", "PASSWORD IS Tr1cky", "Tr1cky"),
    _case("prose password, dictionary word", "the wifi password is swordfish", "swordfish"),
    _case("prose secret", "the shared secret was changed to k9Lm2Np4", "k9Lm2Np4"),
    _case("prose api key", "our api key is 93b1f0c2d7e84a65", "93b1f0c2d7e84a65"),
    _case(
        "high-entropy value under a weak name",
        "SESSION_SIGNING_SALT=q8W2e7R4t1Y6u3I9o0P5aZxC",
        "q8W2e7R4t1Y6u3I9o0P5aZxC",
    ),
    _case("high-entropy cookie key", "cookie_key: Jr5Xw2Lq8Vn3Tz6Ks9Pb4Hm7", "Jr5Xw2Lq8Vn3Tz6Ks9Pb4Hm7"),
    _case(
        "azure storage connection string",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6"
        "IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6",
    ),
    _case("prose passphrase with a colon", "the passphrase is: tr0ub4dor", "tr0ub4dor"),
    _case("password in a url query", "https://x.example/login?user=ops&password=hunter2&next=/", "hunter2"),
    # Obfuscated
    _case(
        "token split by a zero-width space",
        "ghp_" + "A1b2C3d4E5" + "\u200b" + "A1b2C3d4E5" * 2 + "f6G7h8",
        "A1b2C3d4E5A1b2C3d4E5",
        "A1b2C3d4E5f6G7h8",
    ),
    _case(
        "token split by a bidi override",
        "xoxb-2223334445-\u202e5556667778889\u202c-AbCdEfGhIjKlMnOpQrStUvWx",
        "AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    _case(
        "token in full-width letters",
        "ｇｈｐ＿" + "Ａ1ｂ2Ｃ3ｄ4Ｅ5" * 3 + "f6G7h8",
        "Ａ1ｂ2Ｃ3ｄ4Ｅ5",
        "A1b2C3d4E5",
        "f6G7h8",
    ),
    _case("password split by a soft hyphen", "pass\u00adword=hunter2", "hunter2"),
    # Review 1, finding 3: values the line rules met on the line after their name.
    _case("yaml password on the next line", "password:\n  hunter2hunter2", "hunter2hunter2"),
    _case(
        "yaml quoted password over two lines", 'password: "hunter2\nhunter2"', "hunter2\nhunter2", "hunter2"
    ),
    _case("yaml block-scalar password", "password: |\n  hunter2hunter2", "hunter2hunter2"),
    _case("yaml folded password, the line collapsed", "password: > hunter2hunter2", "hunter2hunter2"),
    # Review 1, finding 4: a token after CJK text, an underscore or an ASCII letter.
    _case(
        "slack token right after japanese text",
        "トークンはxoxb-2223334445-5556667778889-AbCdEfGhIjKlMnOpQrStUvWx",
        "5556667778889-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    _case("github token right after japanese text", "トークンはghp_" + _B62 + "abcd", _B62),
    _case(
        "github token in slack italics", "_ghp_aBcD1234567890abcdefghij789_", "aBcD1234567890abcdefghij789"
    ),
    _case("aws key id in slack italics", "_AKIAIOSFODNN7EXAMPLE_", "AKIAIOSFODNN7EXAMPLE"),
    _case("openai project key glued to a letter", "xsk-proj-" + "Zy9x" * 12, "Zy9x" * 12),
    _case(
        "slack webhook glued to a letter",
        "xhttps://hooks.slack.com/services/T0123ABCD/B0456EFGH/" + _B62[:24],
        _B62[:24],
    ),
    # Review 1, finding 6: references, code and placeholders that were none.
    _case("password starting with a dollar", "password: $uperS3cret!", "uperS3cret"),
    _case("env password starting with a dollar", 'PASSWORD="$uperS3cret!"', "uperS3cret"),
    _case("password that looks like a call", "password=Hunter2(x)", "Hunter2"),
    _case("password that looks like an index", "password: Summer[2024]!", "Summer[2024"),
    _case("password starting with an angle bracket", "password: <3kitties99", "3kitties99"),
    _case("json password with an escaped quote", '{"password": "hun\\"ter2hunter2"}', "ter2hunter2", "hun"),
    _case("cli password flag with a space", "mysql --password hunter2hunter2 -h db", "hunter2hunter2"),
    _case("mysql -p password", "mysql -uroot -phunter2hunter2 app", "hunter2hunter2"),
    _case("curl -u user:password", "curl -u admin:hunter2hunter2 https://api.example.com", "hunter2hunter2"),
    _case("pw assignment", "pw=hunter2hunter2", "hunter2hunter2"),
    _case("prose password after is:", "the password is: hunter2hunter2", "hunter2hunter2"),
    _case("password then its value", "password hunter2hunter2", "hunter2hunter2"),
    _case("password with an arrow", "prod password -> hunter2hunter2", "hunter2hunter2"),
    _case(
        "prose api token of letters",
        "the api token is abcdefghijklmnopqrstuvwxyzabcd",
        "abcdefghijklmnopqrstuvwxyzabcd",
    ),
    _case(
        "scheme-less slack webhook",
        "hooks.slack.com/services/T0123ABCD/B0456EFGH/" + _B62[:24],
        _B62[:24],
    ),
    _case(
        "json-escaped slack webhook",
        "https:\\/\\/hooks.slack.com\\/services\\/T0123ABCD\\/B0456EFGH\\/" + _B62[:24],
        _B62[:24],
    ),
    _case("json-escaped url password", '{"url": "postgres:\\/\\/admin:S3cr3tPass@db"}', "S3cr3tPass"),
    _case("scheme-less user:password@host", "connect to admin:S3cr3tPass@db.internal:5432 now", "S3cr3tPass"),
    _case(
        "pem header flattened onto one line",
        "key: -----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    _case(
        "pem with a json-escaped crlf",
        '{"key": "-----BEGIN OPENSSH PRIVATE KEY-----\\r\\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"}',
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    _case("aws key id split by a braille blank", "AKIAIOSFOD\u2800NN7EXAMPLE", "NN7EXAMPLE"),
    _case("aws key id split by a combining mark", "AKIAIOSFOD\u0301NN7EXAMPLE", "NN7EXAMPLE"),
    _case("aws key id with a combining mark on a letter", "AKIAIOSFODNN7E\u0301XAMPLE", "XAMPLE"),
    _case("aws key id split by a null notehead", "AKIAIOSFOD\U0001d159NN7EXAMPLE", "NN7EXAMPLE"),
    _case("pypi token in lower case", "pypi-" + _B62.lower() + "abcdefghij", _B62.lower()),
    _case("google key in lower case", "aiza" + _B62.lower() + "ab", _B62.lower()),
    # Forms an attack review found, each in the shape its vendor's documentation gives.
    # Oracle keytool / jarsigner: `-storepass` and `-keypass` on the command line.
    _case(
        "keytool store and key passwords",
        "keytool -genkey -keystore .keystore -storepass myKeypass -keypass myKeypass -alias svc",
        "myKeypass",
    ),
    # Microsoft sqlcmd: `-U login_id -P password`.
    _case("sqlcmd -P password", "sqlcmd -S tcp:db.internal,1433 -U sa -P Winter2026sa", "Winter2026sa"),
    # Azure CLI: `az login -u <username> -p <password>`.
    _case("az login -p password", "az login -u ops@contoso.example -p Winter2026az", "Winter2026az"),
    # MongoDB Shell: `mongosh … --username <user> -p <password>`.
    _case("mongosh -p password", "mongosh mongodb://db:27017 -u admin -p Winter2026mg", "Winter2026mg"),
    # OpenLDAP ldapsearch(1): `-w passwd` (simple authentication).
    _case(
        "ldapsearch -w password",
        "ldapsearch -x -H ldap://ldap -D cn=admin,dc=example,dc=org -w Winter2026ld",
        "Winter2026ld",
    ),
    # Samba smbclient(1): `-U [DOMAIN\\]USERNAME[%PASSWORD]`.
    _case("smbclient -U user%password", "smbclient //fs/share -U alice%Winter2026sm", "Winter2026sm"),
    # .NET appSettings (`<add key=… value=…/>`) and Spring XML bean properties (`<property name=… value=…/>`).
    _case("dotnet appSettings password", '<add key="DbPassword" value="Winter2026nt" />', "Winter2026nt"),
    _case("spring xml password property", '<property name="password" value="Winter2026sp"/>', "Winter2026sp"),
    # AWS S3 presigned URL (Signature Version 4 query parameters) made with temporary credentials: the
    # session token and the signature are each a credential, after an access key id already redacted.
    _case(
        "aws presigned url with a session token",
        "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=ASIAQNOXLMNOPQRSTUVW%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
        "&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJHMEUCIQDk3pQ9rT2vX7yB4nM8wL1c"
        "&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
        "IQoJb3JpZ2luX2VjEJr",
        "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
    ),
    # Google Authenticator's Key Uri Format: the TOTP shared secret, base32, in `secret=`.
    _case(
        "totp otpauth uri secret",
        "scan otpauth://totp/ACME:alice@acme.example?secret=JBSWY3DPEHPK3PXP&issuer=ACME",
        "JBSWY3DPEHPK3PXP",
    ),
    # BIP-39: a wallet's mnemonic sentence is its private key (the specification's first test vector;
    # MetaMask calls it the Secret Recovery Phrase).
    _case(
        "bip-39 seed phrase",
        "Secret Recovery Phrase: abandon abandon abandon abandon abandon abandon abandon abandon abandon "
        "abandon abandon about",
        "abandon abandon abandon",
    ),
    # Chat prose: the verb before the word, a separator after a "for …" clause, the short "pw".
    _case("prose password set to", "I changed my password to Summer2026! yesterday", "Summer2026"),
    _case("prose password for a target with a colon", "the password for the db: Summer2026", "Summer2026"),
    _case("prose pw is", "the staging pw is Summer2026", "Summer2026"),
    # A token a shell command continues onto the next line (`\\` at the end of the line).
    _case(
        "slack token continued by a backslash",
        "export SLACK_BOT_TOKEN=xoxb-2223334445-5556667778889-AbCdEf\\\nGhIjKlMnOpQrStUvWx",
        "GhIjKlMnOpQrStUvWx",
    ),
    # A diceware / xkcd passphrase (1Password's and Bitwarden's generators join words with `-`).
    _case(
        "prose passphrase of joined words",
        "the wifi password is purple-monkey-dishwasher.",
        "purple-monkey-dishwasher",
    ),
    # Credentials passed as plain arguments in code, each in its library's documented call shape.
    # Requests' quickstart (Basic auth as a tuple) and its authentication guide (HTTPBasicAuth).
    _case(
        "requests auth tuple",
        "r = requests.get('https://api.github.com/user', auth=('user', 'Winter2026rq'))",
        "Winter2026rq",
    ),
    _case(
        "requests HTTPBasicAuth",
        "requests.get(url, auth=HTTPBasicAuth('user', 'Winter2026hb'))",
        "Winter2026hb",
    ),
    # .NET: `NetworkCredential(String userName, String password, String domain)`.
    _case(
        ".NET NetworkCredential",
        'var cred = new NetworkCredential("ops", "Winter2026nc", "CONTOSO");',
        "Winter2026nc",
    ),
    # PowerShell's ConvertTo-SecureString, Example 3 ("Convert a plain text string to a secure string").
    _case(
        "powershell ConvertTo-SecureString plain text",
        '$Secure_String_Pwd = ConvertTo-SecureString "P@ssW0rD!" -AsPlainText -Force',
        "P@ssW0rD",
    ),
    # Python's smtplib `SMTP.login(user, password)` and ftplib `FTP.login(user, passwd)`.
    _case("smtplib login", "server.login('ops@example.com', 'Winter2026sm')", "Winter2026sm"),
    _case("ftplib login", "ftp.login('ops', 'Winter2026ft')", "Winter2026ft"),
    # Passwords as plain command arguments. sudo(8) `-S`/`--stdin` reads the password from standard input.
    _case("echo into sudo -S", "echo 'Winter2026su' | sudo -S apt-get update", "Winter2026su"),
    # chpasswd(8): each input line is `user_name:password`.
    _case("echo into chpasswd", "echo 'ops:Winter2026cp' | chpasswd", "Winter2026cp"),
    # usermod(8) `-p PASSWORD`: the crypt(3) hash, itself a secret to crack offline.
    _case(
        "usermod -p",
        "usermod -p '$6$Xk2mP9qR$Winter2026um4sT7vW1yZ3bC5dF8gH0jK6nL2pQ4rS9tU1vW3xY' ops",
        "Winter2026um",
    ),
    # Apache htpasswd, batch mode: the manual's own example, and `-nb` (display only).
    _case("htpasswd -b", "htpasswd -b /usr/web/.htpasswd-all jones Pwd4Steve", "Pwd4Steve"),
    _case("htpasswd -nb", "htpasswd -nbB ops Winter2026ht", "Winter2026ht"),
    # rabbitmqctl(8): `add_user username password`, `change_password username newpassword`.
    _case("rabbitmqctl add_user", "rabbitmqctl add_user janeway changeit", "changeit"),
    _case("rabbitmqctl change_password", "rabbitmqctl change_password janeway newpass", "newpass"),
    # Windows `net use [devicename] [\\computername\sharename] [password | *] [/user:[domainname\]username]`.
    _case("windows net use", "net use k: \\\\fs01\\projects Winter2026nu /user:CONTOSO\\ops", "Winter2026nu"),
    # Chat: a user and a password joined after the words that say they are a login.
    _case("chat login with user/password", "login with admin/hunter2", "hunter2"),
    _case("chat credentials user:password", "credentials admin:hunter2", "hunter2"),
    _case("chat user then pass", "user: admin pass: hunter2", "hunter2"),
    _case("python triple-quoted password", 'password = """hunter2"""', "hunter2"),
)

# Ordinary engineering sentences: none may be altered (≤ 1 % is the bar).
BENIGN: tuple[str, ...] = (
    # commits, hashes
    "Reverted 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 because it broke the build.",
    "The fix landed in commit 9fceb02 on main.",
    "git cherry-pick a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
    "bisect says the first bad commit is e83c5163316f89bfbde7d9ab23ca2e25604af290",
    "the tarball's sha256 is 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "md5 of the artifact: d41d8cd98f00b204e9800998ecf8427e",
    "Docker image digest sha256:4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c4d5e6f7a8b9c0d1e2f3a4b5",
    "the lockfile hash changed from 5d41402abc4b2a76b9719d911017c592 to 7d793037a0760186574b0282f2f435e7",
    "Tag v2.14.0 points at 1c0ffee.",
    'ETag "33a64df551425fcc55e4d42a148795d9f25f89d4" means unchanged.',
    "The merge base is 0123abcd, rebase onto it.",
    "HEAD~3 is where the regression started.",
    "The blob 8ab686eafeb1f44702738c8b0f24f2567c36da6d is the old README.",
    "Sentry event 4f1a9b2c7d3e48f6a0b5c9d2e7f1a3b6 has the stack trace.",
    "Build 20231114.7 published artifact build-7f3e2a.zip.",
    # uuids, ids
    "Request id 3fa85f64-5717-4562-b3fc-2c963f66afa6 timed out.",
    "The tenant uuid is 123e4567-e89b-12d3-a456-426614174000.",
    "Trace 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 shows the slow span.",
    "Order ORD-2024-000173 was refunded.",
    "Customer cus_9s6XKzkNRiz8i3 asked about invoices.",
    "the Slack channel C0123ABCD is for incidents and U0456EFGH owns it",
    "Workspace T0123ABCD has the app installed.",
    "The message ts is 1700000000.123456.",
    "Pod web-7d9f8c6b5-x2k4q was OOMKilled.",
    "The ECS task arn:aws:ecs:us-east-1:123456789012:task/prod/8f2c is stuck.",
    "Our AWS account id is 123456789012 and the region is eu-west-1.",
    "The S3 bucket acme-prod-assets holds the static files.",
    "ARN arn:aws:iam::123456789012:role/deploy is assumed by CI.",
    "The instance i-0abcd1234efgh5678 is unhealthy.",
    "Subnet subnet-0bb1c79de3EXAMPLE is in us-east-1a.",
    "security group sg-903004f8 allows 443 only",
    "The Stripe price id is price_1NrHkLLkdIwHu7ix and it is public.",
    "Publishable key pk_live_51H8 goes in the frontend.",
    "Charge ch_3MmlLrLkdIwHu7ix0snN0B15 failed.",
    "The Datadog monitor 12345678 pages the on-call.",
    # tickets
    "JIRA-4821 tracks the flaky login test.",
    "Fixed in PROJ-123, see also PROJ-124 and OPS-77.",
    "Closes #4812.",
    "See owner/repo#12 for the discussion.",
    "Linear ticket ENG-2210 is blocked on design.",
    "Incident INC-0042 postmortem is due Friday.",
    "Ticket SEC-19 asks us to rotate credentials quarterly.",
    "PR #233 bumps pydantic to 2.7.",
    "GH-1024 was a duplicate of GH-998.",
    "Bug 1823344 in Bugzilla is the upstream report.",
    # urls
    "See https://github.com/owner/repo/pull/12 for context.",
    "Docs live at https://docs.example.com/guide/install#requirements.",
    "The API base is https://api.example.com/v2/ and it needs TLS 1.2.",
    "Grafana: https://grafana.internal/d/abc123/service-overview?orgId=1&from=now-6h",
    "Download from https://example.com/a:b/c.tar.gz.",
    "The webhook endpoint is https://ci.example.com/hooks/github.",
    "Use https://hooks.slack.com for incoming webhooks; the URL is in the vault.",
    "The login page is https://sso.example.com/login?next=%2Fdashboard",
    "Open http://localhost:8080/health to check it.",
    "ssh git@github.com:owner/repo.git works with your key.",
    "postgres://db.internal:5432/app is the primary.",
    "redis://cache:6379/0 is the session store.",
    "The S3 URL is s3://acme-backups/2024/01/db.dump.",
    "Mail someone@example.com about the outage.",
    "The status page is at https://status.example.com.",
    "Mirror: https://pypi.org/project/httpx/0.27.0/",
    "The image is ghcr.io/owner/app:1.4.2.",
    "Pull docker.io/library/postgres:16-alpine for tests.",
    "file:///tmp/report.html has the coverage.",
    "A GitHub token starts with ghp_ and a Slack bot token with xoxb-.",
    # versions
    "Upgrade Django from 4.2.11 to 5.0.3.",
    "Python 3.11.8 fixes the asyncio leak.",
    "node v20.11.1 is the LTS we pin.",
    "The chart version is 1.2.3-rc.4+build.5.",
    "We require openssl >= 3.0.13.",
    "numpy==1.26.4 breaks on musl.",
    "Kubernetes 1.29 removes the beta API.",
    "The SDK moved from 0.18.0 to 0.25.1 with breaking changes.",
    "Go 1.22 changed loop variable scoping.",
    "Postgres 16.2 is on the replicas, 15.6 on the primary.",
    "Bump actions/checkout from v3 to v4.",
    "The Helm release api-2024.03.1 is live.",
    "TLSv1.3 is enforced at the load balancer.",
    "Ubuntu 22.04.4 LTS is the base image.",
    "Java 21.0.2+13 is the runtime.",
    # base64 / encoded in docs
    "The header value is base64: SGVsbG8sIFdvcmxkIQ==",
    "Decode dGhpcyBpcyBhIHRlc3Q= to see the sample payload.",
    "The docs example uses the data URI prefix data:text/plain;base64,SGVsbG8=",
    "A PNG starts with iVBORw0KGgo in base64.",
    'The fixture is eyJhIjogMX0= which decodes to {"a": 1}.',
    "Kubernetes stores secrets base64-encoded, not encrypted.",
    "Use base64 -d < payload.txt to decode it.",
    "The cursor is opaque: Y3Vyc29yOjEyMzQ1",
    "The sample QR payload is QUJDREVGR0hJSktMTU5PUA.",
    "Our protobuf field is bytes, shown as AAECAwQFBgcICQ== in JSON.",
    # paths
    "The config lives in /etc/switchboard/switchboard.toml.",
    "Logs are under /var/log/app/*.log.",
    "Edit src/core/memory/scorer.py and its test.",
    "C:\\Users\\dana\\AppData\\Local\\Temp is full.",
    "The cert is at /etc/ssl/certs/ca-certificates.crt.",
    "~/.ssh/id_ed25519.pub is your public key.",
    "Your private key stays in ~/.ssh/id_ed25519 and never leaves the laptop.",
    "The key file path is /run/secrets/db_password, mounted by Docker.",
    "Put tokens in .env and add .env to .gitignore.",
    "tests/memory/test_redact.py covers the corpus.",
    "See docs/adr/0007-memory-scopes.md.",
    "The binary is at ./target/release/app.",
    "Remove node_modules/.cache if the build is stale.",
    "The migration is db/migrate/20240301120000_add_index.rb.",
    "config/settings.py reads SWITCHBOARD_MEMORY__ENABLED.",
    # talk about credentials without values
    "The token is refreshed every hour.",
    "The password is required for staging.",
    "The password is stored in 1Password under Infra.",
    "The token is expired, run the login again.",
    "The API key is rotated every 90 days.",
    "The secret is mounted as a file, not an env var.",
    "Passwords must be at least 12 characters.",
    "Set the GITHUB_TOKEN secret in the repo settings.",
    "The password field is masked in the UI.",
    "Token rotation is handled by Vault.",
    "Never paste your API key into Slack.",
    "Use a personal access token with repo scope.",
    "The session cookie is HttpOnly and Secure.",
    "The secret key is in the vault, ask the on-call.",
    "The access key was revoked yesterday.",
    "Password reset emails go out within a minute.",
    "The token endpoint is /oauth/token.",
    "max_tokens = 800 keeps the block small.",
    "max_tokens: 1024 for the reflection call.",
    '{"max_tokens": 4096, "temperature": 0.2}',
    "token_type: bearer",
    "token_count=1532 for that prompt.",
    "The tokenizer splits on whitespace.",
    "password_min_length: 12",
    "is_secret: true",
    "secret_name: prod-db-credentials",
    "github_token: ${{ secrets.GITHUB_TOKEN }}",
    "password: ${DB_PASSWORD}",
    "api_key = os.environ['OPENAI_API_KEY']",
    "token = get_token(scope)",
    "def login(user: str, password: str) -> bool:",
    "api_key: Optional[str] = None",
    "password: <your password here>",
    "DB_PASSWORD=  # set in CI",
    "if token == expected: return True",
    "The bearer of bad news was the CI bot.",
    "Basic auth is disabled on the admin panel.",
    "The Authorization header is missing on redirects.",
    "Pass the --token flag to authenticate.",
    "We bypass: the cache when --fresh is given.",
    "A compass: the north star for the roadmap.",
    "Use passwordless login with a magic link.",
    "The keyword: deploy matches the record.",
    "cache_key: user:42:profile",
    "primary_key: id",
    "sort_key = created_at",
    "session_timeout: 30m",
    "session: default",
    "license: MIT",
    "signature: required for releases",
    "sk-learn is not a thing, scikit-learn is.",
    "The task-runner key is skipped in the docs.",
    "ghp_short is not a token.",
    "AKIA is a prefix, AKIAshort too.",
    "The AIza prefix marks Google API keys.",
    "JWTs start with eyJ because of base64.",
    "An SG. prefix marks SendGrid keys.",
    "Stripe secret keys start with sk_live_ and restricted ones with rk_live_.",
    "npm tokens look like npm_ followed by 36 characters.",
    "Private keys begin with -----BEGIN PRIVATE KEY----- in PEM files.",
    "The public cert begins with -----BEGIN CERTIFICATE-----.",
    "-----BEGIN PUBLIC KEY----- is safe to share.",
    # ordinary engineering talk
    "We deploy on Tuesdays; CI runs `make test` on main.",
    "The p99 latency went from 120 ms to 340 ms after the upgrade.",
    "Disk usage on db-2 is at 91%, please clean up WAL.",
    "Retry with exponential backoff: 1s, 2s, 4s, capped at 30s.",
    "The cron is 0 3 * * 1-5, weekdays at three.",
    "Set LOG_LEVEL=debug to see the SQL.",
    "Use PORT=3000 locally and 8080 in the container.",
    "MEMORY_ENABLED=true turns memory on.",
    "The feature flag new_checkout is at 25%.",
    "Run pytest -k redact -q before pushing.",
    "ruff check . && mypy memory/ must pass.",
    "The queue depth peaked at 12,000 messages.",
    "We pinned uvicorn to 0.29 because of the lifespan bug.",
    "The rollout uses a canary of 5% for 30 minutes.",
    "The readiness probe hits /healthz every 10s.",
    "Use UTC timestamps like 2024-03-01T12:00:00Z everywhere.",
    "Rate limit is 50 requests per minute per workspace.",
    "The schema migration adds a nullable column.",
    "The index on (scope_key, seq) makes list fast.",
    "Rename the field from userId to user_id in the API.",
    "Cache TTL is 300 seconds.",
    "The build matrix covers 3.11, 3.12 and 3.13.",
    "Terraform plan shows 3 to add, 1 to change, 0 to destroy.",
    "The S3 lifecycle rule deletes objects after 30 days.",
    "Alerts fire when error rate exceeds 2% for 5 minutes.",
    "The GraphQL query fetches 100 nodes per page.",
    "WebSocket reconnects after 15 seconds of silence.",
    "SQLite WAL mode lets readers run during writes.",
    "The batch size is 500 rows.",
    "We shard by tenant id modulo 16.",
    "Blue/green deploy flips the target group.",
    "The on-call rotation changes Monday at 10:00.",
    "Use `git rebase -i HEAD~5` to squash.",
    "The flaky test is test_retry_backoff_caps_at_thirty.",
    "Key takeaway: the cache was cold after deploy.",
    "Primary key collisions happened during the import.",
    "The key insight is that retries were not idempotent.",
    "Add the SSH key to the deploy user on the bastion.",
    "The API returns 429 with a Retry-After header.",
    "Error: connection refused (ECONNREFUSED 127.0.0.1:5432).",
    "TypeError: 'NoneType' object is not subscriptable at line 42.",
    "The exit code was 137, so the pod was killed.",
    "Memory leaks in the worker show up after 6 hours.",
    "CPU throttling explains the latency spikes.",
    "The heap dump is 2.3 GB; analyze it with MAT.",
    "GC pauses reach 800 ms under load.",
    "Use a read replica for the analytics queries.",
    "The config uses TOML; YAML was too error-prone.",
    "JSON Schema draft 2020-12 validates the payload.",
    "Protobuf field 7 is reserved.",
    "The regex ^[a-z0-9-]+$ validates slugs.",
    "The cron job writes to s3://acme-reports/daily/.",
    "UTF-8 everywhere; no Latin-1 in the database.",
    "Emoji reactions like 👍 and 👨‍👩‍👧 work in Slack.",
    "Café names with accents render fine: Zürich, Kraków.",
    "The Japanese locale ja_JP uses 全角 characters.",
    "Dana (she/her) owns the billing service.",
    "Standup moved to 9:30 because of the offsite.",
    "Q3 OKR: reduce p95 latency by 20%.",
    "Budget for the load test is $400.",
    "The vendor SLA is 99.9% monthly.",
    "Prefer composition over inheritance in the adapters.",
    "Async all the way; no blocking calls in handlers.",
    "The answer is 42, as always.",
    "Our staging is at staging.acme.dev and prod at acme.dev.",
    "Use the `--dry-run` flag first.",
    "The webhook retries 3 times with jitter.",
    "The SSO provider is Okta; SCIM syncs groups hourly.",
    "OAuth scopes: repo, read:org, workflow.",
    "The secrets manager path is prod/app/db.",
    "Vault policy app-read grants read on secret/data/app/*.",
    "Token bucket rate limiting smooths the bursts.",
    "The API key header is X-API-Key.",
    "Check the Authorization: header in the proxy logs.",
    "Password managers like Bitwarden are approved.",
    "Two-factor auth is mandatory for admins.",
    "The pwd command prints the working directory.",
    "The key rotation runbook is in Confluence.",
    "Use HMAC-SHA256 to sign the webhook body.",
    "The JWT expires after 15 minutes.",
    "PEM files hold certificates and keys in base64.",
    "The credential helper caches for 15 minutes.",
    "The API key is: see the vault entry ops/api.",
    "The password is: in 1Password, under Infra.",
    "AccountKey=<storage key> goes in the connection string.",
    "Session=42;Path=/;HttpOnly is what the cookie header looks like.",
    "CORS allows https://app.acme.dev only.",
    "The CSP header blocks inline scripts.",
    "Kafka topic orders.v1 has 12 partitions.",
    "The consumer lag is 4,500 messages.",
    "Elastic index logs-2024.03.01 is read-only.",
    "The Redis key session:user:42 expires in 1h.",
    "The nginx config has client_max_body_size 10m.",
    "Set ulimit -n 65536 on the workers.",
    "The lambda timeout is 900 seconds.",
    "Fargate tasks get 2 vCPU and 4 GB.",
    "The dashboard shows 1.2k rps at peak.",
    "Renovate opens PRs on Mondays.",
    "Dependabot alert #17 is a false positive.",
    "CVE-2024-3094 affected xz 5.6.0 and 5.6.1.",
    "SemVer says 2.0.0 may break the API.",
    "The changelog entry goes under Unreleased.",
    # Review 1, finding 7: names that hold no secret here.
    "max_token: 4096",
    "token: 5",
    "pass: 3",
    "auth: oauth2",
    "auth: bearer",
    "credentials: ~/.aws/credentials",
    "secret: my-app-secret",
    "the password is probably wrong",
    "the password was rejected",
    "the password is what matters here",
    "the password is case-sensitive",
    "api_key: see vault at https://vault.acme.dev/ui",
    "Deploy v1.0123456789abcdef0123456789abcdef01234567 to staging.",
    "SKU SK00000000000000000000000000012345 is back in stock.",
    "Order AC0123456789ABCDEF0123456789ABCDEF shipped.",
    "Run mysql -uroot -p app and type the password at the prompt.",
    "Use --password to pass it on the command line.",
    "password reset emails go out from noreply@acme.dev",
)
