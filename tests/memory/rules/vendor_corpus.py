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
tokens, and the shapes the outside corpus found: escaped JSON keys, keys split over two lines, by an
HTML entity or a zero-width character, and percent-encoded.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

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
        _c("gitlab", "PAT in a git remote", f"git clone https://oauth2:{glpat}@gitlab.com/acme/api.git", glpat),
        (t := "gldt-" + r(B64URL, 20)) and _c("gitlab", "deploy token", f"deploy with {t} in CI", t),
        (t := "glrt-" + r(B64URL, 20)) and _c("gitlab", "runner authentication token", f"token = \"{t}\"", t),
        (t := "glptt-" + r(HEX, 40)) and _c("gitlab", "pipeline trigger token", f"curl -F token={t} -F ref=main", t),
        (t := "gloas-" + r(HEX, 64)) and _c("gitlab", "OAuth application secret", f"the app secret came back as {t}", t),
        (t := "glcbt-" + r(B64URL, 20)) and _c("gitlab", "CI/CD job token", f"job token {t} leaked in the log", t),
        (t := "glft-" + r(B64URL, 20)) and _c("gitlab", "feed token", f"RSS url had ?feed_token={t}", t),
        (t := "glsoat-" + r(B64URL, 20)) and _c("gitlab", "SCIM token", f"scim: {t}", t),
        # HashiCorp Vault
        (t := "hvs." + r(B64URL, 90)) and _c("vault", "service token", f"export VAULT_TOKEN={t}", t),
        (t := "hvs." + r(B62, 24)) and _c("vault", "service token in prose", f"use {t} for the staging vault", t),
        (t := "hvb." + r(B64URL, 120)) and _c("vault", "batch token", f"batch token: {t}", t),
        (t := "hvr." + r(B62, 24)) and _c("vault", "recovery token", f"recovery {t} (rotate after use)", t),
        # age
        (t := "AGE-SECRET-KEY-1" + r(BECH32, 58)) and _c("age", "identity", f"# created: 2024-01-01\n{t}", t),
        # Shopify
        (t := "shpat_" + r(HEX, 32)) and _c("shopify", "admin API access token", f"X-Shopify-Access-Token: {t}", t),
        (t := "shpca_" + r(HEX, 32)) and _c("shopify", "custom app token", f"custom app: {t}", t),
        (t := "shppa_" + r(HEX, 32)) and _c("shopify", "private app token", f"private app password {t}", t),
        (t := "shpss_" + r(HEX, 32)) and _c("shopify", "shared secret", f"the webhook shared secret {t}", t),
        # Doppler
        (t := "dp.st.prd." + r(B62, 43)) and _c("doppler", "service token", f"DOPPLER_TOKEN='{t}' doppler run", t),
        (t := "dp.pt." + r(B62, 43)) and _c("doppler", "personal token", f"personal token {t}", t),
        (t := "dp.ct." + r(B62, 43)) and _c("doppler", "CLI token", f"doppler configure set token {t}", t),
        (t := "dp.sa." + r(B62, 43)) and _c("doppler", "service account token", f"sa token {t} for terraform", t),
        # New Relic
        (t := "NRAK-" + r(UPPER_ALNUM, 27)) and _c("new relic", "user API key", f"NerdGraph call with API-Key: {t}", t),
        (t := "NRII-" + r(B64URL, 32)) and _c("new relic", "insights insert key", f"insert key {t}", t),
        (t := r(HEX, 36) + "NRAL") and _c("new relic", "license key", f"license_key: {t}", t),
        # Mailgun
        (t := "key-" + r(HEX, 32)) and _c("mailgun", "API key", f"api:{t} is the basic auth pair", t),
        (t := f"{r(HEX, 32)}-{r(HEX, 8)}-{r(HEX, 8)}") and _c("mailgun", "new-style API key", f"MAILGUN_API_KEY={t}", t),
        # Telegram
        (t := f"{r(string.digits, 10)}:AA{r(B64URL, 33)}") and _c("telegram", "bot token", f"BotFather gave me {t}", t),
        (t := f"{r(string.digits, 9)}:AA{r(B64URL, 33)}")
        and _c("telegram", "bot token in an API URL", f"https://api.telegram.org/bot{t}/getMe", t),
        # Discord
        (t := r(B64URL, 68))
        and _c(
            "discord",
            "webhook URL",
            f"post to https://discord.com/api/webhooks/{r(string.digits, 18)}/{t}",
            t,
        ),
        (t := f"{r(B64URL, 24)}.{r(B64URL, 6)}.{r(B64URL, 38)}") and _c("discord", "bot token", f"client.run('{t}')", t),
        # Datadog
        _c("datadog", "application key in prose", f"the Datadog app key {dd_app} expires Friday", dd_app),
        _c("datadog", "API key in env", f"DD_API_KEY={dd_api}", dd_api),
        (t := r(HEX, 40)) and _c("datadog", "app key header", f"-H 'DD-APPLICATION-KEY: {t}'", t),
        # Google
        _c("google", "service account private_key_id", f'"private_key_id": "{gcp_key_id}",', gcp_key_id),
        (t := "GOCSPX-" + r(B64URL, 28)) and _c("google", "OAuth client secret", f"client secret GOCSPX: {t}", t),
        (t := "ya29." + r(B64URL, 150)) and _c("google", "OAuth access token", f"gcloud printed {t}", t),
        (t := "1//0" + r(B64URL, 99)) and _c("google", "OAuth refresh token", f'"refresh_token": "{t}"', t),
        (t := "AIza" + r(B64URL, 35)) and _c("google", "API key", f"maps key {t}", t),
        # PostgreSQL / shells
        (t := r(B62, 14)) and _c("postgres", ".pgpass line", f"db.internal:5432:app:admin:{t}", t),
        (t := r(B62, 10) + "!") and _c("postgres", ".pgpass with wildcards", f"*:*:*:replicator:{t}", t),
        (t := r(B62, 12)) and _c("sshpass", "-p quoted", f"sshpass -p '{t}' ssh deploy@10.0.0.5", t),
        (t := r(string.ascii_lowercase, 9)) and _c("sshpass", "-p bare", f"sshpass -p {t} scp a.tgz host:/tmp", t),
        (t := r(B62, 16)) and _c("netrc", "machine line", f"machine api.example.com login bot password {t}", t),
        (t := r(string.ascii_lowercase, 8)) and _c("mysql", "-p attached", f"mysql -uroot -p{t} app < dump.sql", t),
        (t := r(B62, 20)) and _c("redis", "redis-cli -a", f"redis-cli -h cache -a {t} ping", t),
        # Hugging Face, Linear, Postman, DigitalOcean, Databricks, Pulumi, Supabase
        (t := "hf_" + r(string.ascii_letters, 34)) and _c("hugging face", "user access token", f"huggingface-cli login --token {t}", t),
        (t := "lin_api_" + r(B62, 40)) and _c("linear", "personal API key", f"Authorization: {t}", t),
        (t := f"PMAK-{r(HEX, 24)}-{r(HEX, 34)}") and _c("postman", "API key", f"x-api-key: {t}", t),
        (t := "dop_v1_" + r(HEX, 64)) and _c("digitalocean", "personal access token", f"doctl auth init -t {t}", t),
        (t := "doo_v1_" + r(HEX, 64)) and _c("digitalocean", "OAuth token", f"oauth gave {t}", t),
        (t := "dapi" + r(HEX, 32)) and _c("databricks", "personal access token", f"DATABRICKS_TOKEN={t}", t),
        (t := "dapi" + r(HEX, 32)) and _c("databricks", "PAT in a config file", f"token = {t}", t),
        (t := "pul-" + r(HEX, 40)) and _c("pulumi", "access token", f"PULUMI_ACCESS_TOKEN={t} pulumi up", t),
        (t := "sbp_" + r(HEX, 40)) and _c("supabase", "management token", f"supabase login --token {t}", t),
        # Atlassian, Airtable, Docker, Terraform, Fly, Netlify, PlanetScale, Render
        (t := "ATATT3xFfGF0" + r(B64URL, 170) + "=" + r(HEX, 8))
        and _c("atlassian", "API token", f"jira api token {t}", t),
        (t := f"pat{r(B62, 14)}.{r(HEX, 64)}") and _c("airtable", "personal access token", f"AIRTABLE_PAT: {t}", t),
        (t := "dckr_pat_" + r(B64URL, 27)) and _c("docker hub", "personal access token", f"docker login -u acme -p {t}", t),
        (t := f"{r(B62, 14)}.atlasv1.{r(B62, 67)}") and _c("terraform cloud", "user token", f'credentials "app.terraform.io" {{ token = "{t}" }}', t),
        (t := "fo1_" + r(B64URL, 43)) and _c("fly.io", "access token", f"FLY_API_TOKEN={t}", t),
        (t := "nfp_" + r(B62, 36)) and _c("netlify", "personal access token", f"netlify deploy --auth {t}", t),
        (t := "pscale_tkn_" + r(B64URL, 43)) and _c("planetscale", "service token", f"service token {t}", t),
        (t := "pscale_pw_" + r(B64URL, 43)) and _c("planetscale", "database password", f"connect with {t}", t),
        (t := "rnd_" + r(B62, 32)) and _c("render", "API key", f"render api key {t}", t),
        # AI providers
        (t := "gsk_" + r(B62, 52)) and _c("groq", "API key", f"GROQ_API_KEY={t}", t),
        (t := "r8_" + r(B62, 37)) and _c("replicate", "API token", f"replicate token r8: {t}", t),
        (t := "pplx-" + r(B62, 48)) and _c("perplexity", "API key", f"key {t} for sonar", t),
        (t := "xai-" + r(B62, 80)) and _c("xai", "API key", f"XAI_API_KEY=\"{t}\"", t),
        (t := "sk-ant-admin01-" + r(B64URL, 93) + "AA") and _c("anthropic", "admin key", f"admin key {t}", t),
        (t := "sk-proj-" + r(B64URL, 156)) and _c("openai", "project key", f"OPENAI_API_KEY={t}", t),
        # Package registries, CI
        (t := "CFPAT-" + r(B64URL, 43)) and _c("contentful", "management token", f"contentful login --management-token {t}", t),
        (t := "rubygems_" + r(HEX, 48)) and _c("rubygems", "API key", f":rubygems_api_key: {t}", t),
        (t := "oy2" + r(LOWER_ALNUM, 43)) and _c("nuget", "API key", f"dotnet nuget push -k {t}", t),
        (t := "CLOJARS_" + r(HEX, 60)) and _c("clojars", "deploy token", f"deploy token {t}", t),
        (t := "bkua_" + r(HEX, 40)) and _c("buildkite", "API access token", f"BUILDKITE_API_TOKEN={t}", t),
        (t := "ATBB" + r(B62, 32)) and _c("bitbucket", "app password", f"bitbucket app password {t}", t),
        (t := "npm_" + r(B62, 36)) and _c("npm", "token in .npmrc", f"//registry.npmjs.org/:_authToken={t}", t),
        (t := "pypi-AgEIcHlwaS5vcmc" + r(B64URL, 150)) and _c("pypi", "API token in .pypirc", f"password = {t}", t),
        (t := "ghp_" + r(B62, 36)) and _c("github", "classic token in prose", f"PAT {t} has repo scope", t),
        # Payments
        (t := "EAAA" + r(B64URL, 60)) and _c("square", "access token", f"SQUARE_ACCESS_TOKEN={t}", t),
        (t := "sq0csp-" + r(B64URL, 43)) and _c("square", "application secret", f"app secret {t}", t),
        (t := f"access_token$production${r(LOWER_ALNUM, 16)}${r(HEX, 32)}")
        and _c("braintree", "access token", f"braintree {t}", t.split("$")[-1]),
        (t := "sk_live_" + r(B62, 99)) and _c("stripe", "secret key (long form)", f"stripe key {t}", t),
        (t := "shippo_live_" + r(HEX, 40)) and _c("shippo", "live token", f"ShippoToken {t}", t),
        (t := f"{r(HEX, 32)}-us{r(string.digits, 2)}") and _c("mailchimp", "API key", f"mailchimp api key {t}", t),
        # Cloud
        _c("aws", "secret access key in credentials file", f"aws_secret_access_key = {aws_secret}", aws_secret),
        (t := r(B64, 40)) and _c("aws", "secret key as JSON", f'{{"SecretAccessKey": "{t}"}}', t),
        _c(
            "azure",
            "storage connection string",
            f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={azure_key};EndpointSuffix=core.windows.net",
            azure_key,
        ),
        (t := f"{r(B64URL, 3)}8Q~{r(B64URL, 34)}") and _c("azure", "Entra client secret", f"client secret value {t}", t),
        (t := "LTAI" + r(B62, 20)) and _c("alibaba", "AccessKey ID", f"alibaba access key LTAI: {t}", t),
        (t := "AKID" + r(B62, 32)) and _c("tencent", "SecretId", f"tencent SecretId {t}", t),
        (t := "00" + r(B64URL, 40)) and _c("okta", "API token", f"Authorization: SSWS {t}", t),
        (t := f"sk.eyJ1Ijoi{r(B64URL, 20)}.{r(B64URL, 22)}") and _c("mapbox", "secret token", f"MAPBOX_TOKEN={t}", t),
        (t := "sl." + r(B64URL, 135)) and _c("dropbox", "short-lived token", f"dropbox gave {t}", t),
        _c("splunk", "HEC token header", f"-H 'Authorization: Splunk {heroku_uuid}'", heroku_uuid),
        (t := "HRKU-AA" + r(B64URL, 58)) and _c("heroku", "API key (new format)", f"HEROKU_API_KEY={t}", t),
        (t := _uuid()) and _c("heroku", "API key (UUID) in env", f"export HEROKU_API_KEY={t}", t),
        (t := "ntn_" + r(B62, 46)) and _c("notion", "integration token", f"NOTION_TOKEN={t}", t),
        (t := "secret_" + r(B62, 43)) and _c("notion", "legacy internal integration secret", f"notion secret {t}", t),
        (t := "glsa_" + r(B62, 32) + "_" + r(HEX, 8)) and _c("grafana", "service account token", f"grafana token {t}", t),
        (t := "glc_" + r(B64, 100) + "==") and _c("grafana", "cloud access policy token", f"GRAFANA_CLOUD_TOKEN={t}", t),
        (t := "sntrys_eyJpYXQiOjE3" + r(B64URL, 120)) and _c("sentry", "org auth token", f"SENTRY_AUTH_TOKEN={t}", t),
        _c("sentry", "user auth token split by a zero-width space", f"token {zw_key[:30]}\u200b{zw_key[30:]}", zw_key),
        (t := "tskey-auth-" + r(B62, 12) + "CNTRL-" + r(B62, 32)) and _c("tailscale", "auth key", f"tailscale up --authkey={t}", t),
        (t := "tskey-api-" + r(B62, 12) + "CNTRL-" + r(B62, 32)) and _c("tailscale", "API access token", f"api token {t}", t),
        (t := "figd_" + r(B64URL, 40)) and _c("figma", "personal access token", f"X-Figma-Token: {t}", t),
        (t := "fio-u-" + r(B64URL, 64)) and _c("frame.io", "developer token", f"frameio token {t}", t),
        (t := "sdk-" + _uuid()) and _c("launchdarkly", "SDK key", f"LD_SDK_KEY={t}", t),
        (t := "hcaik_" + r(LOWER_ALNUM, 58)) and _c("honeycomb", "ingest key", f"honeycomb ingest key {t}", t),
        (t := r(B64, 64)) and _c("confluent", "Cloud API secret", f"sasl.password={t}", t),
        (t := r(B64URL, 40)) and _c("cloudflare", "API token", f"CLOUDFLARE_API_TOKEN={t}", t),
        (t := "ops_eyJzaWduSW5BZGRyZXNzIjoi" + r(B64URL, 300)) and _c("1password", "service account token", f"OP_SERVICE_ACCOUNT_TOKEN={t}", t),
        # Keys and crypto
        _c("wireguard", "interface private key", f"[Interface]\nPrivateKey = {wg}\nAddress = 10.0.0.2/32", wg),
        (t := "0x" + r(HEX, 64)) and _c("ethereum", "private key", f"wallet private key: {t}", t),
        (t := "5" + r("HJK", 1) + r(BASE58, 49)) and _c("bitcoin", "WIF private key", f"import the WIF {t} into the wallet", t),
        # Connection strings, DSNs
        (t := r(B62, 16)) and _c("mongodb", "SRV URI", f"mongodb+srv://app:{t}@cluster0.ab1cd.mongodb.net/prod", t),
        (t := r(B62, 18)) and _c("redis", "URL with an empty user", f"REDIS_URL=redis://:{t}@cache:6379/0", t),
        (t := r(B62, 12)) and _c("jdbc", "password parameter", f"jdbc:postgresql://db/app?user=svc&password={t}&ssl=true", t),
        (t := r(B62, 14)) and _c("ado.net", "connection string", f"Server=tcp:sql1;Database=app;User Id=sa;Password={t};", t),
        (t := r(HEX, 32)) and _c("sentry", "DSN public key", f"SENTRY_DSN=https://{t}@o4504.ingest.sentry.io/4505", t),
        # The splitting and escaping the outside corpus found
        _c("gitlab", "key split over two lines", f"token: {split_key[:16]}\n{split_key[16:]}", split_key[16:]),
        _c("hugging face", "key split by an HTML entity", f"token {entity_key[:12]}&#8203;{entity_key[12:]}", entity_key[12:]),
        _c("generic", "percent-encoded password in a form body", f"user=ops&password%3D{pct_pw}", pct_pw),
        (t := r(B62, 24)) and _c("generic", "backslash-escaped JSON key", f'{{\\"api_key\\": \\"{t}\\"}}', t),
        (t := r(string.ascii_lowercase, 10)) and _c("generic", "backslash-escaped password", f'\\"password\\": \\"{t}\\"', t),
        (t := r(B62, 30)) and _c("generic", "credential in YAML", f"credentials:\n  client_secret: {t}", t),
        _c("heroku", "API key in .netrc", f"machine api.heroku.com\n  login me@example.com\n  password {heroku_uuid}", heroku_uuid),
    ]
    return tuple(cases)


VENDOR_CASES: tuple[VendorCase, ...] = _cases()
