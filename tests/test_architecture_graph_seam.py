"""The graph seam (issue 11 §1): no SQL and no networkx internals outside graph/.

Everything outside ``graph/`` reaches the durable graph through ``graph.api.GraphStore`` and
``graph.maintenance_api.GraphMaintenance``. The scan reads each module's syntax tree (comments
and strings do not count) for ``execute(`` / ``executemany(`` / ``executescript(`` calls,
any ``.conn`` attribute, ``sqlite3.connect`` and networkx's private ``_node``, ``_pred``,
``_succ`` and ``_adj``.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatch

from testbed.paths import ROOT

SCANNED = ("memory_core", "tools", "bench")

# Modules the lead is still moving behind graph.api.GraphStore (issue 11 §1). Each entry is
# temporary: delete it once its module is converted; the set ends empty.
ALLOWED_FOR_NOW: frozenset[str] = frozenset()  # emptied: every module goes through graph/

# Benchmarks that keep a SQLite database of their own, never the graph's: an embedding cache
# and in-memory FTS5 baselines that recall is compared with. Permanent.
OWN_DATABASES = frozenset({"bench/latency/embed_cache.py", "bench/quality/locomo.py", "bench/quality/ranking.py",
                           # bulk-fills a throwaway PostgreSQL database with SQL to time reads at 300k rows
                           "bench/scale/pg/store.py"})

SQL_CALLS = frozenset({"execute", "executemany", "executescript"})
NETWORKX_INTERNALS = frozenset({"_node", "_pred", "_succ", "_adj"})


def offences(source: str) -> list[tuple[int, str]]:
    """(line, what) for every SQL statement or networkx internal the source uses."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            found.append((node.lineno, f"{node.func.attr}("))
        elif isinstance(node, ast.Attribute):
            if node.attr == "conn":
                found.append((node.lineno, ".conn"))
            elif node.attr in NETWORKX_INTERNALS:
                found.append((node.lineno, f"networkx .{node.attr}"))
            elif node.attr == "connect" and isinstance(node.value, ast.Name) and node.value.id == "sqlite3":
                found.append((node.lineno, "sqlite3.connect"))
        elif isinstance(node, ast.ImportFrom) and node.module == "sqlite3":
            found += [(node.lineno, "sqlite3.connect") for a in node.names if a.name == "connect"]
    return sorted(found)


def modules() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for pkg in SCANNED for p in (ROOT / pkg).rglob("*.py"))


def exempt(module: str) -> bool:
    return module in OWN_DATABASES or any(fnmatch(module, pattern) for pattern in ALLOWED_FOR_NOW)


def test_no_module_outside_graph_runs_sql_or_reads_networkx_internals() -> None:
    offenders = [f"{m}:{line}: {what}" for m in modules() if not exempt(m)
                 for line, what in offences((ROOT / m).read_text())]
    assert offenders == [], "SQL or networkx internals outside graph/ (use graph.api / graph.maintenance_api):\n" + (
        "\n".join(offenders))


def test_doctor_transfer_and_admin_are_not_exempt() -> None:
    converted = ["memory_core/operator/doctor/run.py", "memory_core/operator/doctor/scan.py",
                 "memory_core/operator/transfer.py",
                 "memory_core/operator/stats.py"]
    assert [m for m in converted if exempt(m)] == []
    assert set(converted) <= set(modules())


def test_the_scan_finds_each_kind_of_sql_and_networkx_internal() -> None:
    source = '''
import sqlite3
from sqlite3 import connect
conn = sqlite3.connect(":memory:")
core.db.conn.execute("SELECT 1")
cur.executemany("INSERT INTO t VALUES (?)", rows)
cur.executescript("DROP TABLE t")
preds = graph._pred.get("mem:1")
g._succ, g._adj, g._node
# core.db.conn.execute("in a comment") does not count
"nor .execute( in a string"
'''
    assert offences(source) == [
        (3, "sqlite3.connect"), (4, "sqlite3.connect"), (5, ".conn"), (5, "execute("), (6, "executemany("),
        (7, "executescript("), (8, "networkx ._pred"), (9, "networkx ._adj"), (9, "networkx ._node"),
        (9, "networkx ._succ"),
    ]


def test_the_scan_finds_nothing_in_code_that_uses_the_seam() -> None:
    source = '''
rows = core.maintenance.memory_rows("acme")
node = core.graph.memory("acme", 7)
executor.submit(job)
'''
    assert offences(source) == []
