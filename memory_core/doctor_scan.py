"""Read-only scans behind :mod:`memory_core.doctor`: per tenant, which memories each store holds.

The lexical check compares the tenant's FTS5 index term by term with a scratch index
built from SQLite's content (``fts5vocab`` instance tables on both), so a row indexed
with text other than the stored content is found, not only a missing or extra row.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from graph.api import AGENT, AUTHORED_BY, IN_SESSION, SESSION, agent_node, session_node
from graph.db import WINDOW_ROWS_SQL, fts_table_name, window_table_name
from memory_core.refs import EPISODE, MEMORY, memory_ref
from memory_core.write_path import vector_metadata

if TYPE_CHECKING:
    from memory_core.service import MemoryCore

CHUNK = 500
TOKENIZER = "porter unicode61 remove_diacritics 2"  # graph.db's FTS tokenizer
_SCRATCH = ("doctor_expected_v", "doctor_actual_v", "doctor_expected")


@dataclass(frozen=True)
class Finding:
    """One disagreement: its kind (see :mod:`memory_core.doctor`), tenant, ref and a sentence."""

    kind: str
    tenant: str
    ref: str | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StoreCounts:
    """How many memories of one tenant each store holds."""

    tenant: str
    sqlite: int
    graph: int
    vectors: int
    lexical: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: str
    tenant: str
    reason: str


def all_tenants(core: MemoryCore) -> list[str]:
    """Every tenant any store knows (a leak into one store still shows up)."""
    with core.db.lock:
        conn = core.db.conn
        names = {str(r[0]) for r in conn.execute("SELECT DISTINCT tenant FROM memories")}
        names |= {str(r[0]) for r in conn.execute("SELECT tenant FROM fts_tables")}
        names |= set(core.graph.tenants())
    return sorted(names | set(core.vectors.tenants()))


def memory_rows(core: MemoryCore, tenant: str, ids: list[int] | None = None) -> list[dict[str, Any]]:
    """SQLite rows of the tenant (all, or those among ``ids``), as write-path row dicts."""
    with core.db.lock:
        conn = core.db.conn
        if ids is None:
            rows = conn.execute("SELECT * FROM memories WHERE tenant = ? ORDER BY id", (tenant,)).fetchall()
        else:
            rows = []
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                marks = ",".join("?" * len(chunk))
                rows += conn.execute(
                    f"SELECT * FROM memories WHERE tenant = ? AND id IN ({marks}) ORDER BY id", (tenant, *chunk)
                ).fetchall()
    out = []
    for row in rows:
        d = dict(row)
        d["source"], d["metadata"] = json.loads(d["source"]), json.loads(d["metadata"])
        out.append(d)
    return out


def scan(core: MemoryCore) -> tuple[list[StoreCounts], list[Finding]]:
    """Counts per tenant and every disagreement between the stores (callers hold the writer lock)."""
    findings: list[Finding] = []
    with core.db.lock:
        journal = core.db.conn.execute("SELECT op, tenant, item_id, created_us FROM journal ORDER BY seq").fetchall()
    pending = {(str(t), str(ref)) for _op, t, ref, _us in journal}
    findings += [Finding("journal_pending", t, ref, f"an interrupted {op} (journaled at {us} µs)")
                 for op, t, ref, us in journal]
    counts = []
    for tenant in all_tenants(core):
        rows = {r["id"]: r for r in memory_rows(core, tenant)}
        counted = core.graph.count(tenant)
        if counted != len(rows):
            findings.append(Finding("graph_stale", tenant, None,
                                    f"the graph's counts say {counted} memories, SQLite holds {len(rows)}"))
        vector_ids = core.vectors.all_ids(tenant)
        findings += _vector_findings(core, tenant, rows, vector_ids, pending)
        indexed, lexical = _lexical_findings(core, tenant, set(rows))
        findings += lexical + _window_findings(core, tenant)
        memory_vectors = sum(1 for ref in vector_ids if ref.startswith(MEMORY + ":"))
        counts.append(StoreCounts(tenant, len(rows), counted, memory_vectors, indexed))
    findings += [Finding("graph_missing", m.tenant, m.ref, _missing_detail(m)) for m in missing_structure(core)]
    findings += [Finding("dangling_edge", e.tenant, e.src, f"{e.kind} -> {e.dst}: {e.reason}")
                 for e in dangling_edges(core)]
    return counts, findings


def _missing_detail(item: Structure) -> str:
    if item.node is not None:
        return f"its {item.node[1]} node {item.node[0]} is missing"
    assert item.edge is not None
    return f"its {item.edge[2]} edge to {item.edge[1]} is missing"


def _vector_findings(
    core: MemoryCore, tenant: str, rows: dict[int, dict[str, Any]], vector_ids: set[str], pending: set[tuple[str, str]]
) -> list[Finding]:
    out = []
    episodes = _episode_refs(core, tenant)
    expected = {memory_ref(i) for i in rows}
    for ref in sorted(vector_ids - expected - episodes):
        if (tenant, ref) not in pending:
            out.append(Finding("vector_orphan", tenant, ref, "a vector record with no memory in the graph"))
    for ref in sorted(expected - vector_ids):
        if (tenant, ref) not in pending:
            out.append(Finding("vector_missing", tenant, ref, "a memory with no vector record"))
    both = sorted(expected & vector_ids)
    for start in range(0, len(both), CHUNK):
        records = core.vectors.documents(tenant, both[start : start + CHUNK])
        for ref, (document, meta) in records.items():
            row = rows[int(ref.split(":", 1)[1])]
            want = vector_metadata(row)
            salience_ok = abs(float(meta.get("salience", -1)) - float(want["salience"])) < 1e-4
            differs = sorted(k for k in {*want, "role", "channel", "source_id"} - {"salience"}
                             if meta.get(k) != want.get(k))
            if document != row["content"]:
                out.append(Finding("vector_stale", tenant, ref, "the vector record's document differs"))
            elif differs or not salience_ok:
                what = ", ".join(differs + ([] if salience_ok else ["salience"]))
                out.append(Finding("vector_stale", tenant, ref, f"the vector record's metadata differs ({what})"))
    return out


def _episode_refs(core: MemoryCore, tenant: str) -> set[str]:
    with core.db.lock:
        rows = core.db.conn.execute("SELECT id FROM episodes WHERE tenant = ?", (tenant,)).fetchall()
    return {f"{EPISODE}:{r[0]}" for r in rows}


def _lexical_findings(core: MemoryCore, tenant: str, memory_ids: set[int]) -> tuple[int, list[Finding]]:
    """(documents indexed, findings) for the tenant's FTS table against SQLite's content."""
    with core.db.lock:
        conn = core.db.conn
        row = conn.execute("SELECT name FROM fts_tables WHERE tenant = ?", (tenant,)).fetchone()
        if row is None:
            return 0, [Finding("lexical_missing", tenant, memory_ref(i), "the tenant has no lexical index")
                       for i in sorted(memory_ids)]
        name = str(row[0])
        if name != fts_table_name(tenant):
            return 0, [Finding("lexical_stale", tenant, None, f"the lexical index {name} is not the tenant's")]
        indexed = {int(r[0]) for r in conn.execute(f"SELECT id FROM {name}_docsize")}
        differing = _differing_docs(core, tenant, name)
    out = [Finding("lexical_stale", tenant, memory_ref(i), "an indexed row with no memory of this tenant")
           for i in sorted(indexed - memory_ids)]
    out += [Finding("lexical_missing", tenant, memory_ref(i), "a memory missing from the lexical index")
            for i in sorted(memory_ids - indexed)]
    out += [Finding("lexical_stale", tenant, memory_ref(i), "indexed text differs from the stored content")
            for i in sorted(differing & indexed & memory_ids)]
    return len(indexed), out


def _window_findings(core: MemoryCore, tenant: str) -> list[Finding]:
    """The tenant's lexical window table against ``WINDOW_ROWS_SQL``, its exact expected content."""
    name = window_table_name(tenant)
    with core.db.lock:
        conn = core.db.conn
        expected = {int(r[0]): (r[1], r[2]) for r in conn.execute(WINDOW_ROWS_SQL, (tenant,))}
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is None:
            return [Finding("lexical_missing", tenant, None, "the tenant has no lexical window table")] if (
                expected) else []
        actual = {int(r[0]): (r[1], r[2]) for r in conn.execute(f"SELECT rowid, content, prev FROM {name}")}
        try:
            conn.execute(f"INSERT INTO {name} ({name}) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            return [Finding("lexical_stale", tenant, None, f"the lexical window index is damaged ({exc})")]
    out = [Finding("lexical_stale", tenant, memory_ref(i), "a window row with no memory of this tenant")
           for i in sorted(actual.keys() - expected.keys())]
    out += [Finding("lexical_missing", tenant, memory_ref(i), "a memory missing from the lexical window")
            for i in sorted(expected.keys() - actual.keys())]
    out += [Finding("lexical_stale", tenant, memory_ref(i), "window text differs from the stored content")
            for i in sorted(expected.keys() & actual.keys()) if expected[i] != actual[i]]
    return out


def _differing_docs(core: MemoryCore, tenant: str, name: str) -> set[int]:
    """Doc ids whose indexed terms differ from a scratch index of the stored content."""
    conn = core.db.conn
    try:
        _drop_scratch(core)
        conn.execute(f"CREATE VIRTUAL TABLE temp.doctor_expected USING fts5(content, tokenize='{TOKENIZER}')")
        conn.execute("INSERT INTO temp.doctor_expected (rowid, content) SELECT id, content FROM main.memories "
                     "WHERE tenant = ?", (tenant,))
        conn.execute("CREATE VIRTUAL TABLE temp.doctor_expected_v USING fts5vocab(temp, 'doctor_expected', 'instance')")
        conn.execute(f"CREATE VIRTUAL TABLE temp.doctor_actual_v USING fts5vocab(main, '{name}', 'instance')")
        actual = "SELECT term, doc, col, offset FROM temp.doctor_actual_v"
        expected = "SELECT term, doc, col, offset FROM temp.doctor_expected_v"
        rows = conn.execute(
            f"SELECT doc FROM ({actual} EXCEPT {expected}) UNION SELECT doc FROM ({expected} EXCEPT {actual})"
        ).fetchall()
        return {int(r[0]) for r in rows}
    finally:
        _drop_scratch(core)


def _drop_scratch(core: MemoryCore) -> None:
    for table in _SCRATCH:
        core.db.conn.execute(f"DROP TABLE IF EXISTS temp.{table}")


@dataclass(frozen=True)
class Structure:
    """A derived graph row a memory needs: its AGENT/SESSION node or its AUTHORED_BY/IN_SESSION edge."""

    tenant: str
    ref: str
    node: tuple[str, str, str] | None = None  # (node_id, kind, attrs JSON)
    edge: tuple[str, str, str] | None = None  # (src, dst, kind)


def missing_structure(core: MemoryCore) -> list[Structure]:
    """Derived nodes and edges absent for existing memories (rebuilt from the memory row)."""
    with core.db.lock:
        conn = core.db.conn
        nodes = {str(r[0]) for r in conn.execute("SELECT node_id FROM nodes")}
        edges = {(str(a), str(b), str(k)) for a, b, k in conn.execute("SELECT src, dst, kind FROM edges")}
        rows = conn.execute("SELECT id, tenant, session, agent FROM memories ORDER BY id").fetchall()
    out: list[Structure] = []
    for mem_id, tenant, session, agent in rows:
        ref = memory_ref(mem_id)
        for node, kind, attrs, edge_kind in (
            (agent_node(tenant, agent), AGENT, {"agent": agent}, AUTHORED_BY),
            (session_node(tenant, session), SESSION, {"session": session}, IN_SESSION),
        ):
            if node not in nodes:
                nodes.add(node)
                out.append(Structure(tenant, ref, node=(node, kind, json.dumps(attrs))))
            if (ref, node, edge_kind) not in edges:
                out.append(Structure(tenant, ref, edge=(ref, node, edge_kind)))
    return out


def dangling_edges(core: MemoryCore) -> list[Edge]:
    """Edges whose source or target does not exist, or lives in another tenant.

    A memory's own AGENT/SESSION node counts as existing even when its row is lost: repair
    recreates it (see :func:`missing_structure`) rather than dropping the memory's edges.
    """
    with core.db.lock:
        conn = core.db.conn
        owner: dict[str, str] = {}
        for mem_id, tenant, session, agent in conn.execute("SELECT id, tenant, session, agent FROM memories"):
            owner[memory_ref(mem_id)] = owner[agent_node(tenant, agent)] = str(tenant)
            owner[session_node(tenant, session)] = str(tenant)
        owner.update({f"{EPISODE}:{i}": str(t) for i, t in conn.execute("SELECT id, tenant FROM episodes")})
        owner.update({str(n): str(t) for n, t in conn.execute("SELECT node_id, tenant FROM nodes")})
        edges = conn.execute("SELECT src, dst, kind, tenant FROM edges").fetchall()
    out = []
    for src, dst, kind, tenant in edges:
        for end in (src, dst):
            found = owner.get(end)
            if found is None or found != tenant:
                reason = f"{end} does not exist" if found is None else f"{end} belongs to another tenant"
                out.append(Edge(src, dst, kind, tenant, reason))
                break
    return out
