"""Secrets inside base64 or hex: a run that decodes to text holding a secret (``echo $TOKEN | base64``,
``xxd -p``, a PEM file base64-encoded in a Kubernetes secret), or to the bytes of a private key (a
PEM body whose armour lines were cut off), is a finding over the whole encoded run, under the kind of
what it holds. Runs wrapped over lines (base64(1) and PEM: 64-76 characters a line; ``xxd -p``: 60)
are read as one. Runs that decode to binary or to text without a secret — digests, images, base64 of
ordinary text — are left alone.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator

from memory_core.secret_guard.findings import Finding, most_specific

Detector = Callable[[str], list[Finding]]

_MIN_BYTES = 8
# a run, possibly wrapped: whole lines of 40+ characters, then a last line ending its own line (starting
# where a run starts: tried inside a long run, it would read to the run's end from every position)
_B64_BLOCK = re.compile(r"(?<![A-Za-z0-9+/_=-])(?:[A-Za-z0-9+/_-]{40,}={0,2}[ \t]*\r?\n[ \t]*)+"
                        r"[A-Za-z0-9+/_-]{2,}={0,2}(?=[ \t]*(?:\r?\n|$))")
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_BLANKS = re.compile(r"\s+")


def _private_key_bytes(raw: bytes) -> bool:
    """DER of a private key (PKCS#1 RSA, PKCS#8, SEC1 EC: a SEQUENCE opening with version 0 or 1, then
    an INTEGER, a SEQUENCE or an OCTET STRING) or an OpenSSH private key. Certificates and public keys
    open with a SEQUENCE or a long INTEGER instead."""
    if raw.startswith(b"openssh-key-v1\x00"):
        return True
    if len(raw) < 16 or raw[0] != 0x30:
        return False
    at = 2 + (raw[1] & 0x7F) if raw[1] & 0x80 else 2
    return raw[at:at + 3] in (b"\x02\x01\x00", b"\x02\x01\x01") and raw[at + 3:at + 4] in (b"\x02", b"\x30", b"\x04")


def _decode(run: str) -> bytes | None:
    """The bytes of a hex or base64 run (hex first: every hex run is base64 too), or None."""
    bare = _BLANKS.sub("", run)
    if len(bare) % 2 == 0 and _HEX.fullmatch(bare):
        return bytes.fromhex(bare)
    urlsafe = "-" in bare or "_" in bare
    if urlsafe and ("+" in bare or "/" in bare):
        return None
    bare = bare.rstrip("=")
    if len(bare) % 4 == 1:
        return None
    try:
        return base64.b64decode(bare + "=" * (-len(bare) % 4), altchars=b"-_" if urlsafe else None, validate=True)
    except (binascii.Error, ValueError):
        return None


def _text(raw: bytes) -> str | None:
    """``raw`` as text when it is printable UTF-8 (whitespace allowed), else None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if all(c.isprintable() or c in "\n\r\t" for c in text) else None


def _judge(run: str, detect: Detector) -> str | None:
    """The kind of secret an encoded run holds, or None."""
    raw = _decode(run)
    if raw is None or len(raw) < _MIN_BYTES:
        return None
    if _private_key_bytes(raw):
        return "private-key"
    text = _text(raw)
    found = detect(text) if text and text.strip() else []
    return most_specific(found) if found else None


def encoded_findings(text: str, detect: Detector) -> Iterator[Finding]:
    """A finding over each hex or base64 run of ``text`` that decodes to a secret (``detect`` reads
    the decoded text)."""
    taken: list[tuple[int, int]] = []
    if "\n" in text:
        for m in _B64_BLOCK.finditer(text):
            run = m.group()
            kind = _judge(run, detect)
            if kind is None and "\n" in run.rstrip():  # the last line may be a word after the run
                run = run[:run.rstrip().rfind("\n")]
                kind = _judge(run, detect)
            if kind is not None:
                taken.append((m.start(), m.start() + len(run.rstrip())))
                yield Finding(m.start(), m.start() + len(run.rstrip()), kind)
    for m in _B64_RUN.finditer(text):
        if any(s <= m.start() < e for s, e in taken):
            continue
        kind = _judge(m.group(), detect)
        if kind is not None:
            yield Finding(m.start(), m.end(), kind)


__all__ = ["encoded_findings"]
