"""The warm-up's threads import onnxruntime, tokenizers and chromadb beside the stores' open and the
first calls without ever meeting a half-initialised module.

Each probe is a fresh interpreter (imports happen once per process) that opens a store the way a
server does: the shared one (``open_stores_warming``: the model starts loading beside the graph's
open) or ``serve --exclusive`` (the graph opens, then the warm-up starts), starts the server warm-up
(model and Chroma side by side) and makes the first add and recall at once. Several probes run at
the same time, twice over, so the threads interleave differently each time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.paths import ROOT

PROBES_AT_ONCE = 4
ROUNDS = 2

PROBE = """
import json, sys, threading
failures = []
threading.excepthook = lambda args: failures.append(f"{type(args.exc_value).__name__}: {args.exc_value}")
from memory_core.settings import load_settings
from memory_core.embedding.local import shared_minilm
from tools.serve.deferred_core import open_stores, open_stores_warming

opener = open_stores_warming if sys.argv[2] == "shared" else open_stores
core = opener(load_settings(environ={}), sys.argv[1])
threads = core.warm_up_in_background()
try:
    core.add_memory("acme", "s1", "alice", "the first write, beside the warm-up")
    found = core.recall("acme", "the first write")
except ImportError as exc:
    failures.append(f"{type(exc).__name__}: {exc}")
for thread in threads:
    thread.join(300)
print(json.dumps({"failures": failures, "chroma_open": core._vectors.inner.inner.is_open,
                  "model_loaded": shared_minilm()._session is not None}))
core.close()
"""


def probe(data_dir: Path, server: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    return subprocess.Popen([sys.executable, "-c", PROBE, str(data_dir), server], cwd=ROOT, text=True,
                            env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_warm_ups_beside_the_first_calls_never_meet_a_half_imported_module(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        running = [probe(tmp_path / f"r{round_}-{i}", ("shared", "exclusive")[i % 2]) for i in range(PROBES_AT_ONCE)]
        for proc in running:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            assert "partially initialized" not in err and "ImportError" not in err, err[-3000:]
            report = json.loads(out.strip().splitlines()[-1])
            assert report == {"failures": [], "chroma_open": True, "model_loaded": True}, report


CHROMA_PROBE = """
import json, sys
from memory_core.vectors import chroma_import as heavy_imports
chromadb = heavy_imports.chromadb()
import overrides
from chromadb.api.rust import RustBindingsAPI

class Base:
    def method(self) -> int:
        return 1

try:
    class Wrong(Base):
        @overrides.override
        def not_in_base(self) -> int:
            return 2
    checked = False
except TypeError:
    checked = True
client = chromadb.PersistentClient(path=sys.argv[1], settings=chromadb.Settings(anonymized_telemetry=False))
col = client.get_or_create_collection("probe", embedding_function=None)
col.upsert(ids=["a"], embeddings=[[1.0, 0.0]], documents=["d"])
cli_skipped = "httpx._main" not in sys.modules and "pygments" not in sys.modules
import httpx
import httpx._main
print(json.dumps({"restored": overrides.override is sys.modules["overrides.overrides"].override,
                  "httpx_cli_skipped": cli_skipped, "httpx_cli_on_demand": httpx._main.main.name == "main",
                  "checks_again": checked, "marked": RustBindingsAPI.heartbeat.__override__,
                  "client_modules": all(m in sys.modules for m in heavy_imports.CHROMA_CLIENT_MODULES),
                  "count": col.count()}))
"""


def test_chromadb_imports_without_override_checks_or_httpx_cli_and_leaves_both_for_everyone_else(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    out = subprocess.run([sys.executable, "-c", CHROMA_PROBE, str(tmp_path / "chroma")], cwd=ROOT, text=True,
                         env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "restored": True, "httpx_cli_skipped": True, "httpx_cli_on_demand": True, "checks_again": True,
        "marked": True, "client_modules": True, "count": 1}
