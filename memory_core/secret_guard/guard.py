"""The secrets guard every write path runs before anything is stored (see docs/secrets.md).

``security.secrets`` picks the policy:

- ``redact`` (default): each secret :func:`memory_core.secret_guard.detect.detect` finds is replaced
  by ``[REDACTED:<kind>]``; the write goes on and its result says what was redacted (kinds and
  counts, never a value);
- ``reject``: the write is refused with SECRET_REJECTED naming each secret's field, kind and
  character span; nothing is written;
- ``allow``: text is stored as given.

What is scanned: the content; every string in ``metadata`` and ``source`` (keys too, and a value
under a key that names a secret, ``{"db_password": "…"}``, is one), and in them any hash of a secret
or of the clear text that held one (an md5 of a short password is the password); declared entity
names, aliases, kinds and relation labels. Names that scope and address rows (tenant, session,
agent, channel, project, role, type, idempotency key) are never rewritten — a redacted session name
would be another session — so one holding a secret refuses the write (SECRET_REJECTED naming the
field) under ``redact`` as under ``reject`` (:meth:`SecretGuard.names`).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memory_core.errors import SecretRejectedError
from memory_core.secret_guard.detect import detect, keyed, redact
from memory_core.secret_guard.findings import Finding

Policy = Literal["redact", "reject", "allow"]
POLICIES: tuple[Policy, ...] = ("redact", "reject", "allow")
MAX_REPORTED = 50  # spans a SECRET_REJECTED error lists (the kinds count them all)
HASHES = ("md5", "sha1", "sha256", "sha512")  # hex digests looked for in metadata and source
_HEX_RUN = re.compile(r"[0-9a-fA-F]{32}")  # the shortest of them: a string without such a run holds none


@dataclass(frozen=True)
class Located:
    """A secret found in one field of a write: the field's path, its kind and span (never the value)."""

    field: str
    kind: str
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "kind": self.kind, "start": self.start, "end": self.end}


@dataclass
class Scan:
    """What one write held: the secrets found, field by field."""

    found: list[Located] = field(default_factory=list)

    def note(self, path: str, findings: list[Finding]) -> None:
        self.found += [Located(path, f.kind, f.start, f.end) for f in findings]

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(x.kind for x in self.found).items()))


class SecretGuard:
    """Applies the configured policy to one write's fields (one instance per store, stateless)."""

    def __init__(self, policy: Policy = "redact") -> None:
        if policy not in POLICIES:
            raise ValueError(f"security.secrets must be one of {', '.join(POLICIES)}")
        self.policy: Policy = policy

    @property
    def active(self) -> bool:
        return self.policy != "allow"

    def text(self, value: str, path: str, scan: Scan) -> str:
        """``value`` with its secrets replaced (under ``redact``; noted in ``scan`` either way)."""
        if not self.active or not value:
            return value
        found = detect(value)
        scan.note(path, found)
        return redact(value, found) if found and self.policy == "redact" else value

    def json(self, value: Any, path: str, scan: Scan) -> Any:
        """A JSON value with every string (and object key) guarded; key names give their values context."""
        if not self.active:
            return value
        return self._json(value, path, "", scan)

    def _json(self, value: Any, path: str, key: str, scan: Scan) -> Any:
        if isinstance(value, str):
            found = keyed(key, value) if key else detect(value)
            scan.note(path, found)
            return redact(value, found) if found and self.policy == "redact" else value
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for k, item in value.items():
                key_found = detect(str(k))
                scan.note(f"{path}.<key>", key_found)
                safe = redact(str(k), key_found) if key_found else str(k)  # a path never shows a secret
                name = safe if self.policy == "redact" else str(k)
                while name in out:  # two keys redacted to the same marker: both kept
                    name += "'"
                out[name] = self._json(item, f"{path}.{safe}", str(k), scan)
            return out
        if isinstance(value, list | tuple):
            return [self._json(item, f"{path}[{i}]", key, scan) for i, item in enumerate(value)]
        return value

    def names(self, values: Mapping[str, str | None], what: str = "write") -> None:
        """Names that address rows (``{"session": …, "agent": …}``): SECRET_REJECTED naming the field when
        one holds a secret, under ``redact`` too — rewriting a name would change which rows it addresses,
        and the clear name would be shown to every agent of the tenant."""
        if not self.active:
            return
        scan = Scan()
        for path, value in values.items():
            if value:
                scan.note(path, detect(value))
        if scan.found:
            counts = scan.counts()
            kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items())
            where = ", ".join(sorted({x.field for x in scan.found}))
            raise SecretRejectedError(
                f"The {what}'s {where} holds a secret ({kinds}); names that address rows are never redacted "
                "(that would change what they address), so nothing was written. Use a name that is not a secret.",
                field=scan.found[0].field, kinds=counts, secrets=[x.to_dict() for x in scan.found[:MAX_REPORTED]],
            )

    def hashes(self, value: Any, digests: frozenset[str], path: str, scan: Scan) -> Any:
        """A JSON value with each of ``digests`` (:func:`digests_of` the text as given and the secrets found
        in it) replaced wherever a string holds it: a hash of a short secret is the secret."""
        if not self.active or not digests:
            return value
        return self._hashes(value, digests, path, scan)

    def _hashes(self, value: Any, digests: frozenset[str], path: str, scan: Scan) -> Any:
        if isinstance(value, str):
            if not _HEX_RUN.search(value):
                return value
            low = value.lower()
            found = [Finding(i, i + len(d), "secret-hash") for d in digests for i in _occurrences(low, d)]
            if not found:
                return value
            scan.note(path, found)
            return redact(value, found) if self.policy == "redact" else value
        if isinstance(value, Mapping):
            return {k: self._hashes(item, digests, f"{path}.{k}", scan) for k, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._hashes(item, digests, f"{path}[{i}]", scan) for i, item in enumerate(value)]
        return value

    def finish(self, scan: Scan, what: str = "write") -> dict[str, int]:
        """The kinds and counts to report; under ``reject``, SECRET_REJECTED when anything was found."""
        if not scan.found:
            return {}
        counts = scan.counts()
        if self.policy == "reject":
            kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items())
            where = sorted({x.field for x in scan.found})
            raise SecretRejectedError(
                f"The {what} holds secrets ({kinds}) in {', '.join(where)}; nothing was written "
                "(security.secrets = \"reject\"). Remove them, or store a reference to where they are kept.",
                kinds=counts, secrets=[x.to_dict() for x in scan.found[:MAX_REPORTED]],
            )
        return counts

    def summary(self, value: str) -> str:
        """Text the server writes itself (a session summary): redacted under every policy but ``allow``
        (nobody asked for it, so there is no caller to refuse)."""
        if not self.active:
            return value
        found = detect(value)
        return redact(value, found) if found else value


def digests_of(texts: Iterable[str]) -> frozenset[str]:
    """The hex digests (md5, sha1, sha256, sha512) of ``texts``, as :meth:`SecretGuard.hashes` looks for them."""
    return frozenset(hashlib.new(name, text.encode("utf-8")).hexdigest() for text in texts if text for name in HASHES)


def _occurrences(text: str, needle: str) -> list[int]:
    out, pos = [], text.find(needle)
    while pos >= 0:
        out.append(pos)
        pos = text.find(needle, pos + len(needle))
    return out


__all__ = ["POLICIES", "Located", "Policy", "Scan", "SecretGuard", "digests_of"]
