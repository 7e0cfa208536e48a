"""A secret corpus written from vendors' own documentation of their token formats, before the
generic detectors were (a generalization check: the redactor was never tuned on it beyond the
documented formats). Each value is made up: a seeded draw from the documented alphabet and length,
so no real credential is in it and the corpus is the same on every run.

Sources, one per vendor family (the vendor's format page, or its docs' example where it has no
format page): GitLab token overview (glpat-, gldt-, glrt-, glptt-, gloas-, glcbt-, glft-, glimt-,
glsoat-), Sentry "Token and Credential Formats" (sntryu_, sntrys_), Tailscale "Key prefixes"
(tskey-api-, tskey-auth-, tskey-client-), Doppler API authentication (dp.st., dp.pt., dp.ct., dp.sa.),
HashiCorp Vault tokens (hvs., hvb., hvr.), New Relic API keys (NRAK-, NRII-, 40-hex license keys
ending NRAL), Heroku Platform API (HRKU- keys, UUID tokens in `heroku authorizations:create`),
Notion authentication (ntn_, legacy secret_), Grafana service accounts (glsa_), age (AGE-SECRET-KEY-1),
Shopify access tokens (shpat_, shpca_, shppa_, shpss_), Mailgun API keys (key-), Telegram Bot API
(`<bot id>:<35 chars>`), Discord webhooks and bot tokens, Datadog API/application keys (32/40 hex),
Google service-account JSON, OAuth client secrets (GOCSPX-) and access tokens (ya29.), PostgreSQL
.pgpass, sshpass(1), netrc(5), Hugging Face (hf_), Linear (lin_api_), Postman (PMAK-), DigitalOcean
(dop_v1_), Databricks (dapi), Pulumi (pul-), Supabase (sbp_), Atlassian (ATATT3), Airtable (pat…),
Docker Hub (dckr_pat_), Terraform Cloud (.atlasv1.), Fly.io (fo1_), Netlify (nfp_), PlanetScale
(pscale_tkn_, pscale_pw_), Render (rnd_), Groq (gsk_), Replicate (r8_), Perplexity (pplx-), xAI (xai-),
Contentful (CFPAT-), RubyGems (rubygems_), NuGet (oy2), Clojars (CLOJARS_), Buildkite (bkua_),
Bitbucket app passwords (ATBB), Square (EAAA, sq0csp-), Braintree (access_token$production$),
Mailchimp (`<32 hex>-us<n>`), Azure storage connection strings (AccountKey=) and Entra client secrets
(`…Q~…`), AWS secret access keys, Alibaba Cloud (LTAI), Tencent Cloud (AKID), Okta API tokens (00…),
Mapbox secret tokens (sk.eyJ…), Dropbox short-lived tokens (sl.), Splunk HEC (`Authorization: Splunk`),
Figma (figd_), Frame.io (fio-u-), Shippo (shippo_live_), LaunchDarkly (sdk-, api-), Honeycomb (hcaik_),
Confluent Cloud API secrets, WireGuard private keys, Ethereum private keys, Bitcoin WIF keys,
MongoDB/Redis/JDBC/ADO.NET connection strings, 1Password service accounts (ops_eyJ…), Cloudflare API
tokens, LangSmith (lsv2_pt_, lsv2_sk_), Brevo (xkeysib-), Zapier catch hooks (hooks.zapier.com),
and, next to the public look-alikes of `lookalike_corpus`, the secrets that share their encodings: a
Bitcoin WIF key with its base58check checksum, a BIP-32 extended private key (xprv), a Nostr NIP-19
`nsec` (bech32); and the shapes the outside corpus found: escaped JSON keys, keys split over two
lines, by an HTML entity or a zero-width character, and percent-encoded.
"""

from __future__ import annotations

import hashlib
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

from tests.memory.rules.lookalike_corpus import base58check, bech32, convertbits

B62 = string.ascii_letters + string.digits
B64URL = B62 + "-_"
B64 = B62 + "+/"
HEX = "0123456789abcdef"
UPPER_ALNUM = string.ascii_uppercase + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class VendorCase:
    vendor: str
    kind: str
    text: str
    secrets: tuple[str, ...]  # each must be absent from the redacted text


_draws = random.Random(20261201)


def r(alphabet: str, length: int) -> str:
    """`length` characters drawn from `alphabet` (seeded: the corpus is the same on every run)."""
    return "".join(_draws.choice(alphabet) for _ in range(length))


def _uuid() -> str:
    return "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12))


def _c(vendor: str, kind: str, text: str, *secrets: str) -> VendorCase:
    return VendorCase(vendor, kind, text, secrets)


def _t(
    vendor: str,
    kind: str,
    text: Callable[[str], str],
    token: str,
    part: Callable[[str], str] = lambda token: token,
) -> VendorCase:
    """A case of one token: `text` places it in its context, `part` says which of it must go."""
    return VendorCase(vendor, kind, text(token), (part(token),))


def _cases() -> tuple[VendorCase, ...]:
    glpat = "glpat-" + r(B64URL, 20)
    gcp_key_id = r(HEX, 40)
    dd_app = r(HEX, 40)
    dd_api = r(HEX, 32)
    split_key = "glpat-" + r(B62, 26)
    entity_key = "hf_" + r(string.ascii_letters, 34)
    zw_key = "sntryu_" + r(HEX, 64)
    pct_pw = r(B62, 12)
    aws_secret = r(B64, 40)
    azure_key = r(B64, 86) + "=="
    heroku_uuid = _uuid()
    wg = r(B64, 43) + "="
    cases = [
        # GitLab
        _c("gitlab", "personal access token, documented 20 characters", f"my gitlab token is {glpat}", glpat),
        _c(
            "gitlab",
            "PAT in a git remote",
            f"git clone https://oauth2:{glpat}@gitlab.com/acme/api.git",
            glpat,
        ),
        _t("gitlab", "deploy token", lambda t: f"deploy with {t} in CI", "gldt-" + r(B64URL, 20)),
        _t("gitlab", "runner authentication token", lambda t: f'token = "{t}"', "glrt-" + r(B64URL, 20)),
        _t(
            "gitlab",
            "pipeline trigger token",
            lambda t: f"curl -F token={t} -F ref=main",
            "glptt-" + r(HEX, 40),
        ),
        _t(
            "gitlab",
            "OAuth application secret",
            lambda t: f"the app secret came back as {t}",
            "gloas-" + r(HEX, 64),
        ),
        _t(
            "gitlab",
            "CI/CD job token",
            lambda t: f"job token {t} leaked in the log",
            "glcbt-" + r(B64URL, 20),
        ),
        _t("gitlab", "feed token", lambda t: f"RSS url had ?feed_token={t}", "glft-" + r(B64URL, 20)),
        _t("gitlab", "SCIM token", lambda t: f"scim: {t}", "glsoat-" + r(B64URL, 20)),
        # HashiCorp Vault
        _t("vault", "service token", lambda t: f"export VAULT_TOKEN={t}", "hvs." + r(B64URL, 90)),
        _t(
            "vault", "service token in prose", lambda t: f"use {t} for the staging vault", "hvs." + r(B62, 24)
        ),
        _t("vault", "batch token", lambda t: f"batch token: {t}", "hvb." + r(B64URL, 120)),
        _t("vault", "recovery token", lambda t: f"recovery {t} (rotate after use)", "hvr." + r(B62, 24)),
        # age
        _t("age", "identity", lambda t: f"# created: 2024-01-01\n{t}", "AGE-SECRET-KEY-1" + r(BECH32, 58)),
        # Shopify
        _t(
            "shopify",
            "admin API access token",
            lambda t: f"X-Shopify-Access-Token: {t}",
            "shpat_" + r(HEX, 32),
        ),
        _t("shopify", "custom app token", lambda t: f"custom app: {t}", "shpca_" + r(HEX, 32)),
        _t("shopify", "private app token", lambda t: f"private app password {t}", "shppa_" + r(HEX, 32)),
        _t("shopify", "shared secret", lambda t: f"the webhook shared secret {t}", "shpss_" + r(HEX, 32)),
        # Doppler
        _t(
            "doppler",
            "service token",
            lambda t: f"DOPPLER_TOKEN='{t}' doppler run",
            "dp.st.prd." + r(B62, 43),
        ),
        _t("doppler", "personal token", lambda t: f"personal token {t}", "dp.pt." + r(B62, 43)),
        _t("doppler", "CLI token", lambda t: f"doppler configure set token {t}", "dp.ct." + r(B62, 43)),
        _t(
            "doppler", "service account token", lambda t: f"sa token {t} for terraform", "dp.sa." + r(B62, 43)
        ),
        # New Relic
        _t(
            "new relic",
            "user API key",
            lambda t: f"NerdGraph call with API-Key: {t}",
            "NRAK-" + r(UPPER_ALNUM, 27),
        ),
        _t("new relic", "insights insert key", lambda t: f"insert key {t}", "NRII-" + r(B64URL, 32)),
        _t("new relic", "license key", lambda t: f"license_key: {t}", r(HEX, 36) + "NRAL"),
        # Mailgun
        _t("mailgun", "API key", lambda t: f"api:{t} is the basic auth pair", "key-" + r(HEX, 32)),
        _t(
            "mailgun",
            "new-style API key",
            lambda t: f"MAILGUN_API_KEY={t}",
            f"{r(HEX, 32)}-{r(HEX, 8)}-{r(HEX, 8)}",
        ),
        # Telegram
        _t(
            "telegram",
            "bot token",
            lambda t: f"BotFather gave me {t}",
            f"{r(string.digits, 10)}:AA{r(B64URL, 33)}",
        ),
        _t(
            "telegram",
            "bot token in an API URL",
            lambda t: f"https://api.telegram.org/bot{t}/getMe",
            f"{r(string.digits, 9)}:AA{r(B64URL, 33)}",
        ),
        # Discord
        _t(
            "discord",
            "webhook URL",
            lambda t: f"post to https://discord.com/api/webhooks/{r(string.digits, 18)}/{t}",
            r(B64URL, 68),
        ),
        _t(
            "discord",
            "bot token",
            lambda t: f"client.run('{t}')",
            f"{r(B64URL, 24)}.{r(B64URL, 6)}.{r(B64URL, 38)}",
        ),
        # Datadog
        _c("datadog", "application key in prose", f"the Datadog app key {dd_app} expires Friday", dd_app),
        _c("datadog", "API key in env", f"DD_API_KEY={dd_api}", dd_api),
        _t("datadog", "app key header", lambda t: f"-H 'DD-APPLICATION-KEY: {t}'", r(HEX, 40)),
        # Google
        _c("google", "service account private_key_id", f'"private_key_id": "{gcp_key_id}",', gcp_key_id),
        _t(
            "google", "OAuth client secret", lambda t: f"client secret GOCSPX: {t}", "GOCSPX-" + r(B64URL, 28)
        ),
        _t("google", "OAuth access token", lambda t: f"gcloud printed {t}", "ya29." + r(B64URL, 150)),
        _t("google", "OAuth refresh token", lambda t: f'"refresh_token": "{t}"', "1//0" + r(B64URL, 99)),
        _t("google", "API key", lambda t: f"maps key {t}", "AIza" + r(B64URL, 35)),
        # PostgreSQL / shells
        _t("postgres", ".pgpass line", lambda t: f"db.internal:5432:app:admin:{t}", r(B62, 14)),
        _t("postgres", ".pgpass with wildcards", lambda t: f"*:*:*:replicator:{t}", r(B62, 10) + "!"),
        _t("sshpass", "-p quoted", lambda t: f"sshpass -p '{t}' ssh deploy@10.0.0.5", r(B62, 12)),
        _t(
            "sshpass",
            "-p bare",
            lambda t: f"sshpass -p {t} scp a.tgz host:/tmp",
            r(string.ascii_lowercase, 9),
        ),
        _t("netrc", "machine line", lambda t: f"machine api.example.com login bot password {t}", r(B62, 16)),
        _t(
            "mysql",
            "-p attached",
            lambda t: f"mysql -uroot -p{t} app < dump.sql",
            r(string.ascii_lowercase, 8),
        ),
        _t("redis", "redis-cli -a", lambda t: f"redis-cli -h cache -a {t} ping", r(B62, 20)),
        # Hugging Face, Linear, Postman, DigitalOcean, Databricks, Pulumi, Supabase
        _t(
            "hugging face",
            "user access token",
            lambda t: f"huggingface-cli login --token {t}",
            "hf_" + r(string.ascii_letters, 34),
        ),
        _t("linear", "personal API key", lambda t: f"Authorization: {t}", "lin_api_" + r(B62, 40)),
        _t("postman", "API key", lambda t: f"x-api-key: {t}", f"PMAK-{r(HEX, 24)}-{r(HEX, 34)}"),
        _t(
            "digitalocean",
            "personal access token",
            lambda t: f"doctl auth init -t {t}",
            "dop_v1_" + r(HEX, 64),
        ),
        _t("digitalocean", "OAuth token", lambda t: f"oauth gave {t}", "doo_v1_" + r(HEX, 64)),
        _t("databricks", "personal access token", lambda t: f"DATABRICKS_TOKEN={t}", "dapi" + r(HEX, 32)),
        _t("databricks", "PAT in a config file", lambda t: f"token = {t}", "dapi" + r(HEX, 32)),
        _t("pulumi", "access token", lambda t: f"PULUMI_ACCESS_TOKEN={t} pulumi up", "pul-" + r(HEX, 40)),
        _t("supabase", "management token", lambda t: f"supabase login --token {t}", "sbp_" + r(HEX, 40)),
        # Atlassian, Airtable, Docker, Terraform, Fly, Netlify, PlanetScale, Render
        _t(
            "atlassian",
            "API token",
            lambda t: f"jira api token {t}",
            "ATATT3xFfGF0" + r(B64URL, 170) + "=" + r(HEX, 8),
        ),
        _t(
            "airtable",
            "personal access token",
            lambda t: f"AIRTABLE_PAT: {t}",
            f"pat{r(B62, 14)}.{r(HEX, 64)}",
        ),
        _t(
            "docker hub",
            "personal access token",
            lambda t: f"docker login -u acme -p {t}",
            "dckr_pat_" + r(B64URL, 27),
        ),
        _t(
            "terraform cloud",
            "user token",
            lambda t: f'credentials "app.terraform.io" {{ token = "{t}" }}',
            f"{r(B62, 14)}.atlasv1.{r(B62, 67)}",
        ),
        _t("fly.io", "access token", lambda t: f"FLY_API_TOKEN={t}", "fo1_" + r(B64URL, 43)),
        _t("netlify", "personal access token", lambda t: f"netlify deploy --auth {t}", "nfp_" + r(B62, 36)),
        _t("planetscale", "service token", lambda t: f"service token {t}", "pscale_tkn_" + r(B64URL, 43)),
        _t("planetscale", "database password", lambda t: f"connect with {t}", "pscale_pw_" + r(B64URL, 43)),
        _t("render", "API key", lambda t: f"render api key {t}", "rnd_" + r(B62, 32)),
        # AI providers
        _t("groq", "API key", lambda t: f"GROQ_API_KEY={t}", "gsk_" + r(B62, 52)),
        _t("replicate", "API token", lambda t: f"replicate token r8: {t}", "r8_" + r(B62, 37)),
        _t("perplexity", "API key", lambda t: f"key {t} for sonar", "pplx-" + r(B62, 48)),
        _t("xai", "API key", lambda t: f'XAI_API_KEY="{t}"', "xai-" + r(B62, 80)),
        _t("anthropic", "admin key", lambda t: f"admin key {t}", "sk-ant-admin01-" + r(B64URL, 93) + "AA"),
        _t("openai", "project key", lambda t: f"OPENAI_API_KEY={t}", "sk-proj-" + r(B64URL, 156)),
        # Package registries, CI
        _t(
            "contentful",
            "management token",
            lambda t: f"contentful login --management-token {t}",
            "CFPAT-" + r(B64URL, 43),
        ),
        _t("rubygems", "API key", lambda t: f":rubygems_api_key: {t}", "rubygems_" + r(HEX, 48)),
        _t("nuget", "API key", lambda t: f"dotnet nuget push -k {t}", "oy2" + r(LOWER_ALNUM, 43)),
        _t("clojars", "deploy token", lambda t: f"deploy token {t}", "CLOJARS_" + r(HEX, 60)),
        _t("buildkite", "API access token", lambda t: f"BUILDKITE_API_TOKEN={t}", "bkua_" + r(HEX, 40)),
        _t("bitbucket", "app password", lambda t: f"bitbucket app password {t}", "ATBB" + r(B62, 32)),
        _t("npm", "token in .npmrc", lambda t: f"//registry.npmjs.org/:_authToken={t}", "npm_" + r(B62, 36)),
        _t(
            "pypi",
            "API token in .pypirc",
            lambda t: f"password = {t}",
            "pypi-AgEIcHlwaS5vcmc" + r(B64URL, 150),
        ),
        _t("github", "classic token in prose", lambda t: f"PAT {t} has repo scope", "ghp_" + r(B62, 36)),
        # Payments
        _t("square", "access token", lambda t: f"SQUARE_ACCESS_TOKEN={t}", "EAAA" + r(B64URL, 60)),
        _t("square", "application secret", lambda t: f"app secret {t}", "sq0csp-" + r(B64URL, 43)),
        _t(
            "braintree",
            "access token",
            lambda t: f"braintree {t}",
            f"access_token$production${r(LOWER_ALNUM, 16)}${r(HEX, 32)}",
            part=lambda t: t.split("$")[-1],
        ),
        _t("stripe", "secret key (long form)", lambda t: f"stripe key {t}", "sk_live_" + r(B62, 99)),
        _t("shippo", "live token", lambda t: f"ShippoToken {t}", "shippo_live_" + r(HEX, 40)),
        _t(
            "mailchimp",
            "API key",
            lambda t: f"mailchimp api key {t}",
            f"{r(HEX, 32)}-us{r(string.digits, 2)}",
        ),
        # Cloud
        _c(
            "aws",
            "secret access key in credentials file",
            f"aws_secret_access_key = {aws_secret}",
            aws_secret,
        ),
        _t("aws", "secret key as JSON", lambda t: f'{{"SecretAccessKey": "{t}"}}', r(B64, 40)),
        _c(
            "azure",
            "storage connection string",
            f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={azure_key};EndpointSuffix=core.windows.net",
            azure_key,
        ),
        _t(
            "azure",
            "Entra client secret",
            lambda t: f"client secret value {t}",
            f"{r(B64URL, 3)}8Q~{r(B64URL, 34)}",
        ),
        _t("alibaba", "AccessKey ID", lambda t: f"alibaba access key LTAI: {t}", "LTAI" + r(B62, 20)),
        _t("tencent", "SecretId", lambda t: f"tencent SecretId {t}", "AKID" + r(B62, 32)),
        _t("okta", "API token", lambda t: f"Authorization: SSWS {t}", "00" + r(B64URL, 40)),
        _t(
            "mapbox",
            "secret token",
            lambda t: f"MAPBOX_TOKEN={t}",
            f"sk.eyJ1Ijoi{r(B64URL, 20)}.{r(B64URL, 22)}",
        ),
        _t("dropbox", "short-lived token", lambda t: f"dropbox gave {t}", "sl." + r(B64URL, 135)),
        _c("splunk", "HEC token header", f"-H 'Authorization: Splunk {heroku_uuid}'", heroku_uuid),
        _t("heroku", "API key (new format)", lambda t: f"HEROKU_API_KEY={t}", "HRKU-AA" + r(B64URL, 58)),
        _t("heroku", "API key (UUID) in env", lambda t: f"export HEROKU_API_KEY={t}", _uuid()),
        _t("notion", "integration token", lambda t: f"NOTION_TOKEN={t}", "ntn_" + r(B62, 46)),
        _t(
            "notion",
            "legacy internal integration secret",
            lambda t: f"notion secret {t}",
            "secret_" + r(B62, 43),
        ),
        _t(
            "grafana",
            "service account token",
            lambda t: f"grafana token {t}",
            "glsa_" + r(B62, 32) + "_" + r(HEX, 8),
        ),
        _t(
            "grafana",
            "cloud access policy token",
            lambda t: f"GRAFANA_CLOUD_TOKEN={t}",
            "glc_" + r(B64, 100) + "==",
        ),
        _t(
            "sentry",
            "org auth token",
            lambda t: f"SENTRY_AUTH_TOKEN={t}",
            "sntrys_eyJpYXQiOjE3" + r(B64URL, 120),
        ),
        _c(
            "sentry",
            "user auth token split by a zero-width space",
            f"token {zw_key[:30]}\u200b{zw_key[30:]}",
            zw_key,
        ),
        _t(
            "tailscale",
            "auth key",
            lambda t: f"tailscale up --authkey={t}",
            "tskey-auth-" + r(B62, 12) + "CNTRL-" + r(B62, 32),
        ),
        _t(
            "tailscale",
            "API access token",
            lambda t: f"api token {t}",
            "tskey-api-" + r(B62, 12) + "CNTRL-" + r(B62, 32),
        ),
        _t("figma", "personal access token", lambda t: f"X-Figma-Token: {t}", "figd_" + r(B64URL, 40)),
        _t("frame.io", "developer token", lambda t: f"frameio token {t}", "fio-u-" + r(B64URL, 64)),
        _t("launchdarkly", "SDK key", lambda t: f"LD_SDK_KEY={t}", "sdk-" + _uuid()),
        _t("honeycomb", "ingest key", lambda t: f"honeycomb ingest key {t}", "hcaik_" + r(LOWER_ALNUM, 58)),
        _t("confluent", "Cloud API secret", lambda t: f"sasl.password={t}", r(B64, 64)),
        _t("cloudflare", "API token", lambda t: f"CLOUDFLARE_API_TOKEN={t}", r(B64URL, 40)),
        _t(
            "1password",
            "service account token",
            lambda t: f"OP_SERVICE_ACCOUNT_TOKEN={t}",
            "ops_eyJzaWduSW5BZGRyZXNzIjoi" + r(B64URL, 300),
        ),
        # Keys and crypto
        _c(
            "wireguard", "interface private key", f"[Interface]\nPrivateKey = {wg}\nAddress = 10.0.0.2/32", wg
        ),
        _t("ethereum", "private key", lambda t: f"wallet private key: {t}", "0x" + r(HEX, 64)),
        _t(
            "bitcoin",
            "WIF private key",
            lambda t: f"import the WIF {t} into the wallet",
            "5" + r("HJK", 1) + r(BASE58, 49),
        ),
        # Connection strings, DSNs
        _t(
            "mongodb",
            "SRV URI",
            lambda t: f"mongodb+srv://app:{t}@cluster0.ab1cd.mongodb.net/prod",
            r(B62, 16),
        ),
        _t("redis", "URL with an empty user", lambda t: f"REDIS_URL=redis://:{t}@cache:6379/0", r(B62, 18)),
        _t(
            "jdbc",
            "password parameter",
            lambda t: f"jdbc:postgresql://db/app?user=svc&password={t}&ssl=true",
            r(B62, 12),
        ),
        _t(
            "ado.net",
            "connection string",
            lambda t: f"Server=tcp:sql1;Database=app;User Id=sa;Password={t};",
            r(B62, 14),
        ),
        _t(
            "sentry",
            "DSN public key",
            lambda t: f"SENTRY_DSN=https://{t}@o4504.ingest.sentry.io/4505",
            r(HEX, 32),
        ),
        # The splitting and escaping the outside corpus found
        _c(
            "gitlab", "key split over two lines", f"token: {split_key[:16]}\n{split_key[16:]}", split_key[16:]
        ),
        _c(
            "hugging face",
            "key split by an HTML entity",
            f"token {entity_key[:12]}&#8203;{entity_key[12:]}",
            entity_key[12:],
        ),
        _c("generic", "percent-encoded password in a form body", f"user=ops&password%3D{pct_pw}", pct_pw),
        _t("generic", "backslash-escaped JSON key", lambda t: f'{{\\"api_key\\": \\"{t}\\"}}', r(B62, 24)),
        _t(
            "generic",
            "backslash-escaped password",
            lambda t: f'\\"password\\": \\"{t}\\"',
            r(string.ascii_lowercase, 10),
        ),
        _t("generic", "credential in YAML", lambda t: f"credentials:\n  client_secret: {t}", r(B62, 30)),
        _c(
            "heroku",
            "API key in .netrc",
            f"machine api.heroku.com\n  login me@example.com\n  password {heroku_uuid}",
            heroku_uuid,
        ),
        *_encoded_like_public_ids(),
    ]
    return tuple(cases)


def _encoded_like_public_ids() -> list[VendorCase]:
    """Secrets in the encodings public ids use, generated by the formats' own rules (drawn last, so
    the cases above keep their values)."""
    key = hashlib.sha256(r(B62, 32).encode()).digest()
    chain = hashlib.sha256(key).digest()
    wif = base58check(b"\x80", key + b"\x01")  # compressed-key WIF: K… or L…
    xprv = base58check(bytes.fromhex("0488ade4"), b"\x00" * 9 + chain + b"\x00" + key)
    nsec = bech32("nsec", convertbits(key, 5))
    langsmith = "lsv2_pt_" + r(HEX, 32) + "_" + r(HEX, 10)
    brevo = "xkeysib-" + r(HEX, 64) + "-" + r(B62, 16)
    zap_hook = r(LOWER_ALNUM, 7)
    zap = f"{r(string.digits, 8)}/{zap_hook}"
    return [
        _c("bitcoin", "WIF private key with a valid checksum", f"sweep {wif} into the new wallet", wif),
        _c("bitcoin", "BIP-32 extended private key", f"the wallet's xprv is {xprv}", xprv),
        _c("nostr", "NIP-19 nsec secret key", f"my nostr login {nsec} (don't share)", nsec),
        _c("langsmith", "personal access token", f"export LANGSMITH_API_KEY={langsmith}", langsmith),
        _c("langsmith", "token in running text", f"tracing works with {langsmith} now", langsmith),
        _c("brevo", "API v3 key", f"the brevo key {brevo} sends the receipts", brevo),
        # Zapier's "Webhooks by Zapier" catch hook: whoever has the URL can start the Zap.
        _c(
            "zapier",
            "catch hook URL",
            f"POST the form to https://hooks.zapier.com/hooks/catch/{zap}/",
            zap_hook,
        ),
        _c(
            "zapier", "hook URL without a scheme", f"hooks.zapier.com/hooks/standard/{zap} fires it", zap_hook
        ),
    ]


VENDOR_CASES: tuple[VendorCase, ...] = _cases()
