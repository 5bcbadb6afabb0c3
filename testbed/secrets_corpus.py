"""A corpus for the secrets guard: fake secrets of every supported kind inside realistic agent
text (tool output, .env dumps, curl commands, stack traces, config files), and look-alikes that
must stay untouched (git SHAs, UUIDs, sha256 digests, base64 images, long identifiers, URLs
without credentials, version strings, placeholders, prose about passwords).

Every secret is generated here from a fixed seed with the shape of the real thing (prefix,
alphabet, length); none is or was ever a real credential. Each group is a list of samples: a text
and the (kind, value) pairs it holds. ``bench/quality/secrets.py`` scores each group; the tests hold
the guard to them.

- ``SAMPLES`` (tuning) and ``HELD_OUT`` (written after tuning on it, never tuned on);
- issue 46's groups: ``REALISTIC`` (credentials as real tools print them), ``EVASIONS`` (known
  tokens behind zero-width characters, full-width forms, look-alike letters, hex, base64 and URL
  encoding) and ``LOOKALIKES`` (what that detection must leave alone), all three tuned on; and
  ``HELD_OUT_TOOL_OUTPUT``, written with them before the detector was extended and never tuned on:
  its numbers are the honest estimate for the new detection.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


@dataclass(frozen=True)
class Sample:
    name: str
    text: str
    secrets: tuple[tuple[str, str], ...]  # (kind, the raw secret as it appears in text)


class Fake:
    """Seeded generators of secret-shaped strings."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def aws_access_key(self) -> str:
        return "AKIA" + self.chars(string.ascii_uppercase + string.digits, 16)

    def aws_secret_key(self) -> str:
        return self.chars(B64, 40)

    def github_classic(self) -> str:
        return "ghp_" + self.chars(ALNUM, 36)

    def github_fine_grained(self) -> str:
        return "github_pat_11" + self.chars(string.ascii_uppercase + string.digits, 20) + "_" + self.chars(ALNUM, 59)

    def gitlab(self) -> str:
        return "glpat-" + self.chars(ALNUM + "-_", 20)

    def slack_bot(self) -> str:
        return f"xoxb-{self.chars(string.digits, 12)}-{self.chars(string.digits, 13)}-{self.chars(ALNUM, 24)}"

    def slack_webhook(self) -> str:
        return (f"https://hooks.slack.com/services/T{self.chars(string.ascii_uppercase + string.digits, 10)}/"
                f"B{self.chars(string.ascii_uppercase + string.digits, 10)}/{self.chars(ALNUM, 24)}")

    def stripe_live(self) -> str:
        return "sk_live_51" + self.chars(ALNUM, 97)

    def stripe_restricted(self) -> str:
        return "rk_live_" + self.chars(ALNUM, 24)

    def stripe_test(self) -> str:
        return "sk_test_" + self.chars(ALNUM, 24)

    def openai_project(self) -> str:
        return "sk-proj-" + self.chars(ALNUM + "-_", 74) + "T3BlbkFJ" + self.chars(ALNUM + "-_", 74)

    def openai_legacy(self) -> str:
        return "sk-" + self.chars(ALNUM, 20) + "T3BlbkFJ" + self.chars(ALNUM, 20)

    def anthropic(self) -> str:
        return "sk-ant-api03-" + self.chars(ALNUM + "-_", 93) + "AA"

    def google(self) -> str:
        return "AIza" + self.chars(ALNUM + "-_", 35)

    def huggingface(self) -> str:
        return "hf_" + self.chars(string.ascii_letters, 34)

    def sendgrid(self) -> str:
        return "SG." + self.chars(ALNUM + "-_", 22) + "." + self.chars(ALNUM + "-_", 43)

    def twilio(self) -> str:
        return "SK" + self.chars(HEX, 32)

    def npm(self) -> str:
        return "npm_" + self.chars(ALNUM, 36)

    def pypi(self) -> str:
        return "pypi-AgEIcHlwaS5vcmc" + self.chars(ALNUM + "-_", 120)

    def discord(self) -> str:
        return "M" + self.chars(ALNUM, 23) + "." + self.chars(ALNUM, 6) + "." + self.chars(ALNUM + "-_", 27)

    def telegram(self) -> str:
        return self.chars(string.digits, 10) + ":AA" + self.chars(ALNUM + "-_", 33)

    def mailchimp(self) -> str:
        return self.chars(HEX, 32) + "-us" + str(self.rng.randint(1, 21))

    def azure_account_key(self) -> str:
        return self.chars(B64, 86) + "=="

    def square(self) -> str:
        return "sq0csp-" + self.chars(ALNUM + "-_", 43)

    def jwt(self) -> str:
        def part(obj: dict[str, object]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

        head = part({"alg": "HS256", "typ": "JWT"})
        body = part({"sub": f"user-{self.rng.randint(1000, 9999)}", "iat": 1760000000 + self.rng.randint(0, 9999),
                     "scope": "repo:write"})
        return f"{head}.{body}.{self.chars(ALNUM + '-_', 43)}"

    def password(self) -> str:
        return self.chars(string.ascii_letters, 5) + self.rng.choice("!@#%^*") + self.chars(string.digits, 3) + \
            self.chars(string.ascii_letters, 4)

    def hex(self, n: int) -> str:
        return self.chars(HEX, n)

    def pem_body(self, lines: int) -> list[str]:
        return [self.chars(B64, 64) for _ in range(lines)] + [self.chars(B64, 22) + "=="]

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def long_password(self, n: int) -> str:
        return self.chars(ALNUM + "!#%^*-_=+.~", n)

    def vault(self, prefix: str = "hvs.") -> str:
        return prefix + "CAESI" + self.chars(ALNUM + "_-", 86)

    def age_secret(self) -> str:
        return "AGE-SECRET-KEY-1" + self.chars(BECH32.upper(), 58)

    def age_public(self) -> str:
        return "age1" + self.chars(BECH32, 58)

    def digitalocean(self, prefix: str = "dop_v1_") -> str:
        return prefix + self.hex(64)

    def discord_webhook(self, host: str = "discord.com") -> str:
        return f"https://{host}/api/webhooks/{self.chars(string.digits, 19)}/{self.chars(ALNUM + '-_', 68)}"

    def der_private_key(self, kind: str = "rsa") -> bytes:
        """DER bytes shaped like a private key: the ASN.1 header real keys start with, random after it."""
        head = {"rsa": bytes.fromhex("308204a302010002820101"), "pkcs8": bytes.fromhex(
            "308204bd020100300d06092a864886f70d010101050004"), "ec": bytes.fromhex("307702010104")}[kind]
        return head + bytes(self.rng.randrange(256) for _ in range(600 if kind != "ec" else 112))

    def der_certificate(self) -> bytes:
        return bytes.fromhex("3082037730820260a003020102") + bytes(self.rng.randrange(256) for _ in range(500))

    def openssh_private(self) -> bytes:
        return b"openssh-key-v1\x00\x00\x00\x00\x04none" + bytes(self.rng.randrange(256) for _ in range(300))


def pem_lines(der: bytes, width: int = 64) -> list[str]:
    """A DER blob as PEM body lines."""
    b64 = base64.b64encode(der).decode()
    return [b64[i : i + width] for i in range(0, len(b64), width)]


def wrap(text: str, width: int) -> str:
    """``text`` broken every ``width`` characters, as base64(1) and xxd -p print."""
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _pem(kind: str, body: list[str]) -> str:
    return f"-----BEGIN {kind}-----\n" + "\n".join(body) + f"\n-----END {kind}-----"


def build(seed: int = 41) -> list[Sample]:
    """The corpus: positives first (one sample per context, several kinds each), then look-alikes."""
    f = Fake(seed)
    out: list[Sample] = []

    def add(name: str, text: str, *secrets: tuple[str, str]) -> None:
        for _kind, value in secrets:
            assert value in text, (name, value)
        out.append(Sample(name, text, tuple(secrets)))

    # ---- positives --------------------------------------------------------------------------
    ak, sk = f.aws_access_key(), f.aws_secret_key()
    gh, db_pw, django = f.github_classic(), f.password(), f.chars(ALNUM + "!@#%^*(-_=+)", 50)
    add(".env dump", f"""Here is the .env I found in the repo root:
AWS_ACCESS_KEY_ID={ak}
AWS_SECRET_ACCESS_KEY={sk}
AWS_DEFAULT_REGION=eu-west-1
GITHUB_TOKEN={gh}
DB_PASSWORD={db_pw}
DJANGO_SECRET_KEY='{django}'
PWD=/home/alice/src/ledger-svc
TOKENIZERS_PARALLELISM=false
MAX_TOKENS=4096
""", ("aws-access-key", ak), ("aws-secret-key", sk), ("github-token", gh), ("password", db_pw),
        ("secret", django))

    ak2, sk2 = f.aws_access_key(), f.aws_secret_key()
    add("aws credentials file", f"""$ cat ~/.aws/credentials
[default]
aws_access_key_id = {ak2}
aws_secret_access_key = {sk2}
region = us-east-1""", ("aws-access-key", ak2), ("aws-secret-key", sk2))

    ak3, sk3 = f.aws_access_key(), f.aws_secret_key()
    add("boto3 snippet", f"""client = boto3.client(
    "s3", aws_access_key_id="{ak3}", aws_secret_access_key="{sk3}")
response = client.list_buckets()""", ("aws-access-key", ak3), ("aws-secret-key", sk3))

    fg = f.github_fine_grained()
    add("git push output", f"""$ git remote -v
origin  https://x-access-token:{fg}@github.com/acme/ledger-svc.git (fetch)
The push failed: remote: Permission to acme/ledger-svc.git denied.""", ("github-token", fg))

    gh2 = f.github_classic()
    add("curl github api", f"""curl -s -H "Authorization: token {gh2}" https://api.github.com/repos/acme/infra/issues
returned 200 with 14 open issues""", ("github-token", gh2))

    gl = f.gitlab()
    add("gitlab ci variable", f"export GITLAB_API_TOKEN={gl}\nglab auth login --token {gl}",
        ("gitlab-token", gl))

    sb, hook = f.slack_bot(), f.slack_webhook()
    add("slack config", f"""slack:
  bot_token: "{sb}"
  alerts_webhook: {hook}
  channel: "#deploys"
""", ("slack-token", sb), ("slack-token", hook))

    stl, str_, stt = f.stripe_live(), f.stripe_restricted(), f.stripe_test()
    add("stripe keys in settings", f"""STRIPE_SECRET_KEY = "{stl}"
STRIPE_RESTRICTED_KEY = "{str_}"
# for the test suite
STRIPE_TEST_KEY = "{stt}"
""", ("stripe-key", stl), ("stripe-key", str_), ("stripe-key", stt))

    oa, oal, an = f.openai_project(), f.openai_legacy(), f.anthropic()
    add("llm keys", f"""I exported the keys before running the eval:
  export OPENAI_API_KEY={oa}
  export OPENAI_LEGACY_KEY={oal}
  export ANTHROPIC_API_KEY={an}
then `python eval.py --model gpt-4o` ran for 3 minutes.""",
        ("openai-key", oa), ("openai-key", oal), ("anthropic-key", an))

    gk, hf = f.google(), f.huggingface()
    add("maps and hub", f"""fetch("https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={gk}")
huggingface-cli login --token {hf}""", ("google-api-key", gk), ("huggingface-token", hf))

    jwt = f.jwt()
    add("jwt in a log line", f"""2026-03-02T10:14:07Z INFO auth: issued session token={jwt} for user 4821
2026-03-02T10:14:07Z INFO auth: expires in 3600 s""", ("jwt", jwt))

    jwt2 = f.jwt()
    add("bearer jwt curl", f"""curl -X POST https://api.internal.acme.dev/v2/orders \\
  -H 'Authorization: Bearer {jwt2}' \\
  -H 'Content-Type: application/json' -d '{{"sku": "A-113", "qty": 2}}'""", ("jwt", jwt2))

    opaque = f.chars(ALNUM, 40)
    add("bearer opaque token", f"""requests.get(url, headers={{"Authorization": "Bearer {opaque}"}}, timeout=10)
-> 401 Unauthorized: token expired""", ("bearer-token", opaque))

    basic = base64.b64encode(f"deploy:{f.password()}".encode()).decode()
    add("basic auth header", f"""> GET /api/v1/health HTTP/1.1
> Host: jenkins.acme.dev
> Authorization: Basic {basic}
< HTTP/1.1 200 OK""", ("basic-auth", basic))

    key_rsa = f.pem_body(12)
    pem = _pem("RSA PRIVATE KEY", key_rsa)
    add("pem private key", f"""The deploy key in infra/keys/deploy.pem is:
{pem}
and its public half is in authorized_keys.""", ("private-key", pem))

    key_ssh = f.pem_body(8)
    ssh = _pem("OPENSSH PRIVATE KEY", key_ssh)
    add("openssh key via cat", f"$ cat ~/.ssh/id_ed25519\n{ssh}\n$ ssh-add ~/.ssh/id_ed25519", ("private-key", ssh))

    ec_body = f.pem_body(4)
    ec = _pem("EC PRIVATE KEY", ec_body)
    add("ec key truncated in output", f"kubectl get secret tls -o yaml shows tls.key:\n{ec}", ("private-key", ec))

    sa_body = f.pem_body(10)
    sa_key = "-----BEGIN PRIVATE KEY-----\\n" + "\\n".join(sa_body) + "\\n-----END PRIVATE KEY-----\\n"
    sa = json.dumps({"type": "service_account", "project_id": "acme-prod", "private_key_id": f.hex(40),
                     "client_email": "ci@acme-prod.iam.gserviceaccount.com"}, indent=2)[:-2]
    sa_text = sa + f',\n  "private_key": "{sa_key}"\n}}'
    add("gcp service account json", f"Contents of sa.json:\n{sa_text}",
        ("private-key", sa_key.removesuffix("\\n")))

    trunc_body = f.pem_body(6)[:4]
    trunc = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(trunc_body)
    add("truncated pem", f"tool output was cut at 2000 chars:\n{trunc}", ("private-key", trunc))

    pg_pw, mongo_pw, redis_pw, amqp_pw = f.password(), f.password(), f.password(), f.password()
    add("connection urls", f"""DATABASE_URL=postgres://ledger:{pg_pw}@db.internal:5432/ledger
MONGO_URI="mongodb+srv://admin:{mongo_pw}@cluster0.abcde.mongodb.net/?retryWrites=true"
REDIS_URL=redis://:{redis_pw}@cache.internal:6379/0
celery broker: amqp://worker:{amqp_pw}@rabbit:5672//""",
        ("url-credentials", pg_pw), ("url-credentials", mongo_pw), ("url-credentials", redis_pw),
        ("url-credentials", amqp_pw))

    ado_pw = f.password()
    add("ado.net connection string", 'appsettings.json: "ConnectionStrings": { "Default": "Server=tcp:sql.acme.dev,'
        f'1433;Database=ledger;User ID=svc_ledger;Password={ado_pw};Encrypt=True;" }}',
        ("password", ado_pw))

    my_pw, pg_env = f.password(), f.password()
    add("database cli", f"""$ mysql -u root -p{my_pw} -h 127.0.0.1 ledger < dump.sql
$ PGPASSWORD={pg_env} psql -h db.internal -U ledger -c 'select count(*) from orders'
 count
-------
 18231""", ("password", my_pw), ("password", pg_env))

    yml_pw, cli_secret = f.password(), f.chars(ALNUM + "~._-", 34)
    add("yaml config", f"""database:
  host: db.internal
  user: ledger
  password: "{yml_pw}"
oauth:
  client_id: 7b1c9e2f-ledger
  client_secret: {cli_secret}
""", ("password", yml_pw), ("secret", cli_secret))

    json_pw, api_key = f.password(), f.hex(32)
    add("json payload", json.dumps({"user": "ops@acme.dev", "password": json_pw, "remember": True,
                                    "api_key": api_key}), ("password", json_pw), ("secret", api_key))

    trace_pw = f.password()
    add("stack trace with dsn", f"""Traceback (most recent call last):
  File "/app/ledger/db.py", line 88, in connect
    conn = psycopg.connect("host=db.internal dbname=ledger user=ledger password={trace_pw}")
psycopg.OperationalError: connection failed: FATAL:  password authentication failed for user "ledger"
""", ("password", trace_pw))

    q_key, amz_sig = f.chars(ALNUM, 32), f.hex(64)
    add("tokens in urls", f"""GET https://api.weather.example/v1/forecast?city=Berlin&api_key={q_key}&units=metric
presigned: https://acme-exports.s3.amazonaws.com/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20260302T101407Z&X-Amz-Expires=3600&X-Amz-Signature={amz_sig}""",
        ("url-token", q_key), ("url-token", amz_sig))

    sg, tw, npm, pypi = f.sendgrid(), f.twilio(), f.npm(), f.pypi()
    add("more vendor keys", f"""SENDGRID_API_KEY={sg}
TWILIO_API_KEY={tw}
//registry.npmjs.org/:_authToken={npm}
[pypi]
  username = __token__
  password = {pypi}""", ("sendgrid-key", sg), ("twilio-key", tw), ("npm-token", npm), ("pypi-token", pypi))

    dc, tg, mc, sq = f.discord(), f.telegram(), f.mailchimp(), f.square()
    add("bot tokens", f"""discord bot: client.run("{dc}")
telegram: bot = Bot(token="{tg}")
mailchimp api key {mc} for list 9f2c
square: SQUARE_APP_SECRET={sq}""", ("discord-token", dc), ("telegram-token", tg), ("mailchimp-key", mc),
        ("square-token", sq))

    az = f.azure_account_key()
    add("azure storage connection string",
        f"DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey={az};EndpointSuffix=core.windows.net",
        ("azure-storage-key", az))

    k8s_pw = base64.b64encode(f.password().encode()).decode()
    add("kubernetes secret", f"""apiVersion: v1
kind: Secret
metadata:
  name: ledger-db
data:
  password: {k8s_pw}
  username: bGVkZ2Vy""", ("password", k8s_pw))

    cli_token = f.chars(ALNUM, 32)
    add("cli flags", f"vault login --method=token --token={cli_token} && terraform apply -auto-approve",
        ("secret", cli_token))

    # ---- look-alikes (nothing to redact) ----------------------------------------------------
    sha, short = f.hex(40), f.hex(7)
    add("git log", f"""commit {sha}
Author: Alice <alice@acme.dev>
Date:   Mon Mar 2 10:14:07 2026 +0100

    fix(ledger): round half-even in the invoice totals ({short})

 src/ledger/totals.py | 14 +++++++-------""")
    add("uuids and ids", f"""request_id={f.uuid()} trace_id={f.hex(32)} span_id={f.hex(16)}
order {f.uuid()} moved to state SHIPPED; customer_id=cus_{f.chars(ALNUM, 14)}""")
    add("sha256 digests", f"""$ sha256sum dist/ledger-2.4.1.tar.gz
{f.hex(64)}  dist/ledger-2.4.1.tar.gz
image: ghcr.io/acme/ledger@sha256:{f.hex(64)}
integrity "sha512-{base64.b64encode(bytes(f.rng.randrange(256) for _ in range(64))).decode()}\"""")
    png = base64.b64encode(bytes(f.rng.randrange(256) for _ in range(600))).decode()
    add("base64 image in markdown", f"The chart: ![latency p95](data:image/png;base64,iVBORw0KGgo{png})\nLooks flat.")
    add("long identifiers", """class AbstractSingletonProxyFactoryBeanRegistrationConfigurer: ...
def test_password_reset_requires_valid_token_when_session_expired(): ...
.btn-primary--disabled-hover-state-transition-duration { }
TOKEN_REFRESH_INTERVAL_SECONDS and PASSWORD_MIN_LENGTH are read from settings.""")
    add("urls without credentials", """See https://github.com/acme/ledger-svc/pull/482#discussion_r1530 and
postgres://db.internal:5432/ledger (no password: peer auth), ssh://git@github.com/acme/infra.git,
https://alice@gitlab.acme.dev/team/repo.git, https://example.com/search?q=token+refresh&page=2""")
    add("version strings", """ledger-svc v2.14.3-rc.1+build.5821 on python==3.11.9, node v20.11.1,
ubuntu-22.04.4, chromadb 1.5.0, image tag 2026.03.02-1f3a9c2""")
    add("prose about secrets", """The user forgot the password: reset it from the admin console.
We rotate every token monthly; the secret manager is Vault. Use a Bearer token from /login.
Password: must be at least 12 characters. Token budget: 4096. The api key is kept in 1Password.""")
    add("placeholders and references", """API_KEY=<your-api-key>
password: ${DB_PASSWORD}
token: "{{ vault_token }}"
SECRET_KEY=os.environ["DJANGO_SECRET_KEY"]
api_key_env = "OPENAI_API_KEY"
password_file=/run/secrets/db_password
client_secret: "********"
Authorization: Bearer <token>
STRIPE_KEY=process.env.STRIPE_KEY
db_password = get_secret("ledger/db")""")
    add("code comparing passwords", """if password == confirm_password:
    token = request.headers.get("Authorization")
    api_key: str = settings.api_key
    return check_password(password, user.password_hash)""")
    add("already redacted", "DB_PASSWORD=[REDACTED:password] and key [REDACTED:aws-access-key] were rotated.")
    add("public keys and certificates", f"""ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{f.chars(B64, 43)} alice@laptop
-----BEGIN PUBLIC KEY-----
{chr(10).join(f.pem_body(3))}
-----END PUBLIC KEY-----
-----BEGIN CERTIFICATE-----
{chr(10).join(f.pem_body(5))}
-----END CERTIFICATE-----""")
    add("numbers and metrics", """p95 latency 182 ms, 4096 tokens, token_count: 1532, "password_min_length": 12,
arn:aws:iam::123456789012:role/ledger-deploy, account 123456789012, #3f2a9c, 10.0.3.17:5432""")
    add("env dump without secrets", """HOME=/home/alice
PWD=/home/alice/src/ledger-svc
OLDPWD=/home/alice
TOKENIZERS_PARALLELISM=false
SECRET_NAME=ledger-db-credentials
TOKEN_URL=https://auth.acme.dev/oauth/token
PASSWORD_POLICY=strict
LANG=en_US.UTF-8""")
    add("ci log", """Run actions/checkout@v4
  with:
    token: ***
    ssh-strict: true
Syncing repository: acme/ledger-svc
Downloading action repository 'actions/setup-python@v5' (SHA:82c7e631bb3cdc910f68e0081d67478d79c6982d)""")
    return out


def held_out(seed: int = 4100) -> list[Sample]:
    """Samples written after the detector was tuned on :func:`build`, and never tuned on: the honest
    estimate bench/quality/secrets.py reports beside the tuning set's."""
    f = Fake(seed)
    out: list[Sample] = []

    def add(name: str, text: str, *secrets: tuple[str, str]) -> None:
        for _kind, value in secrets:
            assert value in text, (name, value)
        out.append(Sample(name, text, tuple(secrets)))

    gh, ak, sk = f.github_classic(), f.aws_access_key(), f.aws_secret_key()
    add("docker run env flags", f"docker run -e GH_TOKEN={gh} -e AWS_ACCESS_KEY_ID={ak} "
        f"-e AWS_SECRET_ACCESS_KEY={sk} ghcr.io/acme/ci:latest", ("github-token", gh), ("aws-access-key", ak),
        ("aws-secret-key", sk))
    pw = f.password()
    add("terraform tfvars", f'db_username = "ledger"\ndb_password = "{pw}"\ninstance_class = "db.t4g.medium"',
        ("password", pw))
    oa = f.openai_project()
    add("python traceback with key", "openai.AuthenticationError: Error code: 401 - {'error': {'message': "
        f"'Incorrect API key provided: {oa}.'}}}}", ("openai-key", oa))
    jwt = f.jwt()
    add("cookie header", f"Cookie: session={jwt}; theme=dark; lang=en", ("jwt", jwt))
    rp = f.password()
    add("redis cli", f"redis-cli -h cache.internal -a {rp} --no-auth-warning INFO keyspace", ("password", rp))
    sl = f.slack_bot()
    add("slack sdk snippet", f'client = WebClient(token="{sl}")\nclient.chat_postMessage(channel="#ops", text="hi")',
        ("slack-token", sl))
    mp = f.password()
    add("mongo shell", f"mongosh 'mongodb://root:{mp}@mongo-0.mongo:27017/admin?replicaSet=rs0'",
        ("url-credentials", mp))
    key = f.pem_body(5)
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(key) + "\n-----END PRIVATE KEY-----"
    add("key pasted in chat", f"here you go:\n\n{pem}\n\nlet me know if it works", ("private-key", pem))
    add("ordinary tool output", f"""$ kubectl get pods -n ledger
NAME                          READY   STATUS    RESTARTS   AGE
ledger-api-7d9f8c6b5d-x2k4p   1/1     Running   0          3d4h
ledger-worker-5c8b7f9d4-qz7mn 1/1     Running   2          3d4h
$ git rev-parse HEAD
{f.hex(40)}""")
    add("config without secrets", """[database]
host = "db.internal"
port = 5432
pool_size = 20
password_env = "LEDGER_DB_PASSWORD"
token_ttl_s = 3600
secret_rotation_days = 30""")
    add("markdown with links and hashes", f"""See [the runbook](https://wiki.acme.dev/ledger/runbook#rotate-keys) and
the release notes for v2.14.3. Checksum: `{f.hex(64)}`. Build id {f.uuid()}.""")
    add("log line with ids", f"""2026-03-02T10:14:07Z INFO request_id={f.uuid()} user_id=4821 path=/v1/orders status=201
2026-03-02T10:14:08Z WARN token refresh took 812 ms for client_id=ledger-web""")
    return out


class _Collector:
    """Collects samples, checking that each secret's value occurs in its text."""

    def __init__(self) -> None:
        self.out: list[Sample] = []

    def __call__(self, name: str, text: str, *secrets: tuple[str, str]) -> None:
        for _kind, value in secrets:
            assert value in text, (name, value)
        self.out.append(Sample(name, text, tuple(secrets)))


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def realistic(seed: int = 4600) -> list[Sample]:
    """Credentials as real tools print them (issue 46's cases; tuned on, with :func:`evasions`)."""
    f = Fake(seed)
    add = _Collector()

    ak, sk = f.aws_access_key(), f.aws_secret_key()
    add("aws configure transcript", f"""$ aws configure --profile ci
AWS Access Key ID [None]: {ak}
AWS Secret Access Key [None]: {sk}
Default region name [None]: eu-central-1
Default output format [None]: json""", ("aws-access-key", ak), ("aws-secret-key", sk))

    ak, sk, pw = f.aws_access_key(), f.aws_secret_key(), f.password()
    add("aws console credentials.csv", f"""$ cat ~/Downloads/ci-deployer_credentials.csv
User name,Password,Access key ID,Secret access key,Console login link
ci-deployer,{pw},{ak},{sk},https://123456789012.signin.aws.amazon.com/console""",
        ("password", pw), ("aws-access-key", ak), ("aws-secret-key", sk))

    ghcr, hub = _b64(f"acme-ci:{f.github_classic()}"), _b64(f"acmeops:{f.password()}")
    add("docker config.json", f"""$ cat ~/.docker/config.json
{{
	"auths": {{
		"ghcr.io": {{
			"auth": "{ghcr}"
		}},
		"https://index.docker.io/v1/": {{
			"auth": "{hub}"
		}}
	}},
	"credsStore": "desktop"
}}""", ("github-token", ghcr), ("basic-auth", hub))  # base64 of user:token is named by the token it holds

    pw = f.password()
    add("maven settings.xml", f"""<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <servers>
    <server>
      <id>nexus-releases</id>
      <username>deployer</username>
      <password>{pw}</password>
    </server>
  </servers>
</settings>""", ("password", pw))

    pw, key = f.password(), f.hex(32)
    add(".net appSettings", f"""<configuration>
  <appSettings>
    <add key="StorageAccountName" value="acmelogs" />
    <add key="SmtpPassword" value="{pw}" />
    <add key="PaymentsApiKey" value="{key}" />
    <add key="RetryCount" value="3" />
  </appSettings>
</configuration>""", ("password", pw), ("secret", key))

    heroku, gh = f.uuid(), f.github_classic()
    add("netrc", f"""$ cat ~/.netrc
machine api.heroku.com
  login alice@acme.dev
  password {heroku}
machine github.com login alice password {gh}""", ("password", heroku), ("github-token", gh))

    pw, pw2 = f.password(), f.password()
    add("pgpass", f"""$ cat ~/.pgpass
db.internal:5432:ledger:ledger:{pw}
*:*:*:replicator:{pw2}
$ chmod 600 ~/.pgpass""", ("password", pw), ("password", pw2))

    pw = f.password()
    add("curl -u", f"curl -s -X POST -u deploy:{pw} 'https://jenkins.acme.dev/job/ledger/build?delay=0sec'",
        ("password", pw))

    pw = f.password()
    add("docker login -p", f"""$ docker login -u acme-ci -p {pw} registry.acme.dev
WARNING! Using --password via the CLI is insecure. Use --password-stdin.
Login Succeeded""", ("password", pw))

    pw = f.password()
    add("sshpass -p", f"sshpass -p '{pw}' ssh -o StrictHostKeyChecking=no deploy@10.0.3.17 'systemctl restart ledger'",
        ("password", pw))

    pw = f.password()
    add("redis-cli -a", f"""$ redis-cli -h cache.internal -p 6379 -a {pw} CONFIG GET maxmemory
Warning: Using a password with '-a' or '-u' option on the command line interface may not be safe.
1) "maxmemory"
2) "2147483648\"""", ("password", pw))

    pw, pw2 = f.password(), f.password()
    add("password in prose", f"The staging DB password is {pw}, the user is ledger. I set the root password "
        f"to {pw2} on the new box and told Bob.", ("password", pw), ("password", pw2))

    key_pem = _pem("RSA PRIVATE KEY", pem_lines(f.der_private_key("rsa")))
    crt_pem = _pem("CERTIFICATE", pem_lines(f.der_certificate()))
    tls_key, tls_crt = _b64(key_pem + "\n"), _b64(crt_pem + "\n")
    add("base64 pem in a kubectl secret", f"""$ kubectl get secret ledger-tls -n ledger -o yaml
apiVersion: v1
data:
  tls.crt: {tls_crt}
  tls.key: {tls_key}
kind: Secret
metadata:
  name: ledger-tls
type: kubernetes.io/tls""", ("private-key", tls_key))

    low = "-----begin rsa private key-----\n" + "\n".join(pem_lines(f.der_private_key("rsa"))) + \
        "\n-----end rsa private key-----"
    add("pem header in lower case", f"found in the old wiki page:\n{low}\n(rotated since?)", ("private-key", low))

    body = "\n".join(pem_lines(f.der_private_key("pkcs8")))
    add("pem body without its header", f"the tool stripped the armour lines, the key body is:\n{body}\nend of output",
        ("private-key", body))

    vt, acc = f.vault(), f.chars(ALNUM, 24)
    add("vault hvs token", f"""$ vault token create -policy=ledger -ttl=1h
Key                  Value
---                  -----
token                {vt}
token_accessor       {acc}
token_duration       1h
token_renewable      true""", ("vault-token", vt))

    age_pub, age_key = f.age_public(), f.age_secret()
    add("age secret key", f"""$ age-keygen -o key.txt
Public key: {age_pub}
$ cat key.txt
# created: 2026-03-02T10:14:07+01:00
# public key: {age_pub}
{age_key}""", ("age-secret-key", age_key))

    do = f.digitalocean()
    add("digitalocean token", f"doctl auth init --context acme --access-token {do}\nValidating token... OK",
        ("digitalocean-token", do))

    hook = f.discord_webhook()
    add("discord webhook url", f"curl -H 'Content-Type: application/json' -d '{{\"content\": \"deploy done\"}}' {hook}",
        ("discord-webhook", hook))

    long_q, long_u = f.long_password(450), f.long_password(520)
    add("password over 400 characters", f'{{"db": {{"user": "ledger", "password": "{long_q}"}}}}\n'
        f"DB_PASSWORD={long_u}\n", ("password", long_q), ("password", long_u))
    return add.out


def evasions(seed: int = 4700) -> list[Sample]:
    """Known tokens disguised: invisible characters, other scripts' look-alikes, encodings (tuned on)."""
    f = Fake(seed)
    add = _Collector()

    gh = f.github_classic()
    zw = gh[:2] + "\u200b" + gh[2:20] + "\u200b" + gh[20:]
    add("zero-width spaces in a github token", f"GITHUB_PAT: {zw} (split so the scanner misses it)",
        ("github-token", zw))
    ak = f.aws_access_key()
    zwj = ak[:4] + "\u200d" + ak[4:12] + "\u2060" + ak[12:]
    add("zero-width joiner in an aws key", f"key id is {zwj} for the ci user", ("aws-access-key", zwj))
    ak = f.aws_access_key()
    wide = "".join(chr(ord(c) + 0xFEE0) for c in ak)  # full-width forms
    add("full-width aws key", f"copied from the PDF: {wide}", ("aws-access-key", wide))
    st = f.stripe_live()
    wide_st = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in st[:12]) + st[12:]
    add("full-width stripe prefix", f"stripe: {wide_st}", ("stripe-key", wide_st))
    gh = f.github_classic()
    cyr = gh.replace("p", "\u0440", 1)  # Cyrillic er looks like p
    add("cyrillic look-alike in a github token", f"token={cyr}", ("github-token", cyr))
    ak = f.aws_access_key()
    cyr_ak = "\u0410" + ak[1:]  # Cyrillic A
    add("cyrillic look-alike in an aws key", f"use {cyr_ak} with the secret from the vault", ("aws-access-key", cyr_ak))
    an = f.anthropic()
    hexed = an.encode().hex()
    add("hex-encoded anthropic key", f">>> key.encode().hex()\n'{hexed}'", ("anthropic-key", hexed))
    gl = f.gitlab()
    xxd = wrap(gl.encode().hex(), 60)
    add("xxd -p of a gitlab token", f"$ echo -n $GL_TOKEN | xxd -p\n{xxd}", ("gitlab-token", xxd))
    sl = f.slack_bot()
    b64 = _b64(sl)
    add("base64 slack token", f"$ echo -n $SLACK_BOT_TOKEN | base64\n{b64}", ("slack-token", b64))
    oa = f.openai_project()
    b64w = wrap(_b64(oa), 76)
    add("base64 of an openai key, wrapped", f"$ base64 <<< \"$OPENAI_API_KEY\"\n{b64w}", ("openai-key", b64w))
    gh = f.github_classic()
    pct = "".join(f"%{b:02X}" for b in gh.encode())
    add("url-encoded github token", f"GET /callback?state={pct}&code=4/0Ab HTTP/1.1", ("github-token", pct))
    an = f.anthropic()
    body = "%7B%22key%22%3A%22" + an.replace("-", "%2D") + "%22%7D"
    add("url-encoded json with an anthropic key", f"POST /relay?payload={body}",
        ("anthropic-key", an.replace("-", "%2D")))
    return add.out


def lookalikes(seed: int = 4750) -> list[Sample]:
    """What the new detection must leave alone (tuned on): lockfile digests, base64 and hex of ordinary
    text, port flags, passwords in prose without one, placeholders and well-known defaults."""
    f = Fake(seed)
    add = _Collector()
    add("lockfiles", f"""$ tail -n 12 poetry.lock
[[package]]
name = "httpx"
version = "0.28.1"
files = [
    {{file = "httpx-0.28.1-py3-none-any.whl", hash = "sha256:{f.hex(64)}"}},
    {{file = "httpx-0.28.1.tar.gz", hash = "sha256:{f.hex(64)}"}},
]
$ grep -A3 '"node_modules/ms"' package-lock.json
      "resolved": "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz",
      "integrity": "sha512-{_b64(bytes(f.rng.randrange(256) for _ in range(64)))}",
github.com/stretchr/testify v1.9.0 h1:{_b64(bytes(f.rng.randrange(256) for _ in range(32)))}
checksum = "{f.hex(64)}\"""")
    add("git and ids", f"""$ git log --oneline -3
{f.hex(7)} fix(ledger): totals
{f.hex(7)} chore: bump httpx
$ git rev-parse HEAD
{f.hex(40)}
trace {f.uuid()} span {f.hex(16)} request {f.uuid()}
claude-code:c65e9607-b97b-4ebf-a519-864172659542:74afe260-7856-449f-871f-df177626f441
parent 1ee6df89-306d-4056-9c25-0000000000001:toolu_01ABCDEFGHJKLMNPQRSTUVWXYZabcde""")
    prose = ("The deploy finished at 10:14 and the ledger service is healthy again; the on-call rotation "
             "moves to Carol on Monday. Remember to update the runbook.")
    add("base64 of ordinary text", f"""Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: base64

{wrap(_b64(prose), 76)}
$ echo 'hello world, this is only a test' | base64
{_b64("hello world, this is only a test" + chr(10))}""")
    add("hex of ordinary text", f"bytes.hex() of the banner: {b'ledger-svc 2.14.3 ready on port 8080'.hex()}")
    add("password in prose without a secret", """The password is required for the admin console. The password is
stored in 1Password under "ledger prod". I set the password to expire in 90 days. Forgot your password? Reset it
from the login page. The password is incorrect, says the log, and the password was rotated yesterday.""")
    add("port flags", """$ psql -h db.internal -p 5432 -U ledger ledger
$ ssh -p 2222 deploy@10.0.3.17
$ redis-cli -h cache.internal -p 6379 ping
PONG
$ mysql -h db.internal -P 3306 -u root -p
Enter password:
$ scp -P 2222 dump.sql deploy@10.0.3.17:/tmp/""")
    add("docker port mappings", """$ docker run -d -p 8080:80 -p 127.0.0.1:5432:5432 --name pg postgres:16
$ kubectl port-forward svc/ledger 8080:80
$ docker run -u 1000:1000 -v $PWD:/src ghcr.io/acme/ci:latest""")
    add("curl with variables", """curl -u $USER https://nexus.acme.dev/service/rest/v1/status
curl -u "$NEXUS_USER:$NEXUS_PASS" -T build.zip https://nexus.acme.dev/repository/raw/
curl --user "${CI_USER}:${CI_TOKEN}" https://ci.acme.dev/api/json""")
    add("placeholders and defaults", """docker login -u <user> -p <your-token> registry.acme.dev
curl -u admin:admin http://localhost:8080/api/health
sshpass -p "$SSH_PASS" ssh deploy@host
redis-cli -a "$REDIS_PASSWORD" ping
POSTGRES_PASSWORD=changeme
keytool -list -keystore cacerts -storepass changeit
machine api.example.com login <login> password <your-token>
<password>${env.NEXUS_PASSWORD}</password>
<add key="PasswordMinLength" value="12" />""")
    add("other scripts and full-width text", """Пароль должен быть не короче 12 символов. Сервер api-01 перезапущен.
パスワードは１２文字以上にしてください。ｄｅｐｌｏｙ完了。 👩‍💻 fixed the build""")
    add("certificates and public keys in kubectl output", f"""data:
  ca.crt: {_b64(_pem("CERTIFICATE", pem_lines(f.der_certificate())) + chr(10))}
  age.pub: {f.age_public()}""")
    add("colon-separated lines that are not pgpass", """10:14:07 INFO ready
2026-03-02T10:14:07Z db.internal:5432 up
root:x:0:0:root:/root:/bin/bash
fe80::1:2:3:4
ledger:5432:ok:3:ms""")
    add("discord links and vault words", """Join https://discord.com/channels/123456789012345678/987654321098765432
for updates.
Vault service tokens start with hvs. and batch tokens with hvb.; see the Vault docs.
doctl compute droplet list --format ID,Name --no-header""")
    return add.out


def held_out_tool_output(seed: int = 4800) -> list[Sample]:
    """Written with :func:`realistic` and :func:`evasions`, before the detector was extended, and never
    tuned on: other tools and other disguises of the same problems, and more look-alikes."""
    f = Fake(seed)
    add = _Collector()

    ak, sk = f.aws_access_key(), f.aws_secret_key()
    add("credentials.csv, access keys only", f"Access key ID,Secret access key\n{ak},{sk}\n",
        ("aws-access-key", ak), ("aws-secret-key", sk))
    sk = f.aws_secret_key()
    add("aws configure set", f"aws configure set aws_secret_access_key {sk} --profile ci", ("aws-secret-key", sk))
    gho = "gho_" + f.chars(ALNUM, 36)
    add("gh hosts.yml", f"github.com:\n    user: alice\n    oauth_token: {gho}\n    git_protocol: ssh",
        ("github-token", gho))
    npm_auth = _b64(f"alice:{f.password()}")
    add("npmrc _auth", f"registry=https://nexus.acme.dev/repository/npm/\n_auth={npm_auth}\nalways-auth=true",
        ("basic-auth", npm_auth))
    pw = f.password()
    add("git credential fill", f"$ git credential fill\nprotocol=https\nhost=github.com\nusername=alice\npassword={pw}",
        ("password", pw))
    pw = f.password()
    add("az login -p", f"az login -u ci@acme.dev -p {pw} --tenant acme.onmicrosoft.com", ("password", pw))
    pw = f.password()
    add("mongosh -p", f"mongosh --host mongo-0.mongo -u admin -p {pw} --authenticationDatabase admin",
        ("password", pw))
    pw = f.password()
    add("ldapsearch -w", f"ldapsearch -x -H ldap://ldap.acme.dev -D 'cn=admin,dc=acme,dc=dev' -w {pw} '(uid=alice)'",
        ("password", pw))
    pw = f.password()
    add("sqlcmd -P", f"sqlcmd -S sql.acme.dev -U sa -P {pw} -Q 'SELECT @@VERSION'", ("password", pw))
    pw = f.password()
    add("openssl passout", f"openssl pkcs12 -export -in cert.pem -inkey key.pem -out bundle.p12 -passout pass:{pw}",
        ("password", pw))
    pw = f.password()
    add("smbclient -U user%pass", f"smbclient //files.acme.dev/finance -U alice%{pw} -c 'ls'", ("password", pw))
    pw = f.password()
    add("prose, other words", f"pw for the staging box: {pw} (don't share). The admin password was changed to "
        f"{(pw2 := f.password())} yesterday.", ("password", pw), ("password", pw2))
    hvb = f.vault("hvb.")
    add("vault batch token in prose", f"use {hvb} until the policy is fixed", ("vault-token", hvb))
    doo = f.digitalocean("doo_v1_")
    add("digitalocean oauth token", f'{{"access_token": "{doo}", "token_type": "bearer"}}', ("digitalocean-token", doo))
    hook = f.discord_webhook("discordapp.com")
    add("discord webhook, old host", f"DISCORD_HOOK is {hook}", ("discord-webhook", hook))
    ssh = "-----begin openssh private key-----\n" + "\n".join(pem_lines(f.openssh_private(), 70)) + \
        "\n-----end openssh private key-----"
    add("openssh key in lower case", ssh, ("private-key", ssh))
    b64_ssh = _b64(_pem("OPENSSH PRIVATE KEY", pem_lines(f.openssh_private(), 70)) + "\n")
    add("base64 openssh key in a secret", f"data:\n  id_ed25519: {b64_ssh}\n  known_hosts: Z2l0aHViLmNvbQo=",
        ("private-key", b64_ssh))
    ec_body = "\n".join(pem_lines(f.der_private_key("ec")))
    add("ec key body without header", f"key material:\n{ec_body}", ("private-key", ec_body))
    # disguises
    sl = f.slack_bot()
    zw = sl[:5] + "\u200c" + sl[5:]
    add("zero-width non-joiner in a slack token", f"bot token {zw}", ("slack-token", zw))
    oa = f.openai_project()
    greek = oa[:3] + oa[3:].replace("o", "\u03bf")  # Greek omicron
    add("greek look-alike in an openai key", f"OPENAI key: {greek}", ("openai-key", greek))
    gk = f.google()
    wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in gk)
    add("full-width google key", f"maps key {wide}", ("google-api-key", wide))
    sk = f.aws_secret_key()
    b64_line = _b64(f"AWS_SECRET_ACCESS_KEY={sk}")
    add("base64 of an env line", f"ci variable (base64): {b64_line}", ("aws-secret-key", b64_line))
    npm = f.npm()
    add("hex of an npm token", f"token hex: {npm.encode().hex()}", ("npm-token", npm.encode().hex()))
    an = f.anthropic()
    pct = "".join(f"%{b:02x}" for b in an.encode())
    add("lower-case url encoding", f"?k={pct}", ("anthropic-key", pct))
    # look-alikes
    add("port and user flags", """docker run -p 5432:5432 -e POSTGRES_PASSWORD_FILE=/run/secrets/pg postgres:16
ssh -p 2222 alice@bastion
sshpass -f ~/.ssh/pw.txt ssh deploy@host
curl -u "$CI_USER:$CI_TOKEN" https://ci.acme.dev/api
mongosh -u admin -p --authenticationDatabase admin""")
    add("more lockfiles", f"""$ head -3 go.sum
golang.org/x/net v0.25.0 h1:{_b64(bytes(f.rng.randrange(256) for _ in range(32)))}
golang.org/x/net v0.25.0/go.mod h1:{_b64(bytes(f.rng.randrange(256) for _ in range(32)))}
[[package]]
name = "serde"
checksum = "{f.hex(64)}\"""")
    payload = json.dumps({"event": "deploy", "service": "ledger", "ok": True})
    add("base64 json without secrets", f"payload: {_b64(payload)}")
    add("prose about passwords", """The password was rotated yesterday and the new one is in the vault. Your password
is too short. The token is valid for an hour. We changed the password policy to 14 characters.""")
    add("csr and timings", """-----BEGIN CERTIFICATE REQUEST-----
MIICvDCCAaQCAQAwdzELMAkGA1UEBhMCVVMxDTALBgNVBAgMBFV0YWgxDzANBgNV
-----END CERTIFICATE REQUEST-----
12:30:00 job started; 12:31:07 job done in 67 s""")
    return add.out


SAMPLES = build()
HELD_OUT = held_out()
REALISTIC = realistic()
EVASIONS = evasions()
LOOKALIKES = lookalikes()
HELD_OUT_TOOL_OUTPUT = held_out_tool_output()
POSITIVE_KINDS = sorted({kind for s in SAMPLES for kind, _v in s.secrets})


# ---- finding raw secrets in what a store gives back ---------------------------------------------
Secrets = Sequence[tuple[str, str]]  # (kind, value)


def needles(value: str) -> set[str]:
    """The secret, a distinctive middle slice of a long one, and each line of a key block's body."""
    out = {value}
    if len(value) >= 24:
        out.add(value[len(value) // 2 - 8 : len(value) // 2 + 8])
    out |= {line for line in re.split(r"\n|\\n", value) if len(line) >= 20}
    return out


def leaks(text: str, secrets: Secrets) -> list[str]:
    """The kinds of the secrets (or slices of them) found in ``text``, never the values."""
    return sorted({kind for kind, v in secrets for n in needles(v) if n in text})


def file_leaks(root: Path, secrets: Secrets) -> list[str]:
    """Files under ``root`` holding a secret (or a slice, or, lower-cased as an index keeps its words, a
    long alphanumeric run of one): ``path: [kinds]`` each."""
    runs = sorted({(kind, run.lower()) for kind, v in secrets for run in re.findall(r"[A-Za-z0-9]{12,}", v)})
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        low = data.lower()
        hits = {kind for kind, v in secrets for n in needles(v) if n.encode() in data}
        hits |= {kind for kind, run in runs if run.encode() in low}
        if hits:
            found.append(f"{path.relative_to(root)}: {sorted(hits)}")
    return found


ALL_SECRETS: list[tuple[str, str]] = [(k, v) for s in SAMPLES for k, v in s.secrets]
