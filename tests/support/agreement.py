"""An independent oracle for the doctor tests: do the stores hold the same memories per tenant?

It reads each store directly (Chroma ids and documents, SQLite rows, the graph, each tenant's
FTS document list, the journal) rather than through memory_core.doctor, so a doctor bug
cannot hide behind its own check.
"""

from __future__ import annotations

from memory_core import MemoryCore
from memory_core.refs import memory_ref


def assert_stores_agree(core: MemoryCore) -> None:
    with core.db.lock:
        conn = core.db.conn
        tenants = {str(r[0]) for r in conn.execute("SELECT DISTINCT tenant FROM memories")}
        fts = {str(t): str(n) for t, n in conn.execute("SELECT tenant, name FROM fts_tables")}
        assert conn.execute("SELECT count(*) FROM journal").fetchone()[0] == 0, "journal entries left behind"
    for tenant in sorted(tenants | set(fts) | set(core.vectors.tenants())):
        with core.db.lock:
            rows = dict(core.db.conn.execute("SELECT id, content FROM memories WHERE tenant = ?", (tenant,)).fetchall())
            indexed = {int(r[0]) for r in core.db.conn.execute(f"SELECT id FROM {fts[tenant]}_docsize")} if (
                tenant in fts) else set()
            graph = {k[1] for k in core.graph.iter_newest(tenant, None)}
        refs = {memory_ref(i) for i in rows}
        vectors = {ref for ref in core.vectors.all_ids(tenant) if ref.startswith("mem:")}
        assert vectors == refs, f"{tenant}: Chroma-only {vectors - refs}, graph-only {refs - vectors}"
        assert graph == set(rows), f"{tenant}: the graph store's time index differs from its rows"
        assert indexed == set(rows), f"{tenant}: FTS-only {indexed - set(rows)}, unindexed {set(rows) - indexed}"
        records = core.vectors.documents(tenant, sorted(refs))  # type: ignore[attr-defined]
        for ref, (document, meta) in records.items():
            assert meta.get("tenant") == tenant and document == rows[int(ref[4:])], ref
