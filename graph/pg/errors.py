"""psycopg errors → :class:`graph.api.GraphStoreError`, by SQLSTATE (never by message text), and the
retry policy for the transient ones.

=================================  ===============  =========
SQLSTATE                           kind             retried
=================================  ===============  =========
08xxx connection exception         unavailable      yes
57P01/57P02/57P03 shutdown/start   unavailable      yes
no SQLSTATE (connect failed),
pool timeout                       unavailable      yes
pool closed (store closed)         unavailable      no
28xxx auth, 3D000 no such database unavailable      no
40001 serialization failure        conflict         yes
40P01 deadlock detected            busy             yes
55P03 lock not available, 57014    busy             no
53100 disk full                    full             no
53xxx other resources              busy             no
25006 read-only transaction        read_only        no
23xxx integrity (23505 unique)     conflict         no
42xxx, 0A000                       schema           no
XX001/XX002 data/index corrupted   corrupt          no
58xxx system/io                    io               no
anything else                      io               no
=================================  ===============  =========
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import psycopg
import psycopg_pool
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from graph.api import ErrorKind, GraphStoreError

T = TypeVar("T")

_RETRIED_STATES = {"40001", "40P01", "57P01", "57P02", "57P03"}


def kind_of(exc: BaseException) -> ErrorKind:
    """The GraphStoreError kind for a psycopg or pool error."""
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg_pool.PoolClosed):
        return "unavailable"
    state = getattr(exc, "sqlstate", None)
    if state is None:
        # no SQLSTATE: the client never got an answer (connect refused, connection lost)
        return "unavailable" if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) else "io"
    if state.startswith("08") or state in ("57P01", "57P02", "57P03", "3D000") or state.startswith("28"):
        return "unavailable"
    if state == "40001" or state.startswith("23"):
        return "conflict"
    if state in ("40P01", "55P03", "57014"):
        return "busy"
    if state == "53100":
        return "full"
    if state.startswith("53"):
        return "busy"
    if state == "25006":
        return "read_only"
    if state.startswith("42") or state == "0A000":
        return "schema"
    if state in ("XX001", "XX002"):
        return "corrupt"
    return "io"


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: the connection went away, or the server asked for a retry."""
    if isinstance(exc, GraphStoreError):
        exc = exc.cause if exc.cause is not None else exc
        if isinstance(exc, GraphStoreError):
            return False
    if isinstance(exc, psycopg_pool.PoolClosed):  # this store was closed: nothing will come back
        return False
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is None:
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith("08") or state in _RETRIED_STATES


def wrap(exc: BaseException, what: str) -> GraphStoreError:
    state = getattr(exc, "sqlstate", None)
    return GraphStoreError(kind_of(exc), f"PostgreSQL {what} failed (SQLSTATE {state or 'none'}, "
                                         f"{type(exc).__name__})", exc)


def retrying(fn: Callable[[], T], what: str, total_s: float) -> T:
    """Run ``fn``, retrying transient failures for up to ``total_s`` seconds in all; every failure
    leaves as a GraphStoreError."""
    retry = Retrying(
        retry=retry_if_exception(is_transient), stop=stop_after_delay(total_s),
        wait=wait_exponential(multiplier=0.05, max=1.0), reraise=True,
    )
    try:
        return retry(fn)
    except (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed) as exc:
        raise wrap(exc, what) from exc
