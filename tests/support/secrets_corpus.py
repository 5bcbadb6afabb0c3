"""A corpus for the secrets guard: fake secrets of every supported kind inside realistic agent
text (tool output, .env dumps, curl commands, stack traces, config files), and look-alikes that
must stay untouched (git SHAs, UUIDs, sha256 digests, base64 images, long identifiers, URLs
without credentials, version strings, placeholders, prose about passwords).

Every secret is generated here from a fixed seed with the shape of the real thing (prefix,
alphabet, length); none is or was ever a real credential. ``SAMPLES`` is what the tests and
``bench/quality/secrets.py`` use: each sample's text and the (kind, value) pairs it holds.
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


SAMPLES = build()
HELD_OUT = held_out()
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
