"""Credentials as tools write them, where no ``key=value`` pair names them: configuration files
(``~/.netrc``, ``~/.pgpass``, XML elements and ``<add key=… value=…>``, CSV files with a password
column, ``auth`` entries of ``~/.docker/config.json``), command lines that take a password
(``curl -u user:pass``, ``docker login -p``, ``sshpass -p``, ``redis-cli -a``, …), prompts
(``aws configure``) and prose (``the password is …``).

Each value is judged like a pair's (:func:`memory_core.secret_guard.values.is_secret_value`):
placeholders, ``$VARIABLES``, well-known defaults and plain words are not secrets.
"""

from __future__ import annotations

import base64
import binascii
import csv
import re
from collections.abc import Iterator

from memory_core.secret_guard.findings import MARKER_PATTERN, Finding
from memory_core.secret_guard.values import KEYWORD, is_secret_value, key_kind, names_a_secret

# ---- configuration files ---------------------------------------------------------------------------
_NETRC = re.compile(r"machine[ \t]+\S+(?:\s+(?:login|account|port)\s+\S+)*\s+password\s+(?P<value>\S+)")
_PORT_FIELD = re.compile(r":(?:\d{1,5}|\*):[^\s:]+:[^\s:]+:")  # what a pgpass line holds (a cheap first test)
_PGPASS = re.compile(r"^[ \t]*[^\s:#][^\s:]*:(?:\d{1,5}|\*):[^\s:]+:[^\s:]+:(?P<value>\S+?)[ \t]*$", re.MULTILINE)
_XML_ELEMENT = re.compile(r"<(?P<tag>[A-Za-z_][\w.:-]{0,80})>(?P<value>[^<\n]{1,4096})</(?P=tag)>")
_XML_KEY_VALUE = re.compile(r"(?:key|name)[ \t]*=[ \t]*\"(?P<key>[^\"\n]{1,128})\"[ \t]+value[ \t]*=[ \t]*"
                            r"\"(?P<value>[^\"\n]{1,4096})\"")
_AUTH_ENTRY = re.compile(r"auth[\"']?[ \t]*[:=][ \t]*[\"']?(?P<value>[A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])")
# a CSV header: short names, at least two (the rows below it are read by column)
_CSV_HEADER = re.compile(r"[ \t]*\"?[\w .()/-]{1,40}\"?(?:,\"?[\w .()/-]{1,40}\"?)+[ \t]*\r?")


def _config_files(text: str, low: str) -> Iterator[Finding]:
    if "machine" in low:
        for m in _NETRC.finditer(low):
            value = text[m.start("value"):m.end("value")]
            if is_secret_value(value, quoted=True, op=" "):
                yield Finding(m.start("value"), m.end("value"), "password")
    if _PORT_FIELD.search(text):
        for m in _PGPASS.finditer(text):
            if is_secret_value(m.group("value"), quoted=False, op=":"):
                yield Finding(m.start("value"), m.end("value"), "password")
    if "</" in text:
        for m in _XML_ELEMENT.finditer(text):
            if names_a_secret(m.group("tag")) and is_secret_value(m.group("value"), quoted=True, op="="):
                yield Finding(m.start("value"), m.end("value"), key_kind(m.group("tag")))
    if "value=" in low or "value =" in low:
        for m in _XML_KEY_VALUE.finditer(low):
            key, value = text[m.start("key"):m.end("key")], text[m.start("value"):m.end("value")]
            if names_a_secret(key) and is_secret_value(value, quoted=True, op="="):
                yield Finding(m.start("value"), m.end("value"), key_kind(key))
    if "auth" in low:
        for m in _AUTH_ENTRY.finditer(low):
            if m.start() and (low[m.start() - 1].isalnum() or low[m.start() - 1] in "_-"):
                continue  # the end of a longer key (oauth, _auth)
            if _user_and_password(text[m.start("value"):m.end("value")]):
                yield Finding(m.start("value"), m.end("value"), "basic-auth")
    if "," in text:
        yield from _csv_columns(text, low)


def _user_and_password(value: str) -> bool:
    """Whether ``value`` is base64 of ``user:password`` (docker's ``auth`` entries)."""
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    user, sep, password = decoded.partition(":")
    return bool(sep and user and len(password) >= 4 and password.isprintable())


def _csv_columns(text: str, low: str) -> Iterator[Finding]:
    """Values under a header naming a secret (AWS's ``credentials.csv``: ``Password``, ``Secret access key``):
    the rows that follow the header with as many commas."""
    line_end = -1  # the end of the last line read: one read per line, however many keywords it holds
    for kw in KEYWORD.finditer(low):
        if kw.start() < line_end:
            continue
        start = low.rfind("\n", 0, kw.start()) + 1
        end = low.find("\n", start)
        line_end = len(low) if end < 0 else end
        header_line = text[start:] if end < 0 else text[start:end]
        if "," not in header_line or not _CSV_HEADER.fullmatch(header_line):
            continue
        header = next(csv.reader([header_line.strip()]))
        columns = [c for c, name in enumerate(header) if names_a_secret(name.strip())]
        commas = header_line.strip().count(",")
        while columns and end >= 0:
            row_start = end + 1
            end = text.find("\n", row_start)
            row = (text[row_start:] if end < 0 else text[row_start:end]).rstrip("\r")
            if not row.strip() or row.count(",") != commas:
                break
            cells, pos = [], row_start
            for cell in row.split(","):
                cells.append((pos, cell))
                pos += len(cell) + 1
            for c in columns:
                at, cell = cells[c]
                if is_secret_value(cell.strip().strip('"'), quoted=True, op=","):
                    lead = len(cell) - len(cell.lstrip(' "'))
                    yield Finding(at + lead, at + len(cell.rstrip(' "')), key_kind(header[c]))


# ---- command lines ---------------------------------------------------------------------------------
# (commands, the flags that take a password, how the value holds it, a subcommand the flag needs)
#   value: the next word or --flag=word; attached: -pWORD; user:pass, user%pass: after the separator;
#   openssl: pass:WORD (env:VAR and file:PATH name where it is)
_COMMANDS: tuple[tuple[str, tuple[str, ...], str, str | None], ...] = (
    ("curl|wget|http|https|xh", ("-u", "--user"), "user:pass", None),
    ("docker|podman|nerdctl|buildah|skopeo|helm|oras|crane", ("-p", "--password"), "value", "login"),
    ("sshpass", ("-p",), "value", None),
    ("redis-cli|valkey-cli|keydb-cli", ("-a", "--pass"), "value", None),
    ("mongosh|mongo|mongodump|mongorestore|mongoexport|mongoimport", ("-p", "--password"), "value", None),
    ("ldapsearch|ldapmodify|ldapadd|ldapdelete|ldapwhoami|ldappasswd", ("-w",), "value", None),
    ("sqlcmd|bcp|osql", ("-P",), "value", None),
    ("openssl", ("-passin", "-passout", "-pass", "-password"), "openssl", None),
    ("keytool", ("-storepass", "-keypass", "-srcstorepass", "-deststorepass", "-srckeypass", "-destkeypass"),
     "value", None),
    ("zip|unzip", ("-P",), "value", None),
    ("az", ("-p", "--password"), "value", "login"),
    ("smbclient|rpcclient|smbmap", ("-U", "--user"), "user%pass", None),
    ("lftp", ("-u",), "user,pass", None),
    ("mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlsh|mariadb|mariadb-dump", ("-p",), "attached", None),
    ("7z|7za|7zz", ("-p",), "attached", None),
)
_COMMAND = re.compile(r"(?:^|(?<=[\s;|&(`$/]))(?P<cmd>" + "|".join(c for c, *_ in _COMMANDS) + r")(?=[ \t])",
                      re.MULTILINE)
_BY_COMMAND = {name: spec for spec in _COMMANDS for name in spec[0].split("|")}
_WORD_TOKEN = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|\\\r?\n|[;|&]+|\n|[^\s\"';|&]+")


# a flag that may take a password: the lines holding none are not read for commands
_FLAG_HINT = re.compile(r"[ \t](?:-[upawPU]|--user|--pass|-pass|-store|-key|-src|-dest)")


def _command_lines(text: str) -> Iterator[Finding]:
    line_end = -1  # the end of the last (logical) line read: one read per line, however many hints it holds
    for hint in _FLAG_HINT.finditer(text):
        if hint.start() < line_end:
            continue
        start = text.rfind("\n", 0, hint.start()) + 1
        while start > 1 and text[start - 2] == "\\":  # a line continued from the one before
            start = text.rfind("\n", 0, start - 2) + 1
        end = hint.start()
        while (end := text.find("\n", end)) > 0 and text[end - 1] == "\\":
            end += 1
        line_end = len(text) if end < 0 else end
        yield from _commands(text, start, line_end)


def _commands(text: str, start: int, end: int) -> Iterator[Finding]:
    commands = list(_COMMAND.finditer(text, start, end))
    for i, m in enumerate(commands):
        _alts, flags, form, needs = _BY_COMMAND[m.group("cmd")]
        words: list[tuple[int, str]] = []
        stop = commands[i + 1].start() if i + 1 < len(commands) else end  # its words end where the next begins
        for w in _WORD_TOKEN.finditer(text, m.end(), stop):
            word = w.group()
            if word.startswith("\\"):
                continue  # a line continued
            if word == "\n" or word[0] in ";|&":
                break
            words.append((w.start(), word))
        if needs is not None and needs not in (w for _s, w in words):
            continue
        for i, (at, word) in enumerate(words):
            found = _flag_value(flags, form, word, at, words[i + 1] if i + 1 < len(words) else None)
            if found is not None:
                yield found


def _flag_value(flags: tuple[str, ...], form: str, word: str, start: int,
                following: tuple[int, str] | None) -> Finding | None:
    """The password ``word`` (a flag of ``flags``) gives, or None."""
    value: tuple[int, str] | None = None
    if form == "attached":
        if word.startswith(flags[0]) and len(word) > len(flags[0]) and word[len(flags[0])] not in "-=":
            value = (start + len(flags[0]), word[len(flags[0]):])
    elif word in flags:
        if following is not None and not following[1].startswith("-"):
            value = following
    else:
        flag, eq, rest = word.partition("=")
        if eq and flag in flags and flag.startswith("--"):
            value = (start + len(flag) + 1, rest)
    if value is None:
        return None
    pos, raw = value
    quoted = len(raw) >= 2 and raw[0] in "\"'" and raw[-1] == raw[0]
    if quoted:
        pos, raw = pos + 1, raw[1:-1]
    sep = {"user:pass": ":", "user%pass": "%", "user,pass": ","}.get(form)
    if sep is not None:
        user, found, secret = raw.partition(sep)
        if not found or not user:
            return None
        pos, raw = pos + len(user) + 1, secret
    elif form == "openssl":
        if not raw.startswith("pass:"):
            return None
        pos, raw = pos + 5, raw[5:]
    if not is_secret_value(raw, quoted=True, op="="):
        return None
    return Finding(pos, pos + len(raw), "password")


# ---- prompts and prose -----------------------------------------------------------------------------
_AWS_PROMPT = re.compile(r"aws secret access key[ \t]*\[[^\]\n]*\][ \t]*:[ \t]*"
                         r"(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")
# an access key id, then its secret on the same line (credentials.csv, tables, "id secret" pairs)
_AWS_PAIR = re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}[ \t,;:|\"']+(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")
_PROSE = re.compile(
    r"(?:password|passphrase|passcode|pwd)(?:[ \t]+for[ \t]+(?:the[ \t]+)?[\w.@/-]+(?:[ \t]+[\w.@/-]+)?)?"
    r"[ \t]+(?:is|was|to)(?:[ \t]+(?:now|still|set[ \t]+to))?[ \t]*:?[ \t]+"
    r"(?P<value>\"[^\"\n]{4,200}\"|'[^'\n]{4,200}'|`[^`\n]{4,200}`|[^\s\"'`]{4,400})")
_TRAILING = ".,;:)"


def _prompts_and_prose(text: str, low: str) -> Iterator[Finding]:
    if "aws secret access key" in low:
        for m in _AWS_PROMPT.finditer(low):
            yield Finding(m.start("value"), m.end("value"), "aws-secret-key")
    if "KIA" in text or "SIA" in text:
        for m in _AWS_PAIR.finditer(text):
            yield Finding(m.start("value"), m.end("value"), "aws-secret-key")
    for m in _PROSE.finditer(low):
        start, end = m.start("value"), m.end("value")
        raw = text[start:end]
        if raw[0] in "\"'`":
            start, end, raw = start + 1, end - 1, raw[1:-1]
        else:
            bare = raw.rstrip(_TRAILING)
            end, raw = start + len(bare), bare
        if _prose_password(raw):
            yield Finding(start, end, "password")


def _prose_password(value: str) -> bool:
    """A word in a sentence that is a password: not a word, a number or a name, and shaped like one
    (a digit or a symbol among letters, or long)."""
    if not is_secret_value(value, quoted=False, op=" ") or MARKER_PATTERN.search(value):
        return False
    if re.fullmatch(r"[A-Za-z]+(?:[-_.'][A-Za-z]+)*", value):
        return len(value) >= 16
    return bool(re.search(r"[A-Za-z]", value)) and bool(re.search(r"[0-9!@#$%^&*+=?~]", value))


def tool_formats(text: str, low: str) -> Iterator[Finding]:
    """Every credential of the formats above in ``text`` (``low``: it lower-cased in ASCII)."""
    yield from _config_files(text, low)
    yield from _command_lines(text)
    yield from _prompts_and_prose(text, low)


__all__ = ["tool_formats"]
