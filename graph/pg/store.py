"""PostgresGraphStore: :class:`graph.api.GraphStore` over PostgreSQL, for N stateless replicas.

``PostgresGraphStore(dsn, owner=..., lease_s=30, pool_size=8)`` parses the DSN (a bad one is a
:class:`InvalidDSNError`, a ValueError), opens a psycopg pool, runs the migrations and starts
the *heartbeat* thread, which renews this owner's journal leases every ``lease_s / 3`` seconds
until :meth:`close`. :meth:`journal` lists what this replica may act on: its own entries and
those whose owner's lease has expired (that replica is gone); :meth:`claim_journal` takes such
entries over atomically before recovery acts on them. ``succeeds`` (an owner suffix) names the
processes this one replaced: a process that holds a data directory's lock (PostgreSQL with
embedded Chroma) knows the last holder is gone, so entries written under that directory's
suffix are its own at once, whatever their lease says.

Reads retry transient failures (connection lost, server restarting) for up to ``retry_s``
seconds; :meth:`run` does the same for a whole write transaction. :meth:`transaction` retries
only getting a connection: a body that already ran is never replayed behind the caller's back.

Reads: every query takes the tenant, so a foreign id reads exactly like a missing one. Counts come
from the counter tables (O(1) or O(values), see :mod:`graph.pg.counts`); order reads are index seeks
on (tenant, session, ts_us, id). Semantics follow :mod:`graph.sqlite.store` method by method.

The node cache never answers from a stale tenant. The store keeps what a recall reads again and
again (memory nodes, contents, session neighbours, superseders, a session's bounds, the tenant's
non-turn count) in one LRU of ``cache_nodes`` entries, each labelled with the tenant's change
counter (``tenant_state.version``, moved by every write transaction that touches the tenant, on any
replica). Before it answers, a cached read asks the database for that counter:

- every value wanted is cached under the current version: one tiny query, no rows decoded;
- otherwise the counter and the rows travel in one pipelined round trip (the version first, so
  the rows are at least as new as their label: a write landing in between only makes the next
  read refresh), and the entries are stored under that version.

So an add through replica A is visible through replica B's next read (read-your-writes across
replicas); only a change made behind the store's back (raw SQL that does not move the version)
could be missed, as by every other versioned cache of the store (subgraphs, agent names).

Inside :meth:`PostgresGraphStore.consistent_reads` (one request: a recall) the thread checks a
tenant's version once and its later reads reuse it, so a recall's cached reads cost no round trip at
all: what was committed before the request began is still visible (the check runs after it began),
and a write through this store inside the block (the thread's own) ends the reuse.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import Connection, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from graph.agent_names import AgentNameIndex
from graph.api import (
    AGENT,
    SUPERSEDES,
    EdgeRef,
    EntityNode,
    EntityRecord,
    EntityRelation,
    EpisodeNode,
    GraphStore,
    GraphStoreError,
    GraphTxn,
    JournalEntry,
    Key,
    LexicalHit,
    MemoryNode,
    RowFilter,
    SessionStats,
    entity_node,
    entity_norm,
)
from graph.entity_values import display_names, name_keys, resolve_key, unique_aliases
from graph.node_cache import LRU
from graph.pg import lexical
from graph.pg.counts import SEP
from graph.pg.entities import KEPT, KEYS_SQL, SEEN, VISIBLE, held_keys, id_list, viewer_key
from graph.pg.errors import retrying, wrap
from graph.pg.lexical_sample import SampledCounts
from graph.pg.migrations import migrate
from graph.pg.rows import EPISODE_SELECT, NODE_SELECT, check_field, episode_node, like_prefix, memory_node, scalar
from graph.pg.txn import PgTxn
from graph.traversal import neighbourhood

PAGE = 256  # iter_newest's page size
ORDER_INDEX = {  # (session given, turns only) -> the WHERE prefix
    (True, False): "tenant = %s AND session = %s", (True, True): "tenant = %s AND session = %s AND type = 'turn'",
    (False, False): "tenant = %s", (False, True): "tenant = %s AND type = 'turn'",
}


def owner_sql(node: str) -> str:
    """A SQL expression: the tenant owning the node whose id is the column ``node`` (a memory,
    an episode or a row of ``nodes``), NULL when it does not exist."""
    return (f"(CASE WHEN {node} ~ '^mem:[0-9]{{1,18}}$' THEN (SELECT tenant FROM memories WHERE id = "
            f"substr({node}, 5)::bigint) WHEN {node} ~ '^ep:[0-9]{{1,18}}$' THEN (SELECT tenant FROM episodes "
            f"WHERE id = substr({node}, 4)::bigint) WHEN {node} ~ '^ent:[0-9]{{1,18}}$' THEN (SELECT tenant FROM "
            f"entities "
            f"WHERE id = substr({node}, 5)::bigint) ELSE (SELECT tenant FROM nodes WHERE node_id = {node}) END)")


VERSION_SQL = "SELECT version FROM tenant_state WHERE tenant = %s"
ABSENT = object()  # a cached "no such row in this tenant"
# each memory's neighbours in its session by (ts_us, id): (id, previous ts/id, next ts/id)
ADJACENT_SQL = (
    "SELECT m.id, p.ts_us, p.id, n.ts_us, n.id FROM memories m "
    "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories x WHERE x.tenant = m.tenant AND x.session = m.session "
    "AND (x.ts_us, x.id) < (m.ts_us, m.id) ORDER BY x.ts_us DESC, x.id DESC LIMIT 1) p ON true "
    "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories x WHERE x.tenant = m.tenant AND x.session = m.session "
    "AND (x.ts_us, x.id) > (m.ts_us, m.id) ORDER BY x.ts_us, x.id LIMIT 1) n ON true "
    "WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s")


def _node(row: tuple[Any, ...]) -> MemoryNode:
    from graph.pg.rows import memory_node

    return memory_node(row[1:])


def _adjacent(row: tuple[Any, ...]) -> tuple[Key | None, Key | None]:
    return (None if row[1] is None else (int(row[1]), int(row[2])),
            None if row[3] is None else (int(row[3]), int(row[4])))


CONVERT: dict[str, Callable[[tuple[Any, ...]], Any]] = {
    "node": _node,
    "content": lambda r: str(r[1]),
    "adjacent": _adjacent,
}

if TYPE_CHECKING:
    import networkx as nx

T = TypeVar("T")


class InvalidDSNError(ValueError):
    """``storage.postgres_dsn`` does not parse (the message never repeats the DSN: it may hold a password)."""


@dataclass(frozen=True, slots=True)
class LeasedJournalEntry(JournalEntry):
    """A journal entry with the replica that owns it (wrote it, or took it over)."""

    owner: str = ""


def parse_dsn(dsn: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise InvalidDSNError("storage.postgres_dsn is not a valid PostgreSQL connection string") from exc


class PostgresGraphStore:
    """The durable graph on PostgreSQL (see the module docstring); ``owner`` names this replica
    in the journal and must be unique among live replicas (e.g. ``host:pid:uuid4``)."""

    def __init__(self, dsn: str, *, owner: str, lease_s: float = 30.0, pool_size: int = 8,
                 retry_s: float = 5.0, connect_timeout_s: float = 5.0, cache_entries: int = 256,
                 succeeds: str | None = None, cache_nodes: int = 50_000) -> None:
        params = parse_dsn(dsn)
        params.setdefault("connect_timeout", str(max(1, int(connect_timeout_s))))
        if not owner:
            raise ValueError("owner must name this replica (e.g. host:pid:uuid)")
        if succeeds is not None and (not succeeds or not owner.endswith(succeeds)):
            raise ValueError("succeeds must be a non-empty suffix of owner (the locked directory's scope)")
        self.owner, self.lease_s, self.retry_s = owner, float(lease_s), float(retry_s)
        self.succeeds = succeeds
        self.pool = ConnectionPool(kwargs={**params, "autocommit": True}, min_size=1, max_size=max(1, pool_size),
                                   timeout=retry_s, open=False, name=f"memcore-{owner}")
        try:
            self.pool.open(wait=True, timeout=max(retry_s, 1.0))
            self._with_conn(migrate, "migration", retry=False)
        except psycopg.Error as exc:
            self.pool.close()
            raise wrap(exc, "open") from exc
        except BaseException:
            self.pool.close()
            raise
        self._agent_cache: dict[str, tuple[int, AgentNameIndex]] = {}
        self._cache: LRU[tuple[str, str, Hashable], tuple[int, Any]] = LRU(cache_nodes)
        self._scope = threading.local()  # .depth, .versions: this thread's request (consistent_reads)
        self.cache_entries = max(0, cache_entries)
        self.prune_min_rows = lexical.COMMON_MIN_ROWS  # tenants above it drop very common query words
        self._sampled = SampledCounts()  # tenants of 4x its sample_rows estimate common query words
        self._cache_lock = threading.Lock()
        self._hoods: OrderedDict[tuple[str, str, int, int, int, int], tuple[int, nx.MultiDiGraph]] = OrderedDict()
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name=f"memcore-lease-{owner}", daemon=True)
        self._heartbeat.start()

    # ---- connections ----------------------------------------------------------------------------
    def _with_conn(self, fn: Callable[[psycopg.Connection[Any]], T], what: str, *, retry: bool = True) -> T:
        def attempt() -> T:
            with self.pool.connection() as conn:
                return fn(conn)

        if not retry:
            try:
                return attempt()
            except psycopg.Error as exc:
                raise wrap(exc, what) from exc
        return retrying(attempt, what, self.retry_s)

    def read_with(self, fn: Callable[[psycopg.Connection[Any]], T], what: str) -> T:
        """``fn`` on a pooled connection (autocommit; open a transaction for one snapshot), retried
        on transient failures; every failure leaves as a GraphStoreError naming ``what``."""
        return self._with_conn(fn, what)

    @contextmanager
    def transaction(self) -> Iterator[PgTxn]:
        """One write transaction: all of it commits or none of it does. Failures leave as
        GraphStoreError; only getting a live connection is retried (see :meth:`run`)."""
        conn = retrying(self._live_connection, "connect", self.retry_s)
        try:
            # pipeline mode: statements whose results nobody reads (locks, nodes, edges, counters)
            # travel with the next one that is read, so an add costs one round trip, not three
            with conn.pipeline(), conn.transaction():
                tx = PgTxn(conn, self.owner, self.lease_s)
                yield tx
                tx.finish()
        except psycopg.Error as exc:
            raise wrap(exc, "write") from exc
        finally:
            self.pool.putconn(conn)
            self.wrote()

    def _live_connection(self) -> psycopg.Connection[Any]:
        """A pooled connection that answered an empty query: one the server dropped (a restart,
        an idle timeout) is discarded and another tried before any of the body runs."""
        conn = self.pool.getconn()
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            self.pool.putconn(conn)  # broken: the pool discards it
            raise
        return conn

    def run(self, body: Callable[[PgTxn], T]) -> T:
        """``body`` in a transaction, run again (for up to ``retry_s``) when it failed transiently
        (connection lost, deadlock, serialization failure) before committing."""
        def attempt() -> T:
            with self.transaction() as tx:
                return body(tx)
        return retrying(attempt, "write", self.retry_s)

    # ---- lease and journal ----------------------------------------------------------------------
    def heartbeat(self) -> int:
        """Renew the leases of this owner's journal entries; called by the store's own thread every
        ``lease_s / 3`` s (callers need not). Returns how many entries were renewed."""
        def renew(conn: psycopg.Connection[Any]) -> int:
            cur = conn.execute("UPDATE journal SET lease_until = clock_timestamp() + make_interval(secs => %s) "
                               "WHERE owner = %s", [self.lease_s, self.owner])
            return cur.rowcount
        return self._with_conn(renew, "heartbeat")

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self.heartbeat()
            except GraphStoreError:  # the next beat tries again; an expired lease only lets others recover
                continue

    def _actionable(self) -> tuple[str, list[Any]]:
        """The SQL condition (and its parameters) for entries this store may act on: its own,
        those whose lease expired, and those of the processes it succeeds (see ``succeeds``)."""
        if self.succeeds is None:
            return "(owner = %s OR lease_until < clock_timestamp())", [self.owner]
        return ("(owner = %s OR lease_until < clock_timestamp() OR right(owner, char_length(%s)) = %s)",
                [self.owner, self.succeeds, self.succeeds])

    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        """Entries this replica may act on: its own, those of owners whose lease expired, and
        those of the processes it succeeds."""
        condition, params = self._actionable()

        def read(conn: psycopg.Connection[Any]) -> list[JournalEntry]:
            rows = conn.execute(
                f"SELECT seq, op, tenant, item_id, created_us, owner FROM journal WHERE {condition} "
                "ORDER BY seq LIMIT %s",
                [*params, limit]).fetchall()
            return [LeasedJournalEntry(int(r[0]), r[1], r[2], r[3], int(r[4]), r[5]) for r in rows]
        return self._with_conn(read, "journal read")

    def claim_journal(self, seqs: Iterable[int]) -> list[int]:
        """Take over entries before recovering them: each of ``seqs`` that is this replica's or whose
        lease expired (or whose owner this store succeeds) becomes this replica's, leased anew, in
        one statement, so two replicas recovering at once never both act on one entry. Returns the
        seqs claimed."""
        condition, params = self._actionable()

        def claim(conn: psycopg.Connection[Any]) -> list[int]:
            rows = conn.execute(
                "UPDATE journal SET owner = %s, lease_until = clock_timestamp() + make_interval(secs => %s) "
                f"WHERE seq = ANY(%s::bigint[]) AND {condition} RETURNING seq",
                [self.owner, self.lease_s, list(seqs), *params]).fetchall()
            return sorted(int(r[0]) for r in rows)
        return self._with_conn(claim, "journal claim")

    def journal_size(self) -> int:
        """Every pending entry, whoever owns it (doctor's figure)."""
        return self._with_conn(lambda c: int(scalar(c.execute("SELECT count(*) FROM journal"))), "journal read")

    def meta(self, key: str) -> str | None:
        row = self._with_conn(lambda c: c.execute("SELECT value FROM meta WHERE key = %s", [key]).fetchone(),
                              "meta read")
        return None if row is None else str(row[0])

    # ---- lexical --------------------------------------------------------------------------------
    def lexical_window(self, f: RowFilter, terms: Sequence[str], limit: int, *,
                       own: bool = False) -> list[LexicalHit]:
        return self._with_conn(lambda conn: self._window(conn, f, terms, limit, own), "lexical search")

    def lexical_windows(self, f: RowFilter, terms: Sequence[str], limit: int) -> tuple[list[LexicalHit],
                                                                                       list[LexicalHit]]:
        return self._with_conn(lambda conn: (self._window(conn, f, terms, limit, False),
                                             self._window(conn, f, terms, limit, True)), "lexical search")

    def _window(self, conn: psycopg.Connection[Any], f: RowFilter, terms: Sequence[str], limit: int,
                own: bool) -> list[LexicalHit]:
        state = conn.execute("SELECT memories, lex_len_sum, changes FROM tenant_state WHERE tenant = %s",
                             [f.tenant]).fetchone()
        rows, len_sum, changes = (int(state[0]), int(state[1]), int(state[2])) if state else (0, 0, 0)
        return lexical.window(conn, f, list(terms), limit, own=own, rows=rows, len_sum=len_sum,
                              min_rows=self.prune_min_rows, sampled=self._sampled, changes=changes)

    @property
    def lexical_sample_rows(self) -> int:
        """A tenant of 4x as many rows estimates a common query word's count from this many newest rows."""
        return self._sampled.sample_rows

    @lexical_sample_rows.setter
    def lexical_sample_rows(self, rows: int) -> None:
        self._sampled.sample_rows = rows

    def lexical_phrases(self, f: RowFilter, phrases: Sequence[str], limit: int) -> list[LexicalHit]:
        return self._with_conn(lambda c: lexical.phrases(c, f, list(phrases), limit), "lexical search")

    # ---- graph ----------------------------------------------------------------------------------
    def neighbourhood(self, tenant: str, node: str, depth: int, max_nodes: int, hub_degree: int,
                      children: int = 8) -> nx.MultiDiGraph:
        """The k-hop subgraph of :func:`graph.traversal.neighbourhood` (the rules every backend
        shares), frozen (callers share it), kept in an LRU of ``cache_entries`` subgraphs and
        rebuilt when the tenant's version moved (this or another replica wrote). The version is
        read before the walk: a write during it leaves an entry that the next read finds stale."""
        import networkx as nx

        key = (tenant, node, depth, max_nodes, hub_degree, children)
        version = self.version(tenant)
        with self._cache_lock:
            hit = self._hoods.get(key)
            if hit is not None and hit[0] == version:
                self._hoods.move_to_end(key)
                return hit[1]
        g = nx.freeze(neighbourhood(self, tenant, node, depth, max_nodes, hub_degree, children))
        with self._cache_lock:
            self._hoods[key] = (version, g)
            while len(self._hoods) > self.cache_entries:
                self._hoods.popitem(last=False)
        return g

    # ---- lifecycle ------------------------------------------------------------------------------
    def invalidate(self) -> None:
        """Drop the caches (agent names, subgraphs, nodes, lexical estimates); all also follow the tenant's
        version (the estimates its change clock)."""
        with self._cache_lock:
            self._agent_cache.clear()
            self._hoods.clear()
            self._cache.clear()
        self._sampled.forget()

    def close(self) -> None:
        """Stop the heartbeat and close the pool (idempotent)."""
        self._stop.set()
        if self._heartbeat.is_alive() and threading.current_thread() is not self._heartbeat:
            self._heartbeat.join(timeout=self.retry_s + 5)
        self.pool.close()

    def __enter__(self) -> PostgresGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, fn: Callable[[psycopg.Connection[Any]], T], what: str = "read") -> T:
        return self._with_conn(fn, what)

    # ---- the node cache (see the module docstring) ---------------------------------------------
    # ---- the request scope --------------------------------------------------------------------
    @contextmanager
    def consistent_reads(self, tenant: str) -> Iterator[None]:
        """See the module docstring; blocks nest (the outermost one's checks are shared)."""
        depth = getattr(self._scope, "depth", 0)
        if depth == 0:
            self._scope.versions = {}
        self._scope.depth = depth + 1
        try:
            yield
        finally:
            self._scope.depth = depth
            if depth == 0:
                self._scope.versions = {}

    def _scoped_versions(self) -> dict[str, int] | None:
        return self._scope.versions if getattr(self._scope, "depth", 0) else None

    def wrote(self) -> None:
        """This thread committed a write: its request's shared version checks are over."""
        if getattr(self._scope, "depth", 0):
            self._scope.versions = {}

    def _seen(self, tenant: str, version: int) -> None:
        scoped = self._scoped_versions()
        if scoped is not None:
            scoped[tenant] = max(version, scoped.get(tenant, version))

    # ---- the mechanism ------------------------------------------------------------------------
    def version(self, tenant: str) -> int:
        return self._current(tenant)

    def _current(self, tenant: str) -> int:
        scoped = self._scoped_versions()
        if scoped is not None and tenant in scoped:
            return scoped[tenant]
        rows = self._q(VERSION_SQL, [tenant], "version read")
        version = int(rows[0][0]) if rows else 0
        self._seen(tenant, version)
        return version

    def _lookup(self, tenant: str, kind: str, keys: list[Hashable]) -> tuple[int, dict[Hashable, Any]] | None:
        """The cached values of ``keys`` when all share one version label, else None."""
        found: dict[Hashable, Any] = {}
        label: int | None = None
        for key in keys:
            entry = self._cache.get((tenant, kind, key))
            if entry is None or (label is not None and entry[0] != label):
                return None
            label = entry[0]
            found[key] = entry[1]
        return None if label is None else (label, found)

    def _versioned(self, tenant: str, kind: str, keys: list[Hashable],
                   fetch: Callable[[Connection[Any]], dict[Hashable, Any]]) -> dict[Hashable, Any]:
        """``keys``' values (``ABSENT`` for a missing one), cached or fetched with ``fetch``."""
        if self._cache.capacity == 0:
            return self._read(fetch, "read")
        cached = self._lookup(tenant, kind, keys)
        if cached is not None and self._current(tenant) == cached[0]:
            return cached[1]

        def both(conn: Connection[Any]) -> tuple[int, dict[Hashable, Any]]:
            with conn.pipeline():
                version = conn.execute(VERSION_SQL, [tenant])
                values = fetch(conn)
                row = version.fetchone()
            return (int(row[0]) if row else 0), values

        version, values = self._read(both, "read")
        self._seen(tenant, version)
        out = {key: values.get(key, ABSENT) for key in keys}
        for key, value in out.items():
            self._cache.put((tenant, kind, key), (version, value))
        return out

    def _ids(self, tenant: str, kind: str, ids: Iterable[int], query: str) -> dict[int, Any]:
        """Per-id values: ``query`` takes (ids, tenant) and returns (id, *value columns) rows."""
        wanted: list[Hashable] = list(dict.fromkeys(int(i) for i in ids))
        if not wanted:
            return {}
        convert = CONVERT[kind]

        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            return {int(r[0]): convert(r) for r in conn.execute(query, [wanted, tenant]).fetchall()}

        values = self._versioned(tenant, kind, wanted, fetch)
        return {int(k): v for k, v in values.items() if v is not ABSENT}  # type: ignore[call-overload]

    # ---- the cached reads ---------------------------------------------------------------------
    def memory(self, tenant: str, mem_id: int) -> MemoryNode | None:
        return self.memories(tenant, [mem_id]).get(mem_id)

    def memories(self, tenant: str, ids: Iterable[int]) -> dict[int, MemoryNode]:
        from graph.pg.rows import NODE_SELECT

        return self._ids(tenant, "node", ids,
                         f"SELECT m.id, {NODE_SELECT} FROM memories m WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s")

    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]:
        return self._ids(tenant, "content", ids,
                         "SELECT id, content FROM memories WHERE id = ANY(%s::bigint[]) AND tenant = %s")

    def adjacent_many(self, tenant: str, nodes: Iterable[MemoryNode]) -> dict[int, tuple[Key | None, Key | None]]:
        return self._ids(tenant, "adjacent", [n.id for n in nodes if n.tenant == tenant], ADJACENT_SQL)

    def non_turn_count(self, tenant: str) -> int:
        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            row = conn.execute("SELECT non_turn FROM tenant_state WHERE tenant = %s", [tenant]).fetchone()
            return {"": int(row[0]) if row else 0}

        return int(self._versioned(tenant, "non_turn", [""], fetch)[""])

    def bounds(self, tenant: str, session: str | None) -> tuple[Key, Key] | None:
        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            where, args = ("tenant = %s", [tenant]) if session is None else (
                "tenant = %s AND session = %s", [tenant, session])
            cursors = [conn.execute(f"SELECT ts_us, id FROM memories WHERE {where} ORDER BY ts_us{o}, id{o} LIMIT 1",
                                    args) for o in ("", " DESC")]
            ends = [cur.fetchone() for cur in cursors]
            if ends[0] is None or ends[1] is None:
                return {session: None}
            return {session: ((int(ends[0][0]), int(ends[0][1])), (int(ends[1][0]), int(ends[1][1])))}

        value = self._versioned(tenant, "bounds", [session], fetch)[session]
        return None if value is ABSENT else value

    # ---- reads ------------------------------------------------------------------------------
    def _q(self, query: str | sql.SQL | sql.Composed, args: list[Any], what: str = "read") -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._read(lambda c: c.execute(query, args).fetchall(), what)
        return rows

    def episode(self, tenant: str, ep_id: int) -> EpisodeNode | None:
        rows = self._q(f"SELECT {EPISODE_SELECT} FROM episodes WHERE id = %s AND tenant = %s", [ep_id, tenant])
        return episode_node(rows[0]) if rows else None

    def session_episode(self, tenant: str, session: str) -> EpisodeNode | None:
        rows = self._q(f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = %s AND session = %s",
                       [tenant, session])
        return episode_node(rows[0]) if rows else None

    def episodes(self, tenant: str) -> list[EpisodeNode]:
        return [episode_node(r) for r in self._q(
            f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = %s ORDER BY id", [tenant])]

    def by_idempotency_key(self, tenant: str, key: str) -> MemoryNode | None:
        rows = self._q(f"SELECT {NODE_SELECT} FROM memories m WHERE m.tenant = %s AND m.idempotency_key = %s",
                       [tenant, key])
        return memory_node(rows[0]) if rows else None

    def memory_ids(self, tenant: str) -> list[int]:
        return [k[1] for k in self.iter_newest(tenant, None)]

    # ---- order --------------------------------------------------------------------------------
    def page(self, tenant: str, session: str | None, before: Key | None, limit: int, *,
             turns_only: bool = False) -> list[Key]:
        where = ORDER_INDEX[(session is not None, turns_only)]
        args: list[Any] = [tenant] if session is None else [tenant, session]
        if before is not None:
            where += " AND (ts_us, id) < (%s, %s)"
            args += list(before)
        rows = self._q(f"SELECT ts_us, id FROM memories WHERE {where} ORDER BY ts_us DESC, id DESC LIMIT %s",
                       [*args, max(0, limit)])
        return [(int(t), int(i)) for t, i in rows]

    def iter_newest(self, tenant: str, session: str | None, before: Key | None = None, *,
                    turns_only: bool = False) -> Iterator[Key]:
        while True:
            keys = self.page(tenant, session, before, PAGE, turns_only=turns_only)
            yield from keys
            if len(keys) < PAGE:
                return
            before = keys[-1]

    def adjacent(self, tenant: str, session: str, key: Key, *, forward: bool, turns_only: bool = False) -> Key | None:
        where = ORDER_INDEX[(True, turns_only)]
        op, order = (">", "") if forward else ("<", " DESC")
        rows = self._q(f"SELECT ts_us, id FROM memories WHERE {where} AND (ts_us, id) {op} (%s, %s) "
                       f"ORDER BY ts_us{order}, id{order} LIMIT 1", [tenant, session, *key])
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def count(self, tenant: str, session: str | None = None, *, turns_only: bool = False) -> int:
        if session is None:
            rows = self._q("SELECT memories, memories - non_turn FROM tenant_state WHERE tenant = %s", [tenant])
        else:
            rows = self._q("SELECT memories, turns FROM session_counts WHERE tenant = %s AND session = %s",
                           [tenant, session])
        return int(rows[0][1 if turns_only else 0]) if rows else 0

    def _scoped(self, tenant: str, scope: str, key: str) -> int:
        rows = self._q("SELECT n FROM counts WHERE tenant = %s AND scope = %s AND key = %s", [tenant, scope, key])
        return int(rows[0][0]) if rows else 0

    def counts_by_day(self, tenant: str, first_day: int, days: int) -> list[int]:
        rows = self._q("SELECT key, n FROM counts WHERE tenant = %s AND scope = 'day' AND key >= %s AND key < %s",
                       [tenant, f"{first_day:08d}", f"{first_day + days:08d}"])
        found = {int(k): int(n) for k, n in rows}
        return [found.get(first_day + i, 0) for i in range(days)]

    def sessions(self, tenant: str) -> list[SessionStats]:
        rows = self._q(
            "SELECT s.session, s.memories, s.turns, f.ts_us, f.id, l.ts_us, l.id FROM session_counts s "
            "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories m WHERE m.tenant = s.tenant AND m.session = s.session "
            "ORDER BY ts_us, id LIMIT 1) f ON true "
            "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories m WHERE m.tenant = s.tenant AND m.session = s.session "
            "ORDER BY ts_us DESC, id DESC LIMIT 1) l ON true "
            "WHERE s.tenant = %s AND s.memories > 0 ORDER BY s.session", [tenant])
        return [SessionStats(str(r[0]), int(r[1]), int(r[2]), None if r[3] is None else (int(r[3]), int(r[4])),
                             None if r[5] is None else (int(r[5]), int(r[6]))) for r in rows]

    def hidden_count(self, tenant: str, session: str, viewer: str | None) -> int:
        rows = self._q("SELECT coalesce(sum(rows), 0) FROM private_counts WHERE tenant = %s AND session = %s "
                       "AND agent IS DISTINCT FROM %s", [tenant, session, viewer])
        return int(rows[0][0])

    # ---- fields -------------------------------------------------------------------------------
    def field_ids(self, tenant: str, field: str, value: str, limit: int | None) -> list[int]:
        q = sql.SQL("SELECT id FROM memories WHERE tenant = %s AND {} = %s ORDER BY ts_us DESC, id DESC LIMIT %s")
        return [int(r[0]) for r in self._q(q.format(check_field(field)), [tenant, value, limit])]

    def field_count(self, tenant: str, field: str, value: str) -> int:
        check_field(field)
        return self._scoped(tenant, field, value)

    def field_counts(self, tenant: str, field: str) -> dict[str, int]:
        check_field(field)
        rows = self._q('SELECT key, n FROM counts WHERE tenant = %s AND scope = %s AND n > 0 ORDER BY key COLLATE "C"',
                       [tenant, field])
        return {str(k): int(n) for k, n in rows}

    def private_count(self, tenant: str) -> int:
        rows = self._q("SELECT coalesce(sum(rows), 0) FROM private_counts WHERE tenant = %s", [tenant])
        return int(rows[0][0])

    def source_prefix_ids(self, tenant: str, prefix: str, limit: int | None) -> list[int]:
        """(source_id, id) order, code point by code point as SQLite compares (COLLATE "C")."""
        rows = self._q('SELECT id FROM memories WHERE tenant = %s AND source_id LIKE %s '
                       'ORDER BY source_id COLLATE "C", id LIMIT %s', [tenant, like_prefix(prefix), limit])
        return [int(r[0]) for r in rows]

    def source_prefix_count(self, tenant: str, prefix: str) -> int:
        rows = self._q("SELECT count(*) FROM memories WHERE tenant = %s AND source_id LIKE %s",
                       [tenant, like_prefix(prefix)])
        return int(rows[0][0])

    def sessions_in_channel(self, tenant: str, channel: str) -> set[str]:
        rows = self._q("SELECT key FROM counts WHERE tenant = %s AND scope = 'schan' AND starts_with(key, %s) "
                       "AND n > 0", [tenant, channel + SEP])
        return {str(r[0]).split(SEP, 1)[1] for r in rows}

    def session_has_channel(self, tenant: str, session: str, channel: str) -> bool:
        return self._scoped(tenant, "schan", f"{channel}{SEP}{session}") > 0

    # ---- edges --------------------------------------------------------------------------------
    def edges_of(self, tenant: str, node: str) -> list[EdgeRef]:
        """The node's edges whose both ends are the tenant's (as SQLite: an edge to a foreign or
        missing node is left out; a foreign node has no edges)."""
        rows = self._q(f"SELECT e.dir, e.kind, e.other FROM (SELECT %s::text AS n, %s::text AS t) me, LATERAL "
                       f"(SELECT 'out' AS dir, kind, dst AS other FROM edges WHERE src = me.n AND tenant = me.t "
                       f"UNION ALL SELECT 'in', kind, src FROM edges WHERE dst = me.n AND tenant = me.t) e "
                       f"WHERE {owner_sql('me.n')} = me.t AND {owner_sql('e.other')} = me.t", [node, tenant])
        return [EdgeRef(r[0], str(r[1]), str(r[2])) for r in rows]

    def superseders(self, tenant: str, ids: Iterable[int]) -> dict[int, list[int]]:
        wanted = [f"mem:{i}" for i in ids]
        out: dict[int, list[int]] = {}
        for src, dst in self._q("SELECT src, dst FROM edges WHERE dst = ANY(%s) AND kind = %s AND tenant = %s "
                                "ORDER BY src", [wanted, SUPERSEDES, tenant]):
            if str(src).startswith("mem:"):
                out.setdefault(int(str(dst)[4:]), []).append(int(str(src)[4:]))
        return out

    # ---- tenants and agents -------------------------------------------------------------------
    def tenants(self) -> list[str]:
        return [str(r[0]) for r in self._q("SELECT tenant FROM tenant_state WHERE memories > 0 ORDER BY tenant", [])]

    def agents(self, tenant: str) -> frozenset[str]:
        rows = self._q("SELECT attrs FROM nodes WHERE tenant = %s AND kind = %s", [tenant, AGENT])
        return frozenset(str(json.loads(r[0])["agent"]) for r in rows)

    def agent_names(self, tenant: str) -> AgentNameIndex:
        """The tenant's agent-name index, rebuilt when the tenant's version moved."""
        version = self.version(tenant)
        cached = self._agent_cache.get(tenant)
        if cached is not None and cached[0] == version:
            return cached[1]
        index = AgentNameIndex()
        for name in sorted(self.agents(tenant)):
            index.add(name)
        self._agent_cache[tenant] = (version, index)
        return index

    # ---- entities (viewer: an agent sees shared mentions and its own private ones) -----------------
    def _aliases(self, ids: Sequence[int], viewer: str | None, *, everyone: bool = False) -> dict[int, tuple[str, ...]]:
        out: dict[int, list[str]] = {}
        seen, extra = ("", []) if everyone else (f" AND {SEEN}", [viewer_key(viewer)])
        for entity_id, alias in self._q(f"SELECT a.entity_id, a.alias FROM entity_aliases a WHERE a.entity_id = "
                                        f"ANY(%s::bigint[]){seen} ORDER BY a.entity_id, a.pos", [list(ids), *extra]):
            out.setdefault(int(entity_id), []).append(str(alias))
        return {k: unique_aliases(v) for k, v in out.items()}

    def _nodes(self, tenant: str, rows: list[tuple[Any, ...]], viewer: str | None) -> list[EntityNode]:
        aliases = self._aliases([int(r[0]) for r in rows], viewer)
        return [entity_node(int(i), tenant, kind, aliases.get(int(i), ()), int(created), int(n))
                for i, _name, kind, created, n in rows]

    def entity(self, tenant: str, entity_id: int, viewer: str | None) -> EntityNode | None:
        rows = self._q(f"SELECT e.id, e.name, e.kind, e.created_us, {KEPT.format(t='e.tenant', e='e.id')} "
                       f"FROM entities e WHERE e.id = %s AND e.tenant = %s", [viewer_key(viewer), entity_id, tenant])
        rows = [r for r in rows if int(r[4]) > 0]
        return self._nodes(tenant, rows, viewer)[0] if rows else None

    def entity_names(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> dict[int, str]:
        seen = [int(r[0]) for r in self._q(
            f"SELECT e.id FROM entities e WHERE e.tenant = %s AND e.id = ANY(%s::bigint[]) AND "
            f"{KEPT.format(t='e.tenant', e='e.id')} > 0", [tenant, id_list(entity_ids), viewer_key(viewer)])]
        return display_names(seen, self._aliases(seen, viewer)) if seen else {}

    def entity_by_name(self, tenant: str, name: str, viewer: str | None) -> EntityNode | None:
        entity_id = self.entity_ids(tenant, [name], viewer).get(name)
        return None if entity_id is None else self.entity(tenant, entity_id, viewer)

    def entity_ids(self, tenant: str, names: Sequence[str], viewer: str | None = None) -> dict[str, int]:
        norms = {name: entity_norm(name) for name in names}
        if not norms:
            return {}
        keys = [k for n in dict.fromkeys(norms.values()) for k in name_keys(n, viewer)]
        found = held_keys(self._q(KEYS_SQL, [tenant, keys]))
        resolved = {name: resolve_key(found, norm, viewer) for name, norm in norms.items()}
        return {name: e for name, e in resolved.items() if e is not None}

    def entities(self, tenant: str, viewer: str | None, *, limit: int | None = None,
                 kind: str | None = None) -> list[EntityNode]:
        # summed off the kept counts: one row per entity and viewer, none per mention
        rows = self._q("SELECT e.id, e.name, e.kind, e.created_us, c.n FROM (SELECT split_part(key, chr(31), 1)"
                       "::bigint AS entity_id, sum(n) AS n FROM counts WHERE tenant = %s AND scope = 'mention' AND "
                       "split_part(key, chr(31), 2) IN ('', %s) GROUP BY 1) c JOIN entities e ON e.id = c.entity_id "
                       "AND e.tenant = %s AND (%s::text IS NULL OR e.kind = %s) WHERE c.n > 0 "
                       "ORDER BY c.n DESC, e.name COLLATE \"C\", e.id LIMIT %s",
                       [tenant, viewer_key(viewer), tenant, kind, kind, limit])
        return self._nodes(tenant, rows, viewer)

    def entity_mentions(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                        limit: int | None = None) -> dict[int, list[int]]:
        rows = self._q(f"SELECT w.e, x.mem_id FROM unnest(%s::bigint[]) w(e), LATERAL (SELECT mem_id FROM mentions "
                       f"WHERE entity_id = w.e AND tenant = %s AND {VISIBLE} ORDER BY ts_us DESC, mem_id DESC "
                       f"LIMIT %s) x", [id_list(entity_ids), tenant, viewer_key(viewer), limit])
        out: dict[int, list[int]] = {}
        for entity_id, mem_id in rows:
            out.setdefault(int(entity_id), []).append(int(mem_id))
        return out

    def entity_mention_counts(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                              cap: int) -> dict[int, int]:
        rows = self._q(f"SELECT w.e, {KEPT.format(t='%s', e='w.e')} FROM unnest(%s::bigint[]) w(e)",
                       [tenant, viewer_key(viewer), id_list(entity_ids)])
        return {int(e): min(int(n), max(0, cap)) for e, n in rows}

    def memory_entities(self, tenant: str, mem_ids: Iterable[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for mem_id, entity_id in self._q("SELECT mem_id, entity_id FROM mentions WHERE mem_id = ANY(%s::bigint[]) "
                                         "AND tenant = %s ORDER BY mem_id, entity_id", [id_list(mem_ids), tenant]):
            out.setdefault(int(mem_id), []).append(int(entity_id))
        return out

    def entity_relations(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> list[EntityRelation]:
        wanted = id_list(entity_ids)
        rows = self._q(f"SELECT src, dst, label, mem_id FROM relations WHERE (src = ANY(%s::bigint[]) OR "
                       f"dst = ANY(%s::bigint[])) AND tenant = %s AND {VISIBLE} "
                       f"ORDER BY src, dst, label COLLATE \"C\", mem_id", [wanted, wanted, tenant, viewer_key(viewer)])
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in rows]

    def entity_records(self, tenant: str, ids: Iterable[int] | None = None) -> list[EntityRecord]:
        wanted = None if ids is None else id_list(ids)
        rows = self._q("SELECT id, name, kind, created_us FROM entities WHERE tenant = %s AND (%s::bigint[] IS NULL "
                       "OR id = ANY(%s::bigint[])) ORDER BY id", [tenant, wanted, wanted])
        aliases = self._aliases([int(r[0]) for r in rows], None, everyone=True)
        return [EntityRecord(int(i), str(n), k, aliases.get(int(i), ()), int(c)) for i, n, k, c in rows]

    def alias_views(self, tenant: str) -> dict[tuple[int, str], frozenset[str]]:
        out: dict[tuple[int, str], set[str]] = {}
        for entity_id, alias, viewer in self._q(
                "SELECT a.entity_id, a.alias, s.viewer FROM entity_aliases a JOIN alias_seen s ON s.tenant = a.tenant "
                "AND s.norm = a.norm WHERE a.tenant = %s", [tenant]):
            out.setdefault((int(entity_id), entity_norm(str(alias))), set()).add(str(viewer))
        return {k: frozenset(v) for k, v in out.items()}

    def all_mentions(self, tenant: str) -> list[tuple[int, int]]:
        return [(int(m), int(e)) for m, e in self._q(
            "SELECT mem_id, entity_id FROM mentions WHERE tenant = %s ORDER BY mem_id, entity_id", [tenant])]

    def all_relations(self, tenant: str) -> list[EntityRelation]:
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in self._q(
            "SELECT src, dst, label, mem_id FROM relations WHERE tenant = %s "
            "ORDER BY src, dst, label COLLATE \"C\", mem_id", [tenant])]



if TYPE_CHECKING:  # mypy holds both classes to the Protocols
    def _is_store(s: PostgresGraphStore) -> GraphStore:
        return s

    def _is_txn(t: PgTxn) -> GraphTxn:
        return t
