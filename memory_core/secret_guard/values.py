"""Whether a value is a secret: the key names that hold one, and the values that are not secrets
although such a key holds them (placeholders, references, variable names, numbers, words of prose,
well-known defaults). Every pattern that finds a value by its key asks here."""

from __future__ import annotations

import math
import re
import string

from memory_core.secret_guard.findings import MARKER_PATTERN

# the text lower-cased in ASCII only: offsets stay the same, so patterns run on it need no IGNORECASE
ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# detect-secrets' keyword list (detect_secrets.plugins.keyword.DENYLIST, checked by a test), and a few more
KEYWORD_DENYLIST = (
    "api_?key", "auth_?key", "service_?key", "account_?key", "db_?key", "database_?key", "priv_?key", "private_?key",
    "client_?key", "db_?pass", "database_?pass", "key_?pass", "password", "passwd", "pwd", "secret", "contraseña",
    "contrasena",
)
KEYWORDS = "|".join([*KEYWORD_DENYLIST, "token", "credentials?", "client_?secret", "access_?key", "auth_?token",
                     "authorization"])
KEYWORD = re.compile(r"(?:" + KEYWORDS + r")")  # a key naming a secret holds one (run on lower-cased text)
PASSWORD_WORDS = re.compile(r"pass|pwd|contrase")

# values of a secret-named key that are not secrets: empty words, placeholders, references
_NOT_VALUES = frozenset({
    "none", "null", "nil", "true", "false", "yes", "no", "on", "off", "required", "optional", "string", "str",
    "bytes", "int", "undefined", "unset", "empty", "redacted", "hidden", "masked", "secret", "password", "token",
    "env", "environ", "os.environ", "getenv", "self", "bearer", "basic", "true,", "false,", "auto", "default",
    "disabled", "enabled", "missing", "invalid", "expired", "revoked", "valid", "rotated", "set", "sha256",
    "ok", "n/a", "na", "tbd", "todo",
    # well-known defaults: everybody knows them, so they protect nothing, and a memory saying a default is
    # in use is worth keeping as written (also changeme and Java's keystore "changeit", in PLACEHOLDER)
    "pass", "admin", "root", "guest", "test", "user",
})
PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\{\{[^}]*\}\}|%\(?\w*\)?s|%s|\*+|x{3,}|X{3,}|\.{3,}|…|"
    r"your[-_ ]?\w*|my[-_ ]?\w*|example\w*|dummy\w*|placeholder\w*|change[-_]?me(?:_?here)?|changeit|"
    r"process\.env\.\w+|os\.environ.*|env\(.*|getenv\(.*|secrets?\.[\w.]+|vault:.*|ref\+.*|op://.*|file:.*)$",
    re.IGNORECASE,
)
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")  # OPENAI_API_KEY: a variable's name, not its value
_WORD = re.compile(r"^[A-Za-z][a-z]*$")  # a plain word (lower case or Capitalized)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z_.]*[_.][A-Za-z_.]*:?$")  # confirm_password, settings.api_key: code
SCHEME = re.compile(r"^(?:Bearer|Basic|Token|Digest)\s", re.IGNORECASE)  # a header value: found as a header
_NUMBER = re.compile(r"^[0-9.,_]+$")
# keys that name something about a secret, not the secret itself
META_KEY = re.compile(
    r"(?:_|-|\b)(?:env|file|path|name|id|ids|type|types|len|length|count|limit|limits|max|min|hash|sha256|url|"
    r"uri|endpoint|header|prefix|suffix|field|key_?id|version|expires?(?:_at|_in)?|ttl|ref|policy|manager|"
    r"store|provider|rotation|scope|scopes|usage|budget|used|tokens|tokenizer|tokenizers|parallelism|"
    r"secret_?santa|placeholder|hint|reset|required|strength|mode|enabled|regex|pattern|masked)[\"']?$",
    re.IGNORECASE,
)


def key_kind(key: str) -> str:
    """``password`` for a key naming one (``db_pass``, ``PGPASSWORD``), else ``secret``."""
    return "password" if PASSWORD_WORDS.search(key.translate(ASCII_LOWER)) else "secret"


def names_a_secret(key: str) -> bool:
    """Whether a key (a JSON key, a column, an XML element) names a secret it holds."""
    low = key.translate(ASCII_LOWER)
    return bool(KEYWORD.search(low)) and not META_KEY.search(low)


def pair_value(value: str) -> tuple[int, int, str]:
    """(offset into ``value``, length, the bare value) with quotes removed."""
    if len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]:
        return 1, len(value) - 2, value[1:-1]
    return 0, len(value), value


def is_secret_value(bare: str, *, quoted: bool, op: str) -> bool:
    """Whether the value of a secret-named key is a secret (not a placeholder, reference or word).
    ``quoted``: the value was delimited (quotes, an XML element); ``op``: what joined key and value."""
    b = bare.strip()
    if len(b) < 4 or MARKER_PATTERN.search(b):
        return False
    if b.casefold() in _NOT_VALUES or PLACEHOLDER.match(b) or ENV_NAME.match(b) or _NUMBER.match(b):
        return False
    if b.startswith(("/", "~/", "./", "../", "http://", "https://", "$", "@")):
        return False  # a path, a URL (its credentials, if any, are found as such) or a reference
    if not quoted and (_IDENTIFIER.match(b) or op.strip() in ("==", "!=", "===", "!==")):
        return False
    if SCHEME.match(b):
        return False
    if " " in b and not quoted:
        return False
    if quoted and " " in b and len(b.split()) > 2:
        return False  # a sentence in quotes ("password": "must be 12 characters") is a description
    if re.fullmatch(r"[\w]+", b) and not quoted and "=" not in op and _WORD.match(b):
        return len(b) >= 16  # "password: forgotten" is prose; a long letters-only passphrase is not
    return True


def entropy(value: str) -> float:
    """Shannon entropy of the characters of ``value``, in bits per character."""
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def looks_random(value: str, *, minimum: int = 16) -> bool:
    """A token-like value: long enough, letters and digits mixed, not a word or a placeholder."""
    if len(value) < minimum or MARKER_PATTERN.search(value) or PLACEHOLDER.match(value):
        return False
    classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]", r"[^A-Za-z0-9]"))
    return classes >= 2 and entropy(value) >= 3.0
