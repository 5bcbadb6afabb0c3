"""An import killed at any instant, then run again, ends exactly as an import that was never killed:
nothing lost, nothing written twice, every version chain, lock, edge, entity and relation in place.

Two sources: memory-core's own JSONL (version chains with a locked head, a handoff chain, a private
chain, entities and relations; some ids taken in the target, so rows are remapped) and the MCP
memory server's memory.json (observations, relations, an entity known only from a relation). A dry
run counts the import's steps at the store boundaries (before and after every vector write and
every graph write transaction, see tests/support/import_crash.py, with small batches); then, for
every step, a fresh copy of the target store is imported into by a subprocess that ends with
``os._exit`` at that step. The store is reopened (recovery runs), the import is run again to the
end, and the tenant must equal the reference (an import never killed), refs aside, and doctor must
find nothing. Both graph backends (PostgreSQL with embedded Chroma: a copy of the data directory
plus ``CREATE DATABASE ... TEMPLATE``); ``make test`` kills the SQLite import at every second step
and the PostgreSQL one at every third (``MEMORY_CORE_RELIABILITY=long``: every step).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.operator.doctor.run import check_stores
from memory_core.operator.transfer import export_tenant
from testbed.paths import ROOT
from tests.support.backends import graph_backends, open_core
from tests.support.import_crash import run_import
from tests.support.repair_crash import CRASH_EXIT
from tests.support.store_checks import LONG
from tests.support.store_copy import Store

MCP = ROOT / "tests" / "fixtures" / "import" / "mcp-memory" / "memory.json"
STRIDE = {"sqlite": 1 if LONG else 2, "postgres": 1 if LONG else 3}


def populate(core: MemoryCore) -> None:
    """The source tenant of the JSONL file."""
    v1 = core.add_memory("acme", "s1", "ann", "the port is 8080", type="fact",
                         entities=[{"name": "Gateway", "kind": "service"}]).ref
    v2 = core.update_memory("acme", v1, content="the port is 8443").added.ref
    v3 = core.update_memory("acme", v2, content="the port is 9443", agent="bob").added.ref
    core.lock_memory("acme", v3)
    core.create_handoff("acme", "s1", "ann", "handoff one: gateway moved")
    core.create_handoff("acme", "s1", "ann", "handoff two: ports settled")
    p1 = core.add_memory("acme", "s2", "cat", "my draft", visibility="agent").ref
    core.update_memory("acme", p1, content="my better draft", agent="cat")
    for i in range(6):
        core.add_memory("acme", "s3", "dan", f"turn {i}: Alice asks Bob about the Gateway",
                        entities=[{"name": "Alice", "kind": "person"}, {"name": "Bob", "kind": "person"}],
                        relations=[{"from": "Alice", "to": "Bob", "label": "asks"}])


def fingerprint(core: MemoryCore) -> Counter[tuple[Any, ...]]:
    """The tenant as a multiset of memories with everything but refs (which a rerun may assign anew)."""
    lines = list(export_tenant(core.operator_parts(), "acme"))
    content = {line["ref"]: line["content"] for line in lines}
    return Counter((
        line["session"], line["timestamp"], line["content"], line["agent"], line["type"], line["visibility"],
        line["locked"], line["valid_to"], content.get(line["supersedes"]),
        tuple(sorted((e["kind"], content.get(e["node"], e["node"])) for e in line["edges"]
                     if e["node"].startswith("mem:"))),
        tuple(sorted((e["name"], e["kind"]) for e in line["entities"])),
        tuple(sorted(r["label"] for r in line["relations"])),
    ) for line in lines)


def run(store: Store, crash_at: int, kind: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.support.import_crash", str(store.data_dir), str(crash_at),
                           json.dumps(store.storage), kind, str(path)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def jsonl_file(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    folder = tmp_path_factory.mktemp("source")
    core = open_core("memory", folder / "data", request)
    try:
        populate(core)
        path = folder / "acme.jsonl"
        exported = export_tenant(core.operator_parts(), "acme")
        path.write_text("".join(json.dumps(line) + "\n" for line in exported), encoding="utf-8")
    finally:
        core.close()
    return path


@pytest.fixture(params=graph_backends())
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """The store imported into: a few rows of another tenant hold ids the file uses."""
    data_dir = tmp_path / "template"
    store = Store.new(request.param, data_dir, request)
    with store.opened() as core:
        for i in range(3):
            core.add_memory("initech", "s", "x", f"unrelated row {i}")
    return store


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kind", ["jsonl", "mcp-memory"])
def test_an_import_killed_at_any_step_and_run_again_ends_as_if_never_killed(
        kind: str, target: Store, jsonl_file: Path, tmp_path: Path) -> None:
    path = jsonl_file if kind == "jsonl" else MCP
    reference = target.copy(tmp_path / "reference")
    out = run(reference, 0, kind, path)
    assert out.returncode == 0, out.stderr[-3000:]
    steps = int(json.loads(out.stdout.strip().splitlines()[-1])["steps"])
    assert steps >= 12, "the import should write in many steps"
    with reference.opened() as core:
        want = fingerprint(core)
        written = json.loads(out.stdout.strip().splitlines()[-1])["written"]
        assert check_stores(core.operator_parts()).ok and sum(want.values()) == written
    reference.remove()
    failures = []
    for crash_at in sorted({*range(1, steps + 1, STRIDE[target.backend]), steps}):
        store = target.copy(tmp_path / f"trial-{crash_at}")
        trial = run(store, crash_at, kind, path)
        assert trial.returncode == CRASH_EXIT, f"step {crash_at}: {trial.stderr[-3000:]}"
        where = json.loads(trial.stdout.strip().splitlines()[-1])["step"]
        with store.opened() as core:  # recovery at open runs here
            again = run_import(core, kind, path)
            got = fingerprint(core)
            report = check_stores(core.operator_parts())
            if again["errors"] or got != want or not report.ok:
                missing, extra = sorted((want - got).elements())[:3], sorted((got - want).elements())[:3]
                failures.append(f"killed at step {crash_at} ({where}): rerun errors {again['errors']}, missing "
                                f"{missing}, extra {extra}, doctor {[f.to_dict() for f in report.findings][:3]}")
        store.remove()
    assert not failures, "\n".join(failures)
