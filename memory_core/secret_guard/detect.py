"""Find secrets in text: each one's kind and its character span, never anything else.

Two sources, merged:

- Yelp's ``detect-secrets`` plugins (the vendor tokens: AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, JWT, SendGrid, Twilio, npm, PyPI, Discord, Telegram, Mailchimp, Azure storage,
  Square, Artifactory, credentials in URLs). Their regexes run over the whole text; each
  secret value a plugin yields is located in the text (every occurrence) and, for tokens,
  widened to the end of the token (some plugins match only a token's first characters).
- :data:`PATTERNS`, for what those plugins miss or see only in part: PEM and PuTTY private
  key blocks spanning lines (with real or ``\\n``-escaped newlines), ``password=`` /
  ``passwd:`` / ``secret=`` / ``api_key:`` pairs (the keyword list is detect-secrets' own),
  ``Authorization: Bearer|Basic`` headers, tokens in URL query strings, credentials in URLs
  with an empty user, AWS secret access keys, fine-grained GitHub tokens, Stripe test keys,
  Google, Anthropic, Hugging Face keys.

Where two findings overlap, their spans are joined under the more specific kind (a GitHub
token assigned to ``GITHUB_TOKEN=`` is a ``github-token``, not a generic ``secret``).
Entropy-only detection is not used: on the corpus of look-alikes (git SHAs, sha256 hashes,
UUIDs, base64 images) it flagged more harmless strings than secrets it added
(see docs/secrets.md and ``python -m bench.quality.secrets --entropy``).

A marker ``[REDACTED:<kind>]`` is never itself a finding, so scanning redacted text finds nothing.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from detect_secrets.plugins.base import RegexBasedDetector

MARKER_PATTERN = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def marker(kind: str) -> str:
    """The text a secret of ``kind`` is replaced by."""
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True, order=True)
class Finding:
    """One secret: where it is in the text (``start`` inclusive, ``end`` exclusive) and its kind."""

    start: int
    end: int
    kind: str

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "start": self.start, "end": self.end}


# ---- detect-secrets plugins -------------------------------------------------------------------
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-]*")
_JWT_TAIL = re.compile(r"[A-Za-z0-9_\-.+/=]*")
_PREFIXES = ("AccountKey=",)  # what a plugin's match holds before the secret itself
# detect-secrets plugin (module, class) -> (kind, whether the value is a token to widen to its end,
# the needles: the plugin runs only on text holding one of them, a C-speed substring test; None: always).
# Imported on the first scan (detect-secrets pulls in requests): starting a CLI or server stays light.
_PLUGINS: dict[tuple[str, str], tuple[str, bool, tuple[str, ...] | None]] = {
    ("aws", "AWSKeyDetector"): ("aws-access-key", True, ("A3T", "ABIA", "ACCA", "AKIA", "ASIA", "aws", "AWS", "Aws")),
    ("artifactory", "ArtifactoryDetector"): ("artifactory-token", True, ("AKC", "AP")),
    ("azure_storage_key", "AzureStorageKeyDetector"): ("azure-storage-key", True, ("AccountKey=",)),
    ("basic_auth", "BasicAuthDetector"): ("url-credentials", False, ("://",)),
    ("discord", "DiscordBotTokenDetector"): ("discord-token", True, None),
    ("github_token", "GitHubTokenDetector"): ("github-token", True, ("gh",)),
    ("gitlab_token", "GitLabTokenDetector"): ("gitlab-token", True, ("gl", "GR1348941")),
    ("jwt", "JwtTokenDetector"): ("jwt", True, ("eyJ",)),
    ("mailchimp", "MailchimpDetector"): ("mailchimp-key", True, ("-us",)),
    ("npm", "NpmDetector"): ("npm-token", True, ("_authToken",)),
    ("openai", "OpenAIDetector"): ("openai-key", True, ("T3BlbkFJ",)),
    ("pypi_token", "PypiTokenDetector"): ("pypi-token", True, ("pypi-",)),
    ("sendgrid", "SendGridDetector"): ("sendgrid-key", True, ("SG.",)),
    ("slack", "SlackDetector"): ("slack-token", True, ("xox", "XOX", "Xox", "hooks.slack.com")),
    ("square_oauth", "SquareOAuthDetector"): ("square-token", True, ("sq0csp-",)),
    ("stripe", "StripeDetector"): ("stripe-key", True, ("k_live_",)),
    ("telegram_token", "TelegramBotTokenDetector"): ("telegram-token", True, None),
    ("twilio", "TwilioKeyDetector"): ("twilio-key", True, ("AC", "SK")),
}


@dataclass(frozen=True)
class _Plugin:
    detector: RegexBasedDetector
    name: str
    kind: str
    token: bool
    needles: tuple[str, ...] | None


@cache
def _plugins() -> list[_Plugin]:
    import importlib

    out = []
    for (module, cls), (kind, token, needles) in _PLUGINS.items():
        detector: Any = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)()
        out.append(_Plugin(detector, cls, kind, token, needles))
    return out


def _plugin_findings(text: str) -> Iterator[Finding]:
    for p in _plugins():
        if p.needles is not None and not any(n in text for n in p.needles):
            continue
        values = {v for v in p.detector.analyze_string(text) if v and v.strip()}
        for value in values:
            value = value.strip()
            # the AWS plugin's second pattern yields a quoted secret access key (40 characters)
            kind = "aws-secret-key" if p.name == "AWSKeyDetector" and len(value) == 40 else p.kind
            if p.name == "NpmDetector":
                value = value.split()[0]
            skip = next((len(x) for x in _PREFIXES if value.startswith(x)), 0)
            tail_pattern = _JWT_TAIL if p.name == "JwtTokenDetector" else _TOKEN_TAIL
            for found in re.finditer(re.escape(value), text):
                end = found.end()
                if p.token:
                    tail = tail_pattern.match(text, end)
                    end = tail.end() if tail else end
                yield Finding(found.start() + skip, end, kind)


# ---- own patterns -------------------------------------------------------------------------------
_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----")
_KEY_BODY = re.compile(r"(?:\\[nr]|[\sA-Za-z0-9+/=:,.-])*")  # base64 lines, PEM headers, escaped newlines
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC: *[0-9a-fA-F]+|\Z)", re.DOTALL)
_MAX_KEY_CHARS = 20_000


def _private_keys(text: str) -> Iterator[Finding]:
    for begin in _PEM_BEGIN.finditer(text):
        end_marker = f"-----END {begin.group(1)}-----"
        end = text.find(end_marker, begin.end(), begin.end() + _MAX_KEY_CHARS)
        if end >= 0:
            yield Finding(begin.start(), end + len(end_marker), "private-key")
        else:  # a truncated block: the header and the key material that follows it
            body = _KEY_BODY.match(text, begin.end())
            yield Finding(begin.start(), body.end() if body else begin.end(), "private-key")
    for m in _PUTTY.finditer(text):
        yield Finding(m.start(), m.end(), "private-key")


# Patterns below run over the text lower-cased in ASCII only (offsets stay the same), so none needs
# IGNORECASE, and each starts with a literal: Python's re then searches at C speed.
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# detect-secrets' keyword list (detect_secrets.plugins.keyword.DENYLIST, checked by a test), and a few more
KEYWORD_DENYLIST = (
    "api_?key", "auth_?key", "service_?key", "account_?key", "db_?key", "database_?key", "priv_?key", "private_?key",
    "client_?key", "db_?pass", "database_?pass", "key_?pass", "password", "passwd", "pwd", "secret", "contraseña",
    "contrasena",
)
_KEYWORDS = "|".join([*KEYWORD_DENYLIST, "token", "credentials?", "client_?secret", "access_?key", "auth_?token",
                      "authorization"])
_KEYWORD = re.compile(r"(?:" + _KEYWORDS + r")")  # detect-secrets' keyword list, and a few more
_KEY_CHARS = re.compile(r"[\w.-]*")  # the rest of the identifier a keyword sits in
_KEY_START = re.compile(r"[\w.-]*$")
_PASSWORD_WORDS = re.compile(r"pass|pwd|contrase")
# after a secret-named key: an assignment and the value (quoted, or up to a delimiter)
_ASSIGNED = re.compile(
    r"[\"']?(?P<op>[ \t]*(?::=|=>|[!=]==?|==?|:)[ \t]*|[ \t]+(?=[\"']))"
    r"(?P<value>\"[^\"\n]{1,400}\"|'[^'\n]{1,400}'|`[^`\n]{1,400}`|[^\s\"'`,;&<>()\[\]{}]{1,400})")
# command-line flags: --password hunter2, --token=..., mysql -phunter2
_FLAG = re.compile(
    r"--(?P<key>password|passwd|pass|token|api-key|apikey|secret|client-secret|auth-token)"
    r"(?P<op>[= ])(?P<value>\"[^\"\n]+\"|'[^'\n]+'|[^\s\"']+)")
_SHORT_P = re.compile(r"-p(?P<value>[^\s\"'-][^\s\"']{3,})(?=\s|$)")
_AUTH_HEADER = re.compile(r"(?P<scheme>bearer|basic|token)[ \t]+(?P<value>[a-z0-9\-._~+/]{8,}=*)")
_HEADER_KEY = re.compile(r"(?:x-api-key|api-key|x-auth-token|private-token|x-access-token)[ \t]*:[ \t]*"
                         r"(?P<value>[a-z0-9\-._~+/=]{8,})")
# the password runs to the last "@" before the host: an unescaped "@" or "#" in it is still the password
_URL_CREDENTIALS = re.compile(r"://(?P<user>[^\s:@/?#\[\]]*):(?P<value>[^\s/\"'<>]+)@(?=[\w\[])")
_QUERY_TOKEN = re.compile(
    r"[?&](?P<key>access_token|refresh_token|id_token|token|api_?key|apikey|key|sig|signature|client_secret|"
    r"password|passwd|secret|auth|x-amz-signature|x-amz-credential|x-amz-security-token)=(?P<value>[^&\s#\"'<>]+)")

# (pattern, kind); a leading word boundary is checked in code (a pattern starting with a literal
# is searched at C speed, one starting with \b is tried at every position)
_VENDOR: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
     "aws-secret-key"),
    (re.compile(r"github_pat_[A-Za-z0-9_]{40,255}"), "github-token"),
    (re.compile(r"gh[pousr]_[A-Za-z0-9]{36,255}"), "github-token"),
    (re.compile(r"[rsp]k_(?:live|test)_[0-9A-Za-z]{16,255}"), "stripe-key"),
    (re.compile(r"whsec_[0-9A-Za-z]{24,}"), "stripe-key"),
    (re.compile(r"AIza[0-9A-Za-z\-_]{35}"), "google-api-key"),
    (re.compile(r"sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9\-_]{80,}"), "anthropic-key"),
    (re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9\-_]{20,}T3BlbkFJ[A-Za-z0-9\-_]{20,}"), "openai-key"),
    (re.compile(r"sk-proj-[A-Za-z0-9\-_]{40,}"), "openai-key"),
    (re.compile(r"hf_[A-Za-z]{34,40}(?![A-Za-z0-9_])"), "huggingface-token"),
    (re.compile(r"xox[abposr]-[0-9A-Za-z-]{10,}"), "slack-token"),
    (re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), "npm-token"),
    (re.compile(r"glpat-[A-Za-z0-9_\-]{20,}"), "gitlab-token"),
]

# values of a secret-named key that are not secrets: empty words, placeholders, references
_NOT_VALUES = frozenset({
    "none", "null", "nil", "true", "false", "yes", "no", "on", "off", "required", "optional", "string", "str",
    "bytes", "int", "undefined", "unset", "empty", "redacted", "hidden", "masked", "secret", "password", "token",
    "env", "environ", "os.environ", "getenv", "self", "bearer", "basic", "true,", "false,", "auto", "default",
    "disabled", "enabled", "missing", "invalid", "expired", "revoked", "valid", "rotated", "set", "sha256",
    "ok", "n/a", "na", "tbd", "todo",
})
_PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\{\{[^}]*\}\}|%\(?\w*\)?s|%s|\*+|x{3,}|X{3,}|\.{3,}|…|"
    r"your[-_ ]?\w*|my[-_ ]?\w*|example\w*|dummy\w*|placeholder\w*|changeme_?here|process\.env\.\w+|"
    r"os\.environ.*|env\(.*|getenv\(.*|secrets?\.[\w.]+|vault:.*|ref\+.*|op://.*|file:.*)$",
    re.IGNORECASE,
)
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")  # OPENAI_API_KEY: a variable's name, not its value
_WORD = re.compile(r"^[A-Za-z][a-z]*$")  # a plain word (lower case or Capitalized)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z_.]*[_.][A-Za-z_.]*:?$")  # confirm_password, settings.api_key: code
_SCHEME = re.compile(r"^(?:Bearer|Basic|Token|Digest)\s", re.IGNORECASE)  # a header value: found as a header
_NUMBER = re.compile(r"^[0-9.,_]+$")
# keys that name something about a secret, not the secret itself
_META_KEY = re.compile(
    r"(?:_|-|\b)(?:env|file|path|name|id|ids|type|types|len|length|count|limit|limits|max|min|hash|sha256|url|"
    r"uri|endpoint|header|prefix|suffix|field|key_?id|version|expires?(?:_at|_in)?|ttl|ref|policy|manager|"
    r"store|provider|rotation|scope|scopes|usage|budget|used|tokens|tokenizer|tokenizers|parallelism|"
    r"secret_?santa|placeholder|hint|reset|required|strength|mode|enabled|regex|pattern|masked)[\"']?$",
    re.IGNORECASE,
)


def _pair_value(value: str) -> tuple[int, int, str]:
    """(offset into ``value``, length, the bare value) with quotes removed."""
    if len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]:
        return 1, len(value) - 2, value[1:-1]
    return 0, len(value), value


def _is_secret_value(bare: str, *, quoted: bool, keyword: str, op: str) -> bool:
    """Whether the value of a secret-named key is a secret (not a placeholder, reference or word)."""
    b = bare.strip()
    if len(b) < 4 or MARKER_PATTERN.search(b):
        return False
    if b.casefold() in _NOT_VALUES or _PLACEHOLDER.match(b) or _ENV_NAME.match(b) or _NUMBER.match(b):
        return False
    if b.startswith(("/", "~/", "./", "../", "http://", "https://", "$", "@")):
        return False  # a path, a URL (its credentials, if any, are found as such) or a reference
    if not quoted and (_IDENTIFIER.match(b) or op.strip() in ("==", "!=", "===", "!==")):
        return False
    if _SCHEME.match(b):
        return False
    if " " in b and not quoted:
        return False
    if quoted and " " in b and len(b.split()) > 2:
        return False  # a sentence in quotes ("password": "must be 12 characters") is a description
    if re.fullmatch(r"[\w]+", b) and not quoted and "=" not in op and _WORD.match(b):
        return len(b) >= 16  # "password: forgotten" is prose; a long letters-only passphrase is not
    return True


def _pairs(text: str, low: str) -> Iterator[Finding]:
    for kw in _KEYWORD.finditer(low):
        key_end = _KEY_CHARS.match(low, kw.end())
        start_m = _KEY_START.search(low, max(0, kw.start() - 64), kw.start())
        key_start = start_m.start() if start_m else kw.start()
        end = key_end.end() if key_end else kw.end()
        m = _ASSIGNED.match(text, end)
        if m is None:
            continue
        key = low[key_start:end]
        if _META_KEY.search(key) or text.endswith("://", 0, key_start):
            continue  # about a secret, not one; or a URL's user name (its password is found as url-credentials)
        raw = m.group("value")
        offset, length, bare = _pair_value(raw)
        quoted = offset == 1
        if not quoted and text[m.end("value"):m.end("value") + 1] in ("(", "."):
            continue  # a call or an attribute: get_secret("db"), settings.token
        if not _is_secret_value(bare, quoted=quoted, keyword=key, op=m.group("op")):
            continue
        kind = "password" if _PASSWORD_WORDS.search(key) else "secret"
        start = m.start("value") + offset
        yield Finding(start, start + length, kind)
    for m in _FLAG.finditer(low):
        offset, length, bare = _pair_value(text[m.start("value"):m.end("value")])
        if _is_secret_value(bare, quoted=offset == 1, keyword=m.group("key"), op="="):
            kind = "password" if _PASSWORD_WORDS.search(m.group("key")) else "secret"
            start = m.start("value") + offset
            yield Finding(start, start + length, kind)
    for m in _SHORT_P.finditer(text):
        if m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] in "_-"):
            continue
        if _looks_random(m.group("value"), minimum=6):
            yield Finding(m.start("value"), m.end("value"), "password")


def _entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _looks_random(value: str, *, minimum: int = 16) -> bool:
    """A token-like value: long enough, letters and digits mixed, not a word or a placeholder."""
    if len(value) < minimum or MARKER_PATTERN.search(value) or _PLACEHOLDER.match(value):
        return False
    classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]", r"[^A-Za-z0-9]"))
    return classes >= 2 and _entropy(value) >= 3.0


def _headers_and_urls(text: str, low: str) -> Iterator[Finding]:
    for m in _AUTH_HEADER.finditer(low):
        if m.start() and low[m.start() - 1].isalnum():
            continue
        value = text[m.start("value"):m.end("value")]
        if m.group("scheme") == "basic" and not MARKER_PATTERN.search(value):
            yield Finding(m.start("value"), m.end("value"), "basic-auth")
        elif _looks_random(value, minimum=12):
            yield Finding(m.start("value"), m.end("value"), "bearer-token")
    for m in _HEADER_KEY.finditer(low):
        value = text[m.start("value"):m.end("value")]
        if _looks_random(value, minimum=12) and not text.endswith("://", 0, m.start()):
            yield Finding(m.start("value"), m.end("value"), "secret")
    for m in _URL_CREDENTIALS.finditer(text):
        value = m.group("value")
        if not MARKER_PATTERN.search(value) and not _PLACEHOLDER.match(value):
            yield Finding(m.start("value"), m.end("value"), "url-credentials")
    for m in _QUERY_TOKEN.finditer(low):
        value, key = text[m.start("value"):m.end("value")], m.group("key")
        if key in ("password", "passwd", "secret", "client_secret"):
            ok = _is_secret_value(value, quoted=False, keyword=key, op="=")
        else:
            ok = _looks_random(value, minimum=12)
        if ok:
            yield Finding(m.start("value"), m.end("value"), "url-token")


def _vendor(text: str) -> Iterator[Finding]:
    for pattern, kind in _VENDOR:
        for m in pattern.finditer(text):
            if m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_"):
                continue  # inside a longer word
            group = "value" if "value" in pattern.groupindex else 0
            yield Finding(m.start(group), m.end(group), kind)


# ---- merging ------------------------------------------------------------------------------------
# the more specific kind names a merged span; generic kinds last
_GENERIC = ("url-credentials", "basic-auth", "bearer-token", "url-token", "password", "secret")


def _rank(kind: str) -> int:
    return _GENERIC.index(kind) + 1 if kind in _GENERIC else 0


def merge(findings: Iterable[Finding]) -> list[Finding]:
    """Overlapping findings joined: one span each, under the most specific kind among them."""
    out: list[Finding] = []
    for f in sorted(findings):
        if f.end <= f.start:
            continue
        if out and f.start < out[-1].end:
            last = out[-1]
            kind = last.kind if _rank(last.kind) <= _rank(f.kind) else f.kind
            out[-1] = Finding(last.start, max(last.end, f.end), kind)
        else:
            out.append(f)
    return out


def _outside_markers(text: str, findings: Iterable[Finding]) -> Iterator[Finding]:
    """Drop findings inside an existing ``[REDACTED:…]`` marker (re-scanning redacted text finds nothing)."""
    spans = [(m.start(), m.end()) for m in MARKER_PATTERN.finditer(text)]
    for f in findings:
        if not any(s < f.end and f.start < e for s, e in spans):
            yield f


def detect(text: str) -> list[Finding]:
    """Every secret in ``text``, as non-overlapping spans in text order."""
    if not text:
        return []
    low = text.translate(_ASCII_LOWER)
    found: list[Finding] = []
    found += _private_keys(text)
    found += _plugin_findings(text)
    found += _vendor(text)
    found += _headers_and_urls(text, low)
    found += _pairs(text, low)
    return merge(_outside_markers(text, found))


def redact(text: str, findings: Iterable[Finding]) -> str:
    """``text`` with each finding replaced by its marker (findings from :func:`detect` on it)."""
    out: list[str] = []
    pos = 0
    for f in sorted(findings):
        out.append(text[pos:f.start])
        out.append(marker(f.kind))
        pos = f.end
    out.append(text[pos:])
    return "".join(out)


def keyed(key: str, value: str) -> list[Finding]:
    """Secrets in a JSON value, knowing its key: the value's own findings, or the whole value when
    the key names a secret (``{"db_password": "hunter2"}``) and the value is not a placeholder."""
    found = detect(value)
    if found:
        return found
    low = key.translate(_ASCII_LOWER)
    if _KEYWORD.search(low) and not _META_KEY.search(low) and not _SCHEME.match(value.strip()) and \
            _is_secret_value(value, quoted=True, keyword=low, op="="):
        kind = "password" if _PASSWORD_WORDS.search(low) else "secret"
        return [Finding(0, len(value), kind)]
    return []


def looks_like_token(name: str) -> bool:
    """A bare name shaped like a key or token (20+ characters, no spaces, letters and digits mixed,
    high entropy): doctor's test for an entity nothing mentions any more."""
    return (" " not in name and "://" not in name and bool(re.search(r"[0-9]", name))
            and bool(re.search(r"[A-Za-z]", name)) and _looks_random(name, minimum=20) and _entropy(name) >= 4.0)
