"""Per-session hook state, in the data directory: how far the transcript was read, what was injected.

One small JSON file per (tenant, agent, session) under ``<data_dir>/hooks/``, named by a hash
(a session id never becomes a path), mode 0600, replaced atomically (write, fsync, rename), and
read and written under an exclusive ``flock`` so two events of one session never interleave.

It lives in the data directory, not in the graph, because the hook reads it before it knows
whether it will reach the store at all (the shared server may be starting, or down), and because
it is only an optimisation: the offset lets capture skip what it read before, while the rows'
idempotency keys (:mod:`memory_core.harness.capture`) are what guarantees nothing is stored
twice. Losing the file costs one re-read of the transcript, never a duplicate. It holds no
memory content: offsets, keys (derived from the transcript's line ids) and refs.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_DIR = "hooks"
MAX_SENT = 2_000  # keys acknowledged past the saved offset (lines re-read while a tool call is pending)
MAX_INJECTED = 500  # refs injected since the last compaction


@dataclass
class SessionState:
    """What the hook remembers of one session between events."""

    transcript: str | None = None  # the transcript path it reads
    identity: list[int] | None = None  # (device, inode) of that file
    offset: int = 0  # bytes read and stored (every row before it acknowledged)
    sent: list[str] = field(default_factory=list)  # keys acknowledged for lines at or after ``offset``
    project: str | None = None  # the session's project (from its first cwd)
    injected: list[str] = field(default_factory=list)  # refs injected since the last compaction
    injections: int = 0  # blocks injected since the last compaction
    compactions: int = 0
    handoff_key: str | None = None  # the idempotency key of the newest handoff written

    @classmethod
    def from_json(cls, data: Any) -> SessionState:
        """A state read back; unknown or malformed fields fall back to their defaults."""
        state = cls()
        if not isinstance(data, dict):
            return state
        for name, kind in _FIELD_TYPES.items():
            value = data.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                continue
            if isinstance(value, list) and not all(isinstance(x, int | str) and not isinstance(x, bool)
                                                   for x in value):
                continue
            setattr(state, name, value)
        return state

    def remember_sent(self, keys: list[str]) -> None:
        self.sent = keys[-MAX_SENT:]

    def note_injected(self, refs: list[str]) -> None:
        self.injected = [*self.injected, *[r for r in refs if r not in self.injected]][-MAX_INJECTED:]
        self.injections += 1

    def note_compaction(self) -> None:
        """What was injected before a compaction left the context with it."""
        self.compactions += 1
        self.injected = []
        self.injections = 0


_FIELD_TYPES: dict[str, type] = {"transcript": str, "identity": list, "offset": int, "sent": list, "project": str,
                                 "injected": list, "injections": int, "compactions": int, "handoff_key": str}


class StateStore:
    """The states of one data directory's sessions (``<data_dir>/hooks/``)."""

    def __init__(self, data_dir: Path) -> None:
        self.root = Path(data_dir) / STATE_DIR

    def path(self, tenant: str, agent: str, session: str) -> Path:
        digest = hashlib.sha256(json.dumps([tenant, agent, session]).encode()).hexdigest()[:40]
        return self.root / f"{digest}.json"

    @contextlib.contextmanager
    def locked(self, tenant: str, agent: str, session: str) -> Iterator[SessionState]:
        """The session's state, held exclusively until the block ends (saved only by :meth:`save`)."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path(tenant, agent, session)
        fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self._read(path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def save(self, tenant: str, agent: str, session: str, state: SessionState) -> None:
        """Replace the state file atomically (a crash leaves the old one or the new one)."""
        path = self.path(tenant, agent, session)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps(asdict(state), separators=(",", ":")).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    @staticmethod
    def _read(path: Path) -> SessionState:
        try:
            return SessionState.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return SessionState()
