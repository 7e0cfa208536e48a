"""Credential context: a value after a name, flag or phrase that says it is a secret is redacted
whatever its shape — in env, YAML, JSON (also backslash-escaped, as when an answer quotes JSON), TOML,
CLI and prose styles, .pgpass and .netrc lines.

A password-like name takes any value but a reference or placeholder; `token`, `secret`, `auth` and
the key names take one that looks random or is long, never a plain number (`max_tokens: 4096`).
"""

from __future__ import annotations

import re

from memory.rules.token_shape import REDACTED, high_entropy, keyed_value, looks_random, path_of_names

# A name ending in one of these holds a secret whatever its value looks like.
_STRONG = (
    r"pass(?:word|wd|phrase|code)|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key"
    r"|private[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|credentials?|auth|pw"
)
# A name ending in one of these holds a secret when its value looks random (long, high entropy).
_WEAK = r"key|salt|hmac|sig|signature|cookie|session|license|dsn|cert"

_NAME_END = r"(?![A-Za-z0-9])"
# A strong word may carry one suffix that still names the secret (`private_key_id`, `secret_value`).
_SUFFIX = r"(?:[_.-]?(?:id|value|b64|base64|hex))?"
_STRONG_NAME = rf"(?:[A-Za-z0-9_.-]*?(?:{_STRONG}){_SUFFIX}|(?:[A-Za-z0-9_.-]*?[_.-])?pass){_NAME_END}"
_WEAK_NAME = rf"[A-Za-z0-9_.-]*?(?:{_WEAK}){_NAME_END}"
# Quotes around a name (backslash-escaped too: JSON quoted inside a string), or the Slack and
# Markdown marks that set it in bold, italics, strike or code (`*password*:`).
_QUOTE = r"(?:\\?[\"']|[*_~`]{1,2})?"
# name, closing quote, separator (=, :, =>, -> or →, never == or ::), a YAML block indicator the
# collapsed sanitizer line may still hold, opening quote; the value follows.
_ASSIGN = (
    rf"{_QUOTE}(?i:(?P<strong>{_STRONG_NAME})|{_WEAK_NAME}){_QUOTE}[ \t]*(?:=>|->|\u2192|=(?!=)|:(?!:))"
    # the mark closing a name set with its colon (`*Password:* hunter2`)
    r"(?:[*_~]{1,2}(?=[ \t]))?[ \t]*"
    r"(?:[|>][+-]?[0-9]?[ \t]+(?=\S))?"
)
# A quoted value holds backslash escapes (`"hun\"ter2"`); a lone backslash may end it (`"C:\"`);
# a value quoted with escaped quotes (`\"hunter2\"`) ends at the first escaped quote. A bare value ends
# before `?name=`, where a query string starts, and, when its own name is a query parameter (`?name=`,
# `&name=`), before `&name=` too: one whose value is kept (a reference, a path, a key id already
# redacted) does not hide the parameters after it. Anywhere else an `&` is the value's own
# (`DB_PASSWORD=Tr0ub&dor=3horse`), as is a `?` no `name=` follows (`p?ss`). `$QUERY` is what an `&`
# must not be followed by: nothing, or (in an assignment) the next parameter when the name was one.
_VALUE_TEMPLATE = (
    # Python's triple quotes first, or `"""x"""` would read as the empty `""` before `x`.
    r"(?:\"\"\"(?P<tq>[^\"\n]+)\"\"\"|'''(?P<ts>[^'\n]+)'''"
    r"|\\\"(?P<eq>[^\"\\\n]*(?:\\(?!\")[^\"\\\n]*)*)\\\""
    r"|\"(?P<dq>(?:[^\"\\\n]|\\.)*\\?)\"|'(?P<sq>(?:[^'\\\n]|\\.)*\\?)'|`(?P<bq>[^`\n]*)`"
    r"|(?P<bare>(?:[^\s\"'`&?]|\?(?![A-Za-z0-9_.-]+=)|&(?:$QUERY))+))"
)
_VALUE = _VALUE_TEMPLATE.replace("$QUERY", "")

_ASSIGNMENT = re.compile(
    # Only where a separator follows the word: most words are not assignments, so most starts fail here.
    # `inq`: the name is a query string's parameter, so its bare value ends where the next one starts.
    rf"(?<![A-Za-z0-9_.$-])(?P<inq>(?<=[?&]))?(?={_QUOTE}[A-Za-z0-9_.-]+{_QUOTE}[ \t]*(?:[:=]|->|\u2192))"
    + _ASSIGN
    + _VALUE_TEMPLATE.replace("$QUERY", "(?(inq)(?![A-Za-z0-9_.-]+=))")
    # The words after a bare value up to the clause's end: no separator, arrow, quote or comment in
    # them, so the next `name: value` on the line is matched on its own.
    + r"(?P<clause>(?:[ \t]+[^\s:=,;>\u2192\"'`#]*[^\s:=,;.!?>\u2192\"'`#](?=[ \t]|[,;.!?]|$))*)"
)

_PROSE = re.compile(
    r"(?i)\b(?P<word>pass(?:word|wd|phrase|code)|pwd|pw|secret|token|api[ _-]?key|apikey|access[ _-]?key"
    r"|secret[ _-]?key|private[ _-]?key)s?"
    r"(?:[ \t]+(?:for|of|on|to|in)[ \t]+(?:the[ \t]+)?[A-Za-z0-9./@_-]+(?:[ \t]+[A-Za-z0-9./@_-]+){0,2}"
    # "the password for the db: …", "password for prod db -> …": a separator after the clause is the verb
    r"(?P<sep>[ \t]*(?:->|\u2192|:)(?=[ \t]))?)?"
    r"(?P<verb>(?(sep)[ \t]+|[ \t]+(?:(?:is|was|are|were|has[ \t]+been|got)(?:[ \t]+(?:now|still))?"
    r"(?:[ \t]+(?:set|changed|reset|updated)[ \t]+to)?|became|(?:set|changed|reset|updated)[ \t]+to)"
    r":?[ \t]+))" + _VALUE
)
# "login with admin/hunter2", "credentials: admin:hunter2": a user and a password joined by `/` or `:`
# after the words that say they are a login.
_LOGIN_PAIR = re.compile(
    r"(?i)\b(?:log(?:ged)?[ \t-]?in|sign(?:ed)?[ \t-]?in|credentials?|creds)"
    r"(?:[ \t]+(?:with|as|using|is|are|was|were))?[ \t]*:?[ \t]+"
    r"(?P<user>[A-Za-z0-9._@+-]{1,64})[/:](?=[^\s/])" + _VALUE
)
# "I changed my password to …", "set the wifi password to …": the verb before the word.
_SET_TO = re.compile(
    r"(?i)\b(?:set|setting|change[ds]?|changing|reset(?:ting|s)?|update[ds]?|updating)[ \t]+"
    r"(?:(?:the|my|our|your|his|her|their|its|this|that|a|new)[ \t]+)?(?:[A-Za-z0-9_-]+[ \t]+)?"
    r"(?P<word>pass(?:word|wd|phrase|code)|pwd|pw)[ \t]+to[ \t]+" + _VALUE
)

# CLI spellings: `--password VALUE`, mysql's `-pVALUE`, curl's `-u user:VALUE`; and `password VALUE`.
_CLI_FLAG = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])--?(?:password|passwd|pass|pwd|token|secret|api-key|apikey|auth-token"
    r"|access-token)[ \t]+(?=[^\s-])" + _VALUE
)
_USER_PASSWORD = re.compile(r"(?<![A-Za-z0-9_-])(?:-u|--user)(?:[ \t]+|=)?[\"']?[^\s:\"']*:(?=\S)" + _VALUE)
_NAME_THEN_VALUE = re.compile(r"(?i)\b(?:password|passwd|passphrase|pwd)[ \t]+(?=[^\s-])" + _VALUE)
# Programs that take a password in a short flag after their name: mysql's `-pVALUE` (attached, as
# `-p VALUE` prompts), sshpass's `-p`, docker/podman/helm/az login's `-p`, mongosh's `-p`, redis-cli's
# `-a`, openssl's `-k`, zip's, unzip's and sqlcmd's `-P`, the OpenLDAP tools' `-w`, and Samba's
# `-U user%password`.
_PASSWORD_PROGRAM = re.compile(
    r"(?i)\b(?:(?P<mysql>mysql|mysqldump|mysqladmin|mariadb)|(?P<redis>redis-cli)|(?P<openssl>openssl)"
    r"|(?P<zip>unzip|zip|sqlcmd|bcp)|(?P<ldap>ldap(?:search|add|modify|delete|modrdn|compare|whoami|passwd))"
    r"|(?P<samba>smbclient|smbget|smbcacls|rpcclient)|sshpass|mongosh|mongo|usermod|useradd"
    r"|(?P<htpasswd>htpasswd)|(?P<rabbit>rabbitmqctl)|(?P<netuse>net[ \t]+use)"
    r"|(?P<securestring>convertto-securestring)"
    r"|(?:docker|podman|nerdctl|az)[ \t]+login|helm[ \t]+registry[ \t]+login)\b"
)
_ATTACHED_P = re.compile(r"(?<=[ \t])-p(?=\S)" + _VALUE)
_FLAG_P = re.compile(r"(?<=[ \t])-p[ \t]*(?=[^\s-])" + _VALUE)
_FLAG_A = re.compile(r"(?<=[ \t])-a[ \t]+(?=[^\s-])" + _VALUE)
_FLAG_K = re.compile(r"(?<=[ \t])-k[ \t]+(?=[^\s-])" + _VALUE)
_FLAG_CAPITAL_P = re.compile(r"(?<=[ \t])-P[ \t]*(?=[^\s-])" + _VALUE)
_FLAG_W = re.compile(r"(?<=[ \t])-w[ \t]*(?=[^\s-])" + _VALUE)
_USER_PERCENT = re.compile(r"(?<=[ \t])(?:-U[ \t]*|--user[= \t])[\"']?[^\s%\"']+%(?=\S)" + _VALUE)
# Programs that take the password as a plain argument: htpasswd's batch mode (`-b file user password`,
# `-nb user password`), rabbitmqctl's `add_user user password` and `change_password user password`,
# Windows `net use \\host\share password /user:…` (`*` prompts), PowerShell's
# `ConvertTo-SecureString 'password' -AsPlainText` (or `-String 'password'`). Options after the `-b`
# hold no `b`, so a run of `-b` flags is read once.
_HTPASSWD_B = re.compile(
    r"(?<=[ \t])-(?P<n>(?=[A-Za-z]*n))?[A-Za-z]*b[A-Za-z]*(?:[ \t]+-[AC-Za-ac-z]+(?:[ \t]+[0-9]+)?)*[ \t]+"
    r"(?(n)|[^\s-]\S*[ \t]+)[^\s-]\S*[ \t]+(?=[^\s-])" + _VALUE
)
_RABBIT_USER = re.compile(r"(?<=[ \t])(?:add_user|change_password)[ \t]+[^\s-]\S*[ \t]+(?=[^\s-])" + _VALUE)
_NET_USE = re.compile(r"(?i)(?<=[ \t])(?:\\\\\S+|/u(?:ser)?:\S+)[ \t]+(?=[^\s/*-])" + _VALUE)
_SECURE_STRING = re.compile(r"(?i)(?:\A|(?<=[ \t]-string))[ \t]+(?=[^\s-])" + _VALUE)
# Java's keytool and jarsigner: `-storepass`, `-keypass` (and their `src`/`dest`/`new` forms) take the
# password itself, whatever it looks like.
_JAVA_PASS = re.compile(r"(?i)(?<![A-Za-z0-9_-])-(?:src|dest|new)?(?:store|key)pass[ \t]+(?=[^\s-])" + _VALUE)
# An XML element named as a secret (`<password>hunter2</password>`, Maven's settings.xml).
_ELEMENT = re.compile(rf"(?i)<(?P<tag>{_STRONG_NAME})>(?P<value>[^<\n]{{1,256}})</(?P=tag)>")
# An XML element that names a secret in an attribute and holds it in `value`: .NET's appSettings
# `<add key="DbPassword" value="…"/>`, Spring's `<property name="password" value="…"/>`.
_NAMED_VALUE = re.compile(
    r"(?i)<[A-Za-z][\w.:-]*[ \t]+(?:[\w.:-]+[ \t]*=[ \t]*(?:\"[^\"\n]*\"|'[^'\n]*')[ \t]+)*?"
    rf"(?:key|name)[ \t]*=[ \t]*(?P<quote>[\"'])(?P<strong>{_STRONG_NAME})(?P=quote)[ \t]+value[ \t]*=[ \t]*"
    r"(?=[\"'])" + _VALUE
)
# A Markdown table row whose cell names a secret and whose next cell is one word: its value.
_TABLE_CELL = re.compile(
    rf"(?i)\|[ \t]*{_QUOTE}(?P<strong>{_STRONG_NAME}){_QUOTE}[ \t]*\|[ \t]*(?=[^\s|])"
    + _VALUE
    + r"(?=[ \t]*\|)"
)
# A quoted secret name and a quoted value passed to a setter: PHP's `define('DB_PASSWORD', '…')`,
# `putenv`, `setenv`, `os.environ.setdefault`, a config's `set`.
_SETTER = re.compile(
    rf"(?i)\b(?:define|putenv|setenv|setdefault|set)\([ \t]*[\"'](?P<strong>{_STRONG_NAME})[\"'][ \t]*,[ \t]*"
    r"(?=[\"'])" + _VALUE
)
# A password echoed into a program that reads it from standard input: `echo 'pass' | sudo -S …`
# (`--stdin`), `passwd --stdin`, and chpasswd's `user:password` lines (the user is kept). Case matters:
# sudo's `-s` is its shell flag.
_PIPED = re.compile(
    r"\b(?:echo|printf)(?:[ \t]+-[A-Za-z]+)*(?:[ \t]+[\"'][^\"'\n]*%s[^\"'\n]*[\"'])?[ \t]+(?=[^\s-])"
    r"(?:(?P<pair>[\"']?[^\s:\"'|]+:)(?=[^\s\"'|]))?" + _VALUE + r"[\"']?[ \t]*\|[ \t]*"
    r"(?(pair)chpasswd\b|(?:sudo\b[^|\n]*?[ \t]-(?:[A-Za-z]*S[A-Za-z]*|-stdin)(?![A-Za-z0-9-])"
    r"|passwd\b[^|\n]*?[ \t]--stdin\b))"
)
# A quoted user and a quoted password passed to a call that takes them in that order: requests'
# `auth=('user', 'pass')` and `HTTPBasicAuth('user', 'pass')`, .NET's `new NetworkCredential("user",
# "pass")`, smtplib's, ftplib's and imaplib's `login('user', 'pass')`. A variable is no literal.
_CREDENTIAL_CALL = re.compile(
    r"(?i)(?:\b(?:auth|credentials?)[ \t]*=[ \t]*[(\[]|\b(?:http(?:basic|digest|proxy)auth|basicauth"
    r"|networkcredential|login)[ \t]*\()[ \t]*(?:\"[^\"\n]*\"|'[^'\n]*')[ \t]*,[ \t]*(?=[\"'])" + _VALUE
)
# netrc(5): `machine HOST login USER password VALUE` (or `default login …`), on one line.
_NETRC = re.compile(
    r"(?i)\b(?:machine[ \t]+\S+|default(?=[ \t]+login))(?:[ \t]+(?:login|account|port)[ \t]+\S+)*"
    r"[ \t]+password[ \t]+" + _VALUE
)
# A line that is only `password VALUE` (a netrc entry spread over lines, a pasted form).
_LONE_PASSWORD = re.compile(r"^[ \t]*(?i:password|passwd)[ \t]+" + _VALUE + r"[ \t]*$")
# .pgpass: `host:port:database:user:password` (a host with a letter or a dot, or `*`).
_PGPASS = re.compile(
    r"(?:^|(?<=[ \t]))(?:\*|[A-Za-z0-9_-]*[A-Za-z.][A-Za-z0-9_.-]*):(?:[0-9]{1,5}|\*):[^\s:]+:[^\s:]+:"
    + _VALUE
)
# A key word right before a value, no separator needed: "the Datadog app key 3f2a…", "token: 9f…".
_KEYED = re.compile(
    r"(?i)\b(?:keys?|tokens?|secrets?|passwords?|credentials?|pat)(?:[ \t]+(?:id|is|was|value))?"
    r"[ \t]*[:=]?[ \t]+(?P<value>[A-Za-z0-9+/_~.-]{16,}={0,2})(?![A-Za-z0-9+/_~=-])"
)

# A wallet's BIP-39 mnemonic after the words that name it ("seed phrase: witch collapse …"): 12, 15,
# 18, 21 or 24 lowercase words of 3 to 8 letters (the wordlist's), ending the clause — the wallet's
# private key. Prose breaks such a run within a few words (a word of one or two letters, punctuation).
_SEED_PHRASE = re.compile(
    r"(?i:\b(?:mnemonic|wallet[ \t]+seed"
    r"|(?:secret[ \t]+)?(?:seed|recovery|backup)[ \t]+(?:phrase|words|sentence))"
    r"(?:[ \t]+(?:is|was)[ \t]*:?|[ \t]*[:=])[ \t]*)[\"'`]?(?P<value>[a-z]{3,8}(?:[ \t,]+[a-z]{3,8}){11,23})"
    r"(?=[ \t]*(?:$|[.;:!?\"'`)\]]))"
)
_MNEMONIC_LENGTHS = frozenset({12, 15, 18, 21, 24})

# Values that are no secret: references (`${…}`, `$(…)`, `$NAME`), placeholders (`<your token>`),
# code (a call or an index), types, paths, auth scheme names, YAML block indicators, the marker.
_NOT_A_VALUE = re.compile(
    r"""(?x)^(?:
        |\$\{.*\}|\$\(.*\)|\$[A-Z_][A-Z0-9_]*|%\(.*|\{\{.*|<[A-Za-z][A-Za-z _-]*>?|\[REDACTED.*
        |\*+|\#+|\.{3}|…|(?i:x{3,})|[A-Za-z0-9_.-]*(?:\*{3,}|…|\.{3}|(?i:x{4,}))|[|>][+-]?[0-9]?|(?:~|\.{1,2})?/[^\s]*
        |(?i:null|none|nil|true|false|yes|no|on|off|undefined|required|optional|empty|n/?a|tbd|todo)
        |(?i:str|string|bytes|int|integer|number|bool|boolean|any|secretstr|optional\[.*|dict.*|list.*)
        |(?i:oauth2?|bearer|basic|digest|jwt|saml|oidc|ntlm|kerberos|mtls|sso|ldap|iam)
        |[A-Za-z_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(.*\)|\[.*\]|[(\[])  # a call, an index: code
        |[A-Za-z_]+(?:\.[A-Za-z_]+)*\([A-Za-z_][A-Za-z0-9_.]*  # a call going on: `Auth(user, pw)`
        |(?:os|process|settings|config|env|self|cls|ctx|request|args|options)\.[A-Za-z_.]+
    )$"""
)
# Prose words that follow "the password is" without being one.
_PROSE_WORDS = frozenset(
    (
        "a", "an", "the", "in", "on", "at", "of", "to", "for", "by", "from", "not", "never", "always",
        "still", "now", "also", "only", "just", "being", "been", "too", "very", "so", "set", "unset",
        "stored", "saved", "kept", "hashed", "salted", "encrypted", "rotated", "changed", "reset",
        "generated", "shown", "hidden", "masked", "managed", "sent", "missing", "wrong", "incorrect",
        "correct", "invalid", "valid", "expired", "revoked", "required", "optional", "blank", "empty",
        "there", "here", "mine", "yours", "ours", "theirs", "it", "this", "that", "same", "different",
        "longer", "shorter", "weak", "strong", "case", "sensitive", "insensitive", "protected", "leaked",
        "compromised", "public", "private", "available", "needed", "necessary", "used", "checked",
        "verified", "given", "provided", "handled", "passed", "read", "loaded", "fetched", "injected",
        "mounted", "configured", "defined", "ignored", "included", "excluded", "cached", "logged",
        "printed", "what", "how", "why", "where", "when", "which", "who", "whatever", "probably", "likely",
        "usually", "definitely", "actually", "really", "fine", "ok", "okay", "good", "bad", "easy", "hard",
        "simple", "long", "short", "old", "new", "expire", "rotate", "change", "something",
    )
)  # fmt: skip
_PUNCTUATION_TAIL = ".,;:!?)]}…"
# Unquoted prose after "the password is" that reads as a word: a participle, an adverb, a compound.
_PROSE_SHAPE = re.compile(r"[a-z]+(?:ed|ing|ly|ive|ous|ble)|[a-z]+(?:-[a-z]+)+")


def _strong_value(name: str, value: str) -> bool:
    """A password-like name: any value (a number of ≥ 4 digits). Another strong name (token, secret,
    key, auth): a number never (a count), a word only when it looks random or is ≥ 16 characters."""
    if value.isdigit():
        return _password_name(name) and len(value) >= 4
    if _password_name(name):
        return True
    return looks_random(value) or len(value) >= 16


def _password_name(name: str) -> bool:
    name = name.lower()
    return "pass" in name or name.endswith(("pwd", "pw"))


def _not_a_value(match: re.Match[str], value: str) -> bool:
    """A reference, placeholder or code, judged on the value and (bare) on its untrimmed spelling."""
    raw = match.group("bare")
    return _excused(value) or (raw is not None and _excused(raw))


# A value that starts as a path does (`/run/secrets/db`, `~/.aws/credentials`).
_PATH_START = re.compile(r"(?:~|\.{1,2})?(?=/)")


def _excused(value: str) -> bool:
    """Not a value by `_NOT_A_VALUE`; one that starts with `/` only when it is a path of names, as
    base64 (a secret's spelling) starts with `/` once in 64."""
    if _NOT_A_VALUE.match(value) is None:
        return False
    start = _PATH_START.match(value)
    if start is None:
        return True
    path = value[start.end() :]
    return path.strip("/.") == "" or path_of_names(path)


def _value_of(match: re.Match[str]) -> tuple[str, int, int]:
    for group in ("tq", "ts", "eq", "dq", "sq", "bq", "bare"):
        if match.group(group) is not None:
            start, end = match.span(group)
            value = match.group(group)
            if group == "bare":
                trimmed = value.rstrip(_PUNCTUATION_TAIL)
                if trimmed:
                    end -= len(value) - len(trimmed)
                    value = trimmed
            return value, start, end
    raise AssertionError("the value pattern always sets one group")


def _clause_length(match: re.Match[str]) -> int | None:
    """After `password: ` (a colon and a space, as in prose and YAML) a bare password runs to the
    end of its clause ("my password: correct horse battery staple"); elsewhere it is one word."""
    start = match.start("bare")
    clause = match.group("clause")
    if start < 0 or not clause or not _password_name(match.group("strong")):
        return None
    if match.group("bare")[-1] in _PUNCTUATION_TAIL or not re.search(r":[ \t]+$", match.string[:start]):
        return None
    return match.end("clause") - start


def _replace_value(match: re.Match[str], redact: bool, length: int | None = None) -> str:
    """The match with its value (or the value's first `length` characters) replaced by the marker."""
    if not redact:
        return match.group(0)
    _, start, end = _value_of(match)
    if length is not None:
        end = start + length
    whole_start = match.start()
    text = match.group(0)
    return text[: start - whole_start] + REDACTED + text[end - whole_start :]


# A weak name's value is judged up to the first character no token holds (`AccountKey=…;Endpoint…`).
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_.~-]*")


def _assignment(match: re.Match[str]) -> str:
    """A strong name: any value but a reference or placeholder. A weak name: a random-looking value."""
    value, _, _ = _value_of(match)
    name = match.group("strong")
    if name is not None:
        if name.lower() == "pass" and value.lower() in _PROSE_WORDS:
            return match.group(0)  # the verb: "pass: the ball to Bob"
        redact = _strong_secret(match, value) or _query_secret(match, value)
        return _replace_value(match, redact, _clause_length(match) if redact else None)
    run = _TOKEN_RUN.match(value)
    token = run.group(0) if run else ""
    return _replace_value(match, high_entropy(token), len(token))


def _query_secret(match: re.Match[str], value: str) -> bool:
    """A query parameter a strong name names (`?secret=…`, `&token=…`) is a credential whatever its
    length: a URL carries no prose, nor a setting's count (a number still is none)."""
    at = match.start()
    in_query = at > 0 and match.string[at - 1] in "?&"
    return in_query and not value.isdigit() and not _not_a_value(match, value)


def _prose(match: re.Match[str]) -> str:
    """After "the password is": a quoted value, a random-looking one, or a word that ends its clause
    and does not read as prose ("… is swordfish, don't share", not "… is probably wrong"); after "the
    token is" only a random-looking or quoted value, or one of ≥ 20 token characters."""
    value, _, end = _value_of(match)
    if _not_a_value(match, value) or value.lower() in _PROSE_WORDS:
        return match.group(0)
    if match.group("bare") is None:
        return _replace_value(match, len(value) >= 6 or _password_word(match.group("word")))
    if looks_random(value):
        return _replace_value(match, True)
    if _password_word(match.group("word")):
        word = _PROSE_SHAPE.fullmatch(value) is not None and not _passphrase(value)
        return _replace_value(match, _ends_clause(match.string, end) and not word)
    return _replace_value(match, len(value) >= 20 and re.fullmatch(r"[A-Za-z0-9_+/=-]+", value) is not None)


# What ends a clause after a value: the line's end, or punctuation before a space or the end.
_CLAUSE_END = re.compile(r"[ \t]*(?:$|[.,;:!?)\]}…]+(?:[ \t]|$))")


# Words that make a hyphenated compound read as prose ("up-to-date", "state-of-the-art").
_LINKING_WORDS = frozenset(
    ("a", "an", "the", "to", "of", "in", "on", "at", "by", "for", "and", "or", "up", "out", "off", "with",
     "from", "per", "as", "be", "not", "non", "self", "re", "pre", "co")
)  # fmt: skip


# Accounts whose password may be a plain word ("login with admin/admin"); another user's word after
# the `/` names a second choice ("sign in with Google/GitHub").
_ACCOUNTS = frozenset(("admin", "administrator", "root", "sa", "postgres", "guest", "user", "test", "demo"))
_PLACEHOLDERS = frozenset(("password", "passwd", "pass", "pwd", "pw", "secret", "token", "email", "username"))
_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")


def _login_pair(match: re.Match[str]) -> str:
    """`user/password` after "login with": a value with a digit or a symbol, a number, or any word
    after an account like `admin`; never after a number (a time), nor a placeholder, a constant or a
    path."""
    value, _, _ = _value_of(match)
    user = match.group("user").lower()
    if user.isdigit() or _not_a_value(match, value) or value.lower() in _PROSE_WORDS | _PLACEHOLDERS:
        return match.group(0)  # a time or a ratio ("login 10:30:00"), a reference, a placeholder
    if value.isdigit():
        redact = True
    elif value.isalpha():
        redact = user in _ACCOUNTS
    else:
        redact = _CONSTANT.fullmatch(value) is None and not path_of_names(value)
    return _replace_value(match, redact)


def _passphrase(value: str) -> bool:
    """Three or more words joined by `-` with no linking word among them: a generated passphrase
    (`purple-monkey-dishwasher`, as diceware and the password managers' generators make), not a
    compound adjective ("case-sensitive", "up-to-date")."""
    parts = value.split("-")
    return len(parts) >= 3 and all(parts) and not _LINKING_WORDS.intersection(parts)


def _ends_clause(line: str, end: int) -> bool:
    """The value is the last word of its clause ("… is swordfish, don't share"), as a password is
    and a word of a sentence that goes on ("… is something we rotate") is not."""
    return _CLAUSE_END.match(line, end) is not None


def _password_word(word: str) -> bool:
    word = word.lower()
    return word.startswith("pass") or word in ("pwd", "pw")


def _flag(match: re.Match[str]) -> str:
    """`--password VALUE`, `password VALUE`: only a value that looks random or is ≥ 8 characters."""
    value, _, _ = _value_of(match)
    if _not_a_value(match, value) or value.lower() in _PROSE_WORDS:
        return match.group(0)
    return _replace_value(match, looks_random(value) or (match.group("bare") is None and len(value) >= 8))


def _lone(match: re.Match[str]) -> str:
    """A lone `password VALUE` line: any value that does not read as prose."""
    value, _, _ = _value_of(match)
    prose = value.lower() in _PROSE_WORDS or _PROSE_SHAPE.fullmatch(value) is not None
    return _replace_value(match, not prose and not _not_a_value(match, value))


def _keyed(match: re.Match[str]) -> str:
    value = match.group("value").rstrip(".")
    if not keyed_value(value):
        return match.group(0)
    start = match.start("value") - match.start()
    return match.group(0)[:start] + REDACTED + match.group(0)[start + len(value) :]


def _element(match: re.Match[str]) -> str:
    """`<password>VALUE</password>`: the value by the strong-name rule."""
    value = match.group("value").strip()
    if _NOT_A_VALUE.match(value) or not _strong_value(match.group("tag"), value):
        return match.group(0)
    start, end = match.span("value")
    return match.string[match.start() : start] + REDACTED + match.string[end : match.end()]


def _setter(match: re.Match[str]) -> str:
    value, _, _ = _value_of(match)
    return _replace_value(match, _strong_secret(match, value))


def _cell(match: re.Match[str]) -> str:
    """A table cell after a secret's name: a value, not a word of its description."""
    value, _, _ = _value_of(match)
    return _replace_value(match, value.lower() not in _PROSE_WORDS and _strong_secret(match, value))


def _strong_secret(match: re.Match[str], value: str) -> bool:
    """The value of a strong name (the `strong` group) is a secret: neither a reference nor a
    placeholder, and a value that name holds."""
    return not _not_a_value(match, value) and _strong_value(match.group("strong"), value)


def _program_password(line: str) -> str:
    """The flag's value after the first program name on the line (searched from there once, so a
    line full of program names costs its length)."""
    program = _PASSWORD_PROGRAM.search(line)
    if program is None:
        return line
    flags = {
        "mysql": _ATTACHED_P,
        "redis": _FLAG_A,
        "openssl": _FLAG_K,
        "zip": _FLAG_CAPITAL_P,
        "ldap": _FLAG_W,
        "samba": _USER_PERCENT,
        "htpasswd": _HTPASSWD_B,
        "rabbit": _RABBIT_USER,
        "netuse": _NET_USE,
        "securestring": _SECURE_STRING,
    }
    flag = next((flags[name] for name, seen in program.groupdict().items() if seen), _FLAG_P)
    return line[: program.end()] + flag.sub(_argument, line[program.end() :])


def _attached(match: re.Match[str]) -> str:
    """mysql's `-pVALUE`, curl's `-u user:VALUE`: the value whatever it is, but a reference."""
    value, _, _ = _value_of(match)
    return _replace_value(match, not _not_a_value(match, value))


def _argument(match: re.Match[str]) -> str:
    """A program's argument: as `_attached`, and a shell or PowerShell variable (`$pw`, `"$pw"`, not
    the literal `'$pw'`) is a reference too. Files such as .pgpass hold `$` literally: not here."""
    value, _, _ = _value_of(match)
    if match.group("sq") is None and _VARIABLE.fullmatch(value) is not None:
        return match.group(0)
    return _attached(match)


_VARIABLE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_:]*\}?")


# Every name and prose rule needs one of these words on the line (lowercase): lines without one are
# skipped, which is most lines of a transcript.
_NAME_WORDS = (
    "pass", "pwd", "secret", "token", "key", "auth", "cred", "salt", "hmac", "sig", "cookie", "session",
    "license", "dsn", "cert", "pw", "mysql", "mariadb", "-u", "redis", "login", "pat", "openssl", "zip",
    "ldap", "sqlcmd", "bcp", "mongo", "mnemonic", "seed", "phrase", "usermod", "useradd", "rabbitmq",
    "net use", "securestring", "sudo", "log in", "logged in", "log-in", "sign in", "signed in", "sign-in",
)  # fmt: skip


# A strong name (last on its line, after a list dash or a `user:` prefix) whose value is not on its
# line: YAML's `password:` or `password: |` with the value on the more-indented lines below, or a
# quote opened and not closed on the line.
_CONTINUED = re.compile(
    rf"(?m)^(?P<indent>[ \t]*)(?:[^\n]*?[ \t])?[\"']?(?i:{_STRONG_NAME})[\"']?[ \t]*:[ \t]*"
    r"(?:[|>][+-]?[0-9]?[ \t]*|(?P<quote>[\"'])[^\"'\n]*)?$"
)

# What such a line ends with (searched first: a colon, a block indicator or an open quote at the end
# of a line is rare, so the full pattern runs on few lines).
_CONTINUED_END = re.compile(r"(?m):[ \t]*(?:[|>][+-]?[0-9]?[ \t]*|[\"'][^\"'\n]*)?$")


def _redact_continuations(text: str) -> str:
    """The value of each such name → the marker: up to the closing quote, or every following line
    indented deeper than the name (blank lines between them included)."""
    out: list[str] = []
    pos = 0
    for candidate in _CONTINUED_END.finditer(text):
        line_start = text.rfind("\n", 0, candidate.start()) + 1
        match = _CONTINUED.match(text, line_start)
        if match is None or match.start() < pos:
            continue
        quote = match.group("quote")
        if quote is not None:
            start = match.start("quote") + 1
            close = text.find(quote, match.end())
            stop = close if close >= 0 else len(text)
            replacement = REDACTED
        else:
            start = stop = match.end()
            depth = len(match.group("indent"))
            while stop < len(text):
                end = text.find("\n", stop + 1)
                end = len(text) if end < 0 else end
                line = text[stop + 1 : end]
                if line.strip() and len(line) - len(line.lstrip(" \t")) <= depth:
                    break
                stop = end
            if stop == start or not text[start:stop].strip():
                continue
            replacement = "\n" + " " * (depth + 2) + REDACTED
        out.append(text[pos:start] + replacement)
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def redact_names(text: str) -> str:
    """Every value `text` names as a secret → the marker: continued values first (they span lines),
    then each line's assignments, flags and prose."""
    lowered = text.lower()
    if not any(word in lowered for word in _NAME_WORDS) and text.count(":") < 4:
        return text
    if "\n" in text:
        text = _redact_continuations(text)
    return "\n".join(_redact_line(line) for line in text.split("\n"))


def _redact_line(line: str) -> str:
    """Assignments and prose never span lines; a line without a credential word is left alone."""
    if line.count(":") >= 4:
        line = _PGPASS.sub(_attached, line)
    lowered = line.lower()
    if not any(word in lowered for word in _NAME_WORDS):
        return line
    line = _ASSIGNMENT.sub(_assignment, line)
    if "<" in line:
        line = _NAMED_VALUE.sub(_setter, _ELEMENT.sub(_element, line))
    if "(" in line:
        line = _CREDENTIAL_CALL.sub(_attached, _SETTER.sub(_setter, line))
    if "|" in line:
        line = _TABLE_CELL.sub(_cell, line)
    line = _CLI_FLAG.sub(_flag, line)
    line = _JAVA_PASS.sub(_attached, line)
    line = _USER_PASSWORD.sub(_attached, line)
    line = _program_password(line)
    line = _NETRC.sub(_attached, line)
    if "|" in line:
        line = _PIPED.sub(_argument, line)
    line = _PROSE.sub(_prose, _SET_TO.sub(_prose, line))
    line = _LOGIN_PAIR.sub(_login_pair, line)
    line = _LONE_PASSWORD.sub(_lone, line)
    line = _NAME_THEN_VALUE.sub(_flag, line)
    line = _SEED_PHRASE.sub(_seed_phrase, line)
    return _KEYED.sub(_keyed, line)


def _seed_phrase(match: re.Match[str]) -> str:
    if len(re.findall(r"[a-z]+", match.group("value"))) not in _MNEMONIC_LENGTHS:
        return match.group(0)
    start, end = match.start("value") - match.start(), match.end("value") - match.start()
    return match.group(0)[:start] + REDACTED + match.group(0)[end:]
