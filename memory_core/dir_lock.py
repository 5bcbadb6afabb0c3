"""Exclusive ownership of a data directory, and a STORE_LOCKED error that names the holder.

Stdlib only (plus the coded errors): a server can claim its data directory in
milliseconds, before the store's heavy modules load (see ``MemoryCore.open(lock=...)``).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import IO, Any

from memory_core.errors import StoreLockedError
from memory_core.store_errors import os_error

LOCK_FILE = "memory-core.lock"


class DirLock:
    """Exclusive ownership of a data directory: a second process is refused at open.

    Two flocks: one on the data directory itself (the one that counts: no ``rm`` inside the
    directory can take it away), and one on ``memory-core.lock``, which holds the owner's pid
    and is the lock older versions take. :meth:`verify` runs before every write: if the lock
    file was removed or replaced, it is recreated and locked again; if another process holds
    the new file, the write is refused with STORE_LOCKED.

    ``announcement`` is the name of the file in the data directory where a running server
    says who it is (JSON with ``pid`` and ``url``; the MCP server writes it). When the
    directory is locked and that file names a live process, STORE_LOCKED names it and how to
    stop it, so an operator is not left guessing which process holds the store.
    """

    def __init__(self, data_dir: Path, *, announcement: str | None = None) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE
        self._announcement = announcement
        self._released = False
        try:
            self._dir_fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise os_error(exc, f"opening the data directory {data_dir}") from exc
        try:
            fcntl.flock(self._dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._fh = self._lock_file()
        except BlockingIOError as exc:
            os.close(self._dir_fd)
            raise self._locked() from exc
        except BaseException:
            os.close(self._dir_fd)
            raise

    def _locked(self) -> StoreLockedError:
        holder = _announced_holder(self.data_dir / self._announcement) if self._announcement else None
        if holder is None:
            return StoreLockedError(
                f"The data directory {self.data_dir} is in use by another process. Run one "
                "`memory-core serve --http` and point every agent at it instead of opening the "
                "directory twice.",
                data_dir=str(self.data_dir),
            )
        pid, url, shared = holder
        if shared:
            who = (f"the shared memory-core server that stdio clients bridge to (pid {pid}, {url}); stop it with "
                   f"`kill {pid}` (a connected client starts it again on its next call), or wait: it stops by "
                   "itself server.shared_idle_s after its last client disconnects")
        else:
            who = f"`memory-core serve --http` (pid {pid}, {url}); stop it with `kill {pid}` or Ctrl-C where it runs"
        return StoreLockedError(f"The data directory {self.data_dir} is held by {who}.",
                                data_dir=str(self.data_dir), holder_pid=pid, holder_url=url)

    def _lock_file(self) -> IO[str]:
        try:
            fh = self.path.open("a+")
        except OSError as exc:
            raise os_error(exc, f"creating the lock file {self.path}") from exc
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fh.fileno(), 0)
            os.write(fh.fileno(), str(os.getpid()).encode())  # unbuffered: close() has nothing left to fail
        except BlockingIOError as exc:
            fh.close()
            raise self._locked() from exc
        except OSError as exc:
            fh.close()
            raise os_error(exc, f"writing the lock file {self.path}") from exc
        return fh

    def verify(self) -> None:
        """Before a write: the lock file is still the one this process locked (else relock it)."""
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            now = None
        held = os.fstat(self._fh.fileno())
        if now is not None and (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev):
            return
        fresh = self._lock_file()  # STORE_LOCKED when another process holds the new file
        self._fh.close()
        self._fh = fresh

    def held(self) -> bool:
        """Whether this process still holds the directory with the lock file it locked (no relock attempted)."""
        if self._released:
            return False
        try:
            now, mine = os.stat(self.path), os.fstat(self._fh.fileno())
        except OSError:
            return False
        return (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev)

    def release(self) -> None:
        """Give the directory up (a second call does nothing)."""
        if self._released:
            return
        self._released = True
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
        fcntl.flock(self._dir_fd, fcntl.LOCK_UN)
        os.close(self._dir_fd)


def claim(data_dir: str | os.PathLike[str], *, announcement: str | None = None) -> DirLock:
    """Take the lock of ``data_dir`` (creating it): STORE_LOCKED when another process holds it."""
    root = Path(data_dir).expanduser().resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, f"creating the data directory {root}") from exc
    return DirLock(root, announcement=announcement)


def _announced_holder(path: Path) -> tuple[int, str, bool] | None:
    """(pid, url, shared) of the live process the announcement names; None without one.

    Only ``pid``, ``url`` and ``shared`` are read: the file also holds the server's secret,
    which never reaches a message.
    """
    try:
        raw: Any = json.loads(path.read_text())
        pid, url, shared = int(raw["pid"]), str(raw["url"]), bool(raw.get("shared"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a stale announcement: its server is gone
    except PermissionError:
        pass
    return pid, url, shared
