"""An independent oracle for the doctor tests: do the stores hold the same memories per tenant?

It reads each store directly (Chroma ids and documents, SQLite's or PostgreSQL's rows, the
graph, each tenant's lexical index, the journal) rather than through memory_core.operator.doctor.run, so a
doctor bug cannot hide behind its own check.
"""

from __future__ import annotations

from typing import Any

from memory_core import MemoryCore
from memory_core.refs import memory_ref
from tests.support.sqlite import sqlite_db

# On PostgreSQL a row is indexed when its window text is the previous shared row of its session
# and its stored tsvector is what that text and its content make now.
_PG_INDEXED = """
SELECT m.id FROM memories m JOIN (
    SELECT id, coalesce(lag(CASE WHEN visibility = 'tenant' THEN content ELSE '' END)
                        OVER (PARTITION BY session ORDER BY ts_us, id), '') AS prev
    FROM memories WHERE tenant = %s) w ON w.id = m.id
WHERE m.prev = w.prev
  AND m.tsv_win = setweight(memcore_tsv(m.content), 'A') || setweight(memcore_tsv(m.prev), 'B')
"""


def assert_stores_agree(core: MemoryCore) -> None:
    if sqlite_db(core) is None:
        _assert_postgres_agrees(core)
        return
    with sqlite_db(core).lock:
        conn = sqlite_db(core).conn
        tenants = {str(r[0]) for r in conn.execute("SELECT DISTINCT tenant FROM memories")}
        fts = {str(t): str(n) for t, n in conn.execute("SELECT tenant, name FROM fts_tables")}
        assert conn.execute("SELECT count(*) FROM journal").fetchone()[0] == 0, "journal entries left behind"
    for tenant in sorted(tenants | set(fts) | set(core._vectors.tenants())):
        db = sqlite_db(core)
        assert db is not None
        with db.lock:
            rows = dict(db.conn.execute("SELECT id, content FROM memories WHERE tenant = ?", (tenant,)).fetchall())
            indexed = {int(r[0]) for r in db.conn.execute(f"SELECT id FROM {fts[tenant]}_docsize")} if (
                tenant in fts) else set()
        _assert_tenant_agrees(core, tenant, rows, indexed)


def _assert_postgres_agrees(core: MemoryCore) -> None:
    import psycopg

    with psycopg.connect(core.settings.storage.postgres_dsn, autocommit=True) as conn:
        tenants = {str(r[0]) for r in conn.execute("SELECT DISTINCT tenant FROM memories")}
        journal = conn.execute("SELECT count(*) FROM journal").fetchone()
        assert journal is not None and journal[0] == 0, "journal entries left behind"
        for tenant in sorted(tenants | set(core._vectors.tenants())):
            rows: dict[int, Any] = dict(conn.execute("SELECT id, content FROM memories WHERE tenant = %s",
                                                     [tenant]).fetchall())
            indexed = {int(r[0]) for r in conn.execute(_PG_INDEXED, [tenant])}
            _assert_tenant_agrees(core, tenant, rows, indexed)


def _assert_tenant_agrees(core: MemoryCore, tenant: str, rows: dict[int, Any], indexed: set[int]) -> None:
    graph = {k[1] for k in core._graph.iter_newest(tenant, None)}
    archived = {i for i, n in core._graph.memories(tenant, rows).items() if n.archived_us is not None}
    refs = {memory_ref(i) for i in rows if i not in archived}  # archived rows (retention, consolidation): no record
    vectors = {ref for ref in core._vectors.all_ids(tenant) if ref.startswith("mem:")}
    assert vectors == refs, f"{tenant}: Chroma-only {vectors - refs}, graph-only {refs - vectors}"
    assert graph == set(rows), f"{tenant}: the graph store's time index differs from its rows"
    assert indexed == set(rows), f"{tenant}: index-only {indexed - set(rows)}, unindexed {set(rows) - indexed}"
    records = core._vectors.documents(tenant, sorted(refs))  # type: ignore[attr-defined]
    for ref, (document, meta) in records.items():
        assert meta.get("tenant") == tenant and document == rows[int(ref[4:])], ref
