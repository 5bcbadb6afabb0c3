"""A throwaway PostgreSQL server for the test suite (``initdb`` + ``pg_ctl``).

:class:`PostgresServer` initialises a cluster in a fresh temporary directory, starts it on a
free loopback port with its unix socket in that directory and trust authentication, and
deletes everything on :meth:`close`. ``initdb`` refuses to run as root, so when the tests run
as root the cluster belongs to ``nobody`` (``runuser -u nobody --``; the directory is handed to
that user). :func:`fresh_database` gives each test its own database, so tests never share rows.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testbed.chroma_server import free_port

HOST = "127.0.0.1"
SUPERUSER = "postgres"
UNPRIVILEGED = "nobody"
START_TIMEOUT_S = 60


def find_binary(name: str) -> str:
    """``initdb``/``pg_ctl`` from PATH, else Debian's versioned directory (newest version first)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0, reverse=True)
    if candidates:
        return candidates[0]
    raise RuntimeError(f"PostgreSQL's `{name}` was not found (PATH, /usr/lib/postgresql/*/bin): run `make install`.")


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", UNPRIVILEGED, "--", *cmd] if os.geteuid() == 0 else cmd


class PostgresServer:
    """One cluster on a temporary directory; can be stopped and started again on the same port."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable  # False: no fsync, asynchronous commit (fast; a crash may lose commits)
        self.root = Path(tempfile.mkdtemp(prefix="mc-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port(HOST)
        if os.geteuid() == 0:
            shutil.chown(self.root, user=UNPRIVILEGED)
        self._run([find_binary("initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                   "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"])

    def _run(self, cmd: list[str]) -> None:
        done = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=START_TIMEOUT_S,
                              check=False, cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(cmd[0]).name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n"
                               f"{self.log_tail()}")

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={HOST} port={self.port} user={SUPERUSER} dbname={dbname} connect_timeout=5"

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses={HOST} -c max_connections=200"
        if not self.durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run([find_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts,
                   "-w", "-t", str(START_TIMEOUT_S), "start"])

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._run([find_binary("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A started server, stopped and deleted on exit."""
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


def fresh_database(admin_dsn: str, template: str = "template1") -> str:
    """CREATE DATABASE from ``template`` (fast: a file copy) and return its DSN."""
    import psycopg
    from psycopg import sql

    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for attempt in range(50):  # the template is busy while another CREATE DATABASE copies it
            try:
                conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)))
                break
            except psycopg.errors.ObjectInUse:
                if attempt == 49:
                    raise
                time.sleep(0.1)
    return with_dbname(admin_dsn, name)


def with_dbname(dsn: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**{k: str(v) for k, v in params.items()})
