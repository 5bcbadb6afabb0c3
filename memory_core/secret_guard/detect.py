"""Find secrets in text: each one's kind and its character span, never anything else.

Sources, merged:

- Yelp's ``detect-secrets`` plugins (the vendor tokens: AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, JWT, SendGrid, Twilio, npm, PyPI, Discord, Telegram, Mailchimp, Azure storage,
  Square, Artifactory, credentials in URLs). Their regexes run over the whole text; each
  secret value a plugin yields is located in the text (every occurrence) and, for tokens,
  widened to the end of the token (some plugins match only a token's first characters).
- :data:`_VENDOR`, for what those plugins miss or see only in part: PEM and PuTTY private
  key blocks spanning lines (with real or ``\\n``-escaped newlines, armour in any case),
  ``password=`` / ``passwd:`` / ``secret=`` / ``api_key:`` pairs (the keyword list is
  detect-secrets' own), ``Authorization: Bearer|Basic`` headers, tokens in URL query strings,
  credentials in URLs with an empty user, AWS secret access keys, fine-grained GitHub tokens,
  Stripe test keys, Google, Anthropic, Hugging Face, Vault, age and DigitalOcean keys, Discord
  webhooks.
- :mod:`.formats`: credentials as tools print them (netrc, pgpass, XML, CSV, docker's config,
  command lines, ``aws configure``, prose).
- :mod:`.encoded`: base64 and hex runs that decode to a secret or a private key.

All of it runs on the text as :func:`memory_core.secret_guard.views.normalised` reads it
(invisible characters removed, full-width forms and look-alike letters read as ASCII), and on the
``%``-decoded form of URL-encoded tokens; findings are mapped back to the text as given.

Where two findings overlap, their spans are joined under the more specific kind (a GitHub
token assigned to ``GITHUB_TOKEN=`` is a ``github-token``, not a generic ``secret``).
Entropy-only detection is not used: on the corpus of look-alikes (git SHAs, sha256 hashes,
UUIDs, base64 images) it flagged more harmless strings than secrets it added
(see docs/secrets.md and ``python -m bench.quality.secrets --entropy``).

A marker ``[REDACTED:<kind>]`` is never itself a finding, so scanning redacted text finds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from memory_core.secret_guard.encoded import encoded_findings
from memory_core.secret_guard.findings import MARKER_PATTERN, Finding, marker, merge
from memory_core.secret_guard.formats import tool_formats
from memory_core.secret_guard.values import (
    ASCII_LOWER,
    KEYWORD,
    META_KEY,
    PLACEHOLDER,
    SCHEME,
    entropy,
    is_secret_value,
    key_kind,
    looks_random,
    pair_value,
)
from memory_core.secret_guard.views import View, encoded_tokens, normalised, percent_decoded

if TYPE_CHECKING:
    from detect_secrets.plugins.base import RegexBasedDetector


# ---- detect-secrets plugins -------------------------------------------------------------------
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-]*")
_JWT_TAIL = re.compile(r"[A-Za-z0-9_\-.+/=]*")
_PREFIXES = ("AccountKey=",)  # what a plugin's match holds before the secret itself
_MIN_TOKEN = 11
# detect-secrets plugin (module, class) -> (kind, whether the value is a token to widen to its end,
# the needles: the plugin runs only on text holding one of them, a C-speed substring test; None: always).
# No plugin's token is shorter than _MIN_TOKEN characters (Artifactory's "AP…" keys are the shortest).
# Imported on the first scan (detect-secrets pulls in requests): starting a CLI or server stays light.
_PLUGINS: dict[tuple[str, str], tuple[str, bool, tuple[str, ...] | None]] = {
    ("aws", "AWSKeyDetector"): ("aws-access-key", True, ("A3T", "ABIA", "ACCA", "AKIA", "ASIA", "aws", "AWS", "Aws")),
    ("artifactory", "ArtifactoryDetector"): ("artifactory-token", True, ("AKC", "AP")),
    ("azure_storage_key", "AzureStorageKeyDetector"): ("azure-storage-key", True, ("AccountKey=",)),
    ("basic_auth", "BasicAuthDetector"): ("url-credentials", False, ("://",)),
    ("discord", "DiscordBotTokenDetector"): ("discord-token", True, (".",)),
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
    ("telegram_token", "TelegramBotTokenDetector"): ("telegram-token", True, (":",)),
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
    if len(text) < _MIN_TOKEN:
        return
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
                if p.name == "TelegramBotTokenDetector" and not _standalone_telegram(text, found.start(), end):
                    continue
                if p.token:
                    tail = tail_pattern.match(text, end)
                    end = tail.end() if tail else end
                yield Finding(found.start() + skip, end, kind)


def _standalone_telegram(text: str, start: int, end: int) -> bool:
    """A Telegram token is a whole bot id (no digit before it) and exactly 35 characters after the colon:
    the plugin's pattern is unanchored, so a UUID ending in digits, ``:`` and another UUID matched it."""
    return not (start > 0 and text[start - 1].isdigit()) and not (end < len(text) and _TOKEN_CHAR.match(text, end))


_TOKEN_CHAR = re.compile(r"[0-9A-Za-z_-]")


# ---- own patterns -------------------------------------------------------------------------------
# Patterns below run over the text lower-cased in ASCII only (offsets stay the same), so none needs
# IGNORECASE, and each starts with a literal: Python's re then searches at C speed.
_PEM_BEGIN = re.compile(r"-----begin ((?:[a-z0-9]+ )*private key(?: block)?)-----")
_KEY_BODY = re.compile(r"(?:\\[nr]|[\sA-Za-z0-9+/=:,.-])*")  # base64 lines, PEM headers, escaped newlines
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC: *[0-9a-fA-F]+|\Z)", re.DOTALL)
_MAX_KEY_CHARS = 20_000


def _private_keys(text: str, low: str) -> Iterator[Finding]:
    covered = 0  # a block's span: armour lines inside it begin no other block
    for begin in _PEM_BEGIN.finditer(low):
        if begin.start() < covered:
            continue
        end_marker = f"-----end {begin.group(1)}-----"
        end = low.find(end_marker, begin.end(), begin.end() + _MAX_KEY_CHARS)
        if end >= 0:
            covered = end + len(end_marker)
        else:  # a truncated block: the header and the key material that follows it
            body = _KEY_BODY.match(text, begin.end())
            covered = body.end() if body else begin.end()
        yield Finding(begin.start(), covered, "private-key")
    if "PuTTY" in text:
        for m in _PUTTY.finditer(text):
            yield Finding(m.start(), m.end(), "private-key")


_KEY_CHARS = re.compile(r"[\w.-]*")  # the rest of the identifier a keyword sits in
_KEY_START = re.compile(r"[\w.-]*$")
# after a secret-named key: an assignment and the value (quoted, or up to a delimiter)
_ASSIGNED = re.compile(
    r"[\"']?(?P<op>[ \t]*(?::=|=>|[!=]==?|==?|:)[ \t]*|[ \t]+(?=[\"']))"
    r"(?P<value>\"[^\"\n]{1,4096}\"|'[^'\n]{1,4096}'|`[^`\n]{1,4096}`|[^\s\"'`,;&<>()\[\]{}]+)")
# command-line flags: --password hunter2, --token=...
_FLAG = re.compile(
    r"--(?P<key>password|passwd|pass|token|api-key|apikey|secret|client-secret|auth-token)"
    r"(?P<op>[= ])(?P<value>\"[^\"\n]+\"|'[^'\n]+'|[^\s\"']+)")
_AUTH_HEADER = re.compile(r"(?P<scheme>bearer|basic|token)[ \t]+(?P<value>[a-z0-9\-._~+/]{8,}=*)")
_HEADER_KEY = re.compile(r"(?:x-api-key|api-key|x-auth-token|private-token|x-access-token)[ \t]*:[ \t]*"
                         r"(?P<value>[a-z0-9\-._~+/=]{8,})")
# the password runs to the last "@" before the host: an unescaped "@" or "#" in it is still the password
_URL_CREDENTIALS = re.compile(r"://(?P<user>[^\s:@/?#\[\]]*):(?P<value>[^\s/\"'<>]+)@(?=[\w\[])")
_QUERY_TOKEN = re.compile(
    r"[?&](?P<key>access_token|refresh_token|id_token|token|api_?key|apikey|key|sig|signature|client_secret|"
    r"password|passwd|secret|auth|x-amz-signature|x-amz-credential|x-amz-security-token)=(?P<value>[^&\s#\"'<>]+)")

# (pattern, kind, needle: the pattern runs only on text holding it); a leading word boundary is checked
# in code (a pattern starting with a literal is searched at C speed, one starting with \b is tried at
# every position)
_VENDOR: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
     "aws-secret-key", ""),
    (re.compile(r"github_pat_[A-Za-z0-9_]{40,255}"), "github-token", "github_pat_"),
    (re.compile(r"gh[pousr]_[A-Za-z0-9]{36,255}"), "github-token", "gh"),
    (re.compile(r"[rsp]k_(?:live|test)_[0-9A-Za-z]{16,255}"), "stripe-key", "k_"),
    (re.compile(r"whsec_[0-9A-Za-z]{24,}"), "stripe-key", "whsec_"),
    (re.compile(r"AIza[0-9A-Za-z\-_]{35}"), "google-api-key", "AIza"),
    (re.compile(r"sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9\-_]{80,}"), "anthropic-key", "sk-ant-"),
    (re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9\-_]{20,}T3BlbkFJ[A-Za-z0-9\-_]{20,}"), "openai-key",
     "T3BlbkFJ"),
    (re.compile(r"sk-proj-[A-Za-z0-9\-_]{40,}"), "openai-key", "sk-proj-"),
    (re.compile(r"hf_[A-Za-z]{34,40}(?![A-Za-z0-9_])"), "huggingface-token", "hf_"),
    (re.compile(r"xox[abposr]-[0-9A-Za-z-]{10,}"), "slack-token", "xox"),
    (re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), "npm-token", "npm_"),
    (re.compile(r"glpat-[A-Za-z0-9_\-]{20,}"), "gitlab-token", "glpat-"),
    (re.compile(r"hv[sbr]\.[A-Za-z0-9_\-]{24,}"), "vault-token", "hv"),
    (re.compile(r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"), "age-secret-key", "AGE-SECRET-KEY-1"),
    (re.compile(r"do[opr]_v1_[a-f0-9]{64}(?![A-Za-z0-9])"), "digitalocean-token", "_v1_"),
    (re.compile(r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/\d{5,20}/[A-Za-z0-9_\-]{60,80}"),
     "discord-webhook", "/api/webhooks/"),
]


def _pairs(text: str, low: str) -> Iterator[Finding]:
    for kw in KEYWORD.finditer(low):
        key_end = _KEY_CHARS.match(low, kw.end())
        start_m = _KEY_START.search(low, max(0, kw.start() - 64), kw.start())
        key_start = start_m.start() if start_m else kw.start()
        end = key_end.end() if key_end else kw.end()
        m = _ASSIGNED.match(text, end)
        if m is None:
            continue
        key = low[key_start:end]
        if META_KEY.search(key) or text.endswith("://", 0, key_start):
            continue  # about a secret, not one; or a URL's user name (its password is found as url-credentials)
        raw = m.group("value")
        offset, length, bare = pair_value(raw)
        quoted = offset == 1
        if not quoted and text[m.end("value"):m.end("value") + 1] in ("(", "."):
            continue  # a call or an attribute: get_secret("db"), settings.token
        if not is_secret_value(bare, quoted=quoted, op=m.group("op")):
            continue
        start = m.start("value") + offset
        yield Finding(start, start + length, key_kind(key))
    for m in _FLAG.finditer(low):
        offset, length, bare = pair_value(text[m.start("value"):m.end("value")])
        if is_secret_value(bare, quoted=offset == 1, op="="):
            start = m.start("value") + offset
            yield Finding(start, start + length, key_kind(m.group("key")))


def _headers_and_urls(text: str, low: str) -> Iterator[Finding]:
    for m in _AUTH_HEADER.finditer(low):
        if m.start() and low[m.start() - 1].isalnum():
            continue
        value = text[m.start("value"):m.end("value")]
        if m.group("scheme") == "basic" and not MARKER_PATTERN.search(value):
            yield Finding(m.start("value"), m.end("value"), "basic-auth")
        elif looks_random(value, minimum=12):
            yield Finding(m.start("value"), m.end("value"), "bearer-token")
    for m in _HEADER_KEY.finditer(low):
        value = text[m.start("value"):m.end("value")]
        if looks_random(value, minimum=12) and not text.endswith("://", 0, m.start()):
            yield Finding(m.start("value"), m.end("value"), "secret")
    for m in _URL_CREDENTIALS.finditer(text):
        value = m.group("value")
        if not MARKER_PATTERN.search(value) and not PLACEHOLDER.match(value):
            yield Finding(m.start("value"), m.end("value"), "url-credentials")
    for m in _QUERY_TOKEN.finditer(low):
        value, key = text[m.start("value"):m.end("value")], m.group("key")
        if key in ("password", "passwd", "secret", "client_secret"):
            ok = is_secret_value(value, quoted=False, op="=")
        else:
            ok = looks_random(value, minimum=12)
        if ok:
            yield Finding(m.start("value"), m.end("value"), "url-token")


def _vendor(text: str, low: str) -> Iterator[Finding]:
    if len(text) < _MIN_TOKEN:
        return
    for pattern, kind, needle in _VENDOR:
        if needle not in text if needle else "secret" not in low:
            continue
        for m in pattern.finditer(text):
            if m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_"):
                continue  # inside a longer word
            group = "value" if "value" in pattern.groupindex else 0
            yield Finding(m.start(group), m.end(group), kind)


# ---- one text, as given and as detection reads it ----------------------------------------------------
_MIN_SECRET = 8  # no pattern finds a secret in fewer characters ("pwd=abcd")
def _literal(text: str) -> list[Finding]:
    """The secrets the patterns find in ``text`` read literally."""
    low = text.translate(ASCII_LOWER)
    found: list[Finding] = []
    found += _private_keys(text, low)
    found += _plugin_findings(text)
    found += _vendor(text, low)
    found += _headers_and_urls(text, low)
    found += _pairs(text, low)
    found += tool_formats(text, low)
    return found


def _percent_encoded(text: str) -> Iterator[Finding]:
    """Secrets in URL-encoded tokens (``%67%68%70%5F…``), as spans of ``text``."""
    for start, end in encoded_tokens(text):
        view = percent_decoded(text[start:end])
        if view is None or len(view.text) < _MIN_SECRET:
            continue
        for f in _literal(view.text):
            back = view.back(f)
            yield Finding(start + back.start, start + back.end, f.kind)


def _outside_markers(text: str, findings: Iterable[Finding]) -> Iterator[Finding]:
    """Drop findings inside an existing ``[REDACTED:…]`` marker (re-scanning redacted text finds nothing)."""
    spans = [(m.start(), m.end()) for m in MARKER_PATTERN.finditer(text)]
    for f in findings:
        if not any(s < f.end and f.start < e for s, e in spans):
            yield f


def detect(text: str) -> list[Finding]:
    """Every secret in ``text``, as non-overlapping spans in text order."""
    if len(text) < _MIN_SECRET:
        return []
    view: View | None = normalised(text)
    read = text if view is None else view.text
    found = _literal(read)
    if "%" in read:
        found += _percent_encoded(read)
    found += encoded_findings(read, _literal)
    if view is not None:
        found = [view.back(f) for f in found]
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
    low = key.translate(ASCII_LOWER)
    if KEYWORD.search(low) and not META_KEY.search(low) and not SCHEME.match(value.strip()) and \
            is_secret_value(value, quoted=True, op="="):
        return [Finding(0, len(value), key_kind(low))]
    return []


def looks_like_token(name: str) -> bool:
    """A bare name shaped like a key or token (20+ characters, no spaces, letters and digits mixed,
    high entropy): doctor's test for an entity nothing mentions any more."""
    return (" " not in name and "://" not in name and bool(re.search(r"[0-9]", name))
            and bool(re.search(r"[A-Za-z]", name)) and looks_random(name, minimum=20) and entropy(name) >= 4.0)


__all__ = ["detect", "keyed", "looks_like_token", "redact"]
