"""Stores for the re-embed tests: filled under one hash model, compared with a fresh import under another.

``fresh_import`` is what "answers exactly like a fresh import under the new model" means: the re-embedded
store's rows exported and imported into an empty store by the real CLI, in subprocesses, with the new model.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from memory_core import MemoryCore, Settings
from memory_core.embedding.local import HashEmbedder
from memory_core.refs import memory_ref
from memory_core.settings import load_settings
from memory_core.write.rows import embedding_text
from testbed.paths import ROOT

TENANTS = ("acme", "globex")
WORDS = ("kiwi", "apple", "pear", "plum", "cherry", "fig", "quince", "lemon", "lime", "peach", "mango", "olive")
# rows of a few words each drawn from ~200: queries rank them with few exact ties (the order of tied rows is the
# vector index's own, which differs between any two stores built differently, re-embedded or not)
VOCAB = tuple(f"{w}{s}" for w in WORDS for s in ("", "s", "ed", "er", "ing", "ish", "ly", "ness", "ful", "less",
                                                  "ment", "ous", "ward", "like", "wise", "dom"))
QUERIES = ("kiwi harvest", "pears lemonly", "the limeward service", "plumish and pearful orchard", "live note",
           "olive 12", "mangoless figs cherrying")


def settings(dimension: int) -> Settings:
    return load_settings(environ={}, overrides={"embedding": {"provider": "hash", "dimension": dimension}})


def open_store(path: Path, dimension: int, **options: bool) -> MemoryCore:
    return MemoryCore.open(path, settings=settings(dimension), embedder=HashEmbedder(dimension), **options)


def text(tenant: str, i: int) -> str:
    words = random.Random(f"{tenant}/{i}").sample(VOCAB, 7)
    return f"{tenant}: {' '.join(words)} (note {i})"


def fill(path: Path, rows: int, dimension: int = 64) -> None:
    """``rows`` memories per tenant in a few sessions, written as agents write them."""
    with open_store(path, dimension) as core:
        for tenant in TENANTS:
            items = [{"tenant": tenant, "session": f"s{i % 5}", "agent": "ann", "content": text(tenant, i)}
                     for i in range(rows)]
            for start in range(0, rows, 500):
                core.add_memories(items[start:start + 500])  # type: ignore[arg-type]


def cli_env(dimension: int) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    return {**clean, "MEMORY_CORE_EMBEDDING_PROVIDER": "hash", "MEMORY_CORE_EMBEDDING_DIMENSION": str(dimension)}


def cli(*args: str, dimension: int, timeout_s: float = 300,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``memory-core ARGS`` in a subprocess, configured with the hash model of ``dimension`` (and ``env``)."""
    return subprocess.run([sys.executable, "-m", "tools.cli", *args], cwd=ROOT,
                          env={**cli_env(dimension), **(env or {})}, capture_output=True, text=True,
                          timeout=timeout_s, check=False)


def fresh_import(path: Path, into: Path, dimension: int) -> None:
    """Export ``path`` and import the file into the new store ``into`` under the hash model of ``dimension``."""
    for tenant in TENANTS:
        dump = into.parent / f"{into.name}-{tenant}.jsonl"
        done = cli("export", "--tenant", tenant, "--data-dir", str(path), "--out", str(dump), dimension=dimension)
        assert done.returncode == 0, done.stderr
        done = cli("import", str(dump), "--tenant", tenant, "--data-dir", str(into), dimension=dimension)
        assert done.returncode == 0, done.stderr


def answers(core: MemoryCore) -> dict[str, list[list[str]]]:
    """Every tenant's recall of :data:`QUERIES`, as the contents in order."""
    return {tenant: [[m.content for m in core.recall(tenant, q, limit=8, collapse=False).messages] for q in QUERIES]
            for tenant in TENANTS}


def same_as_fresh(path: Path, tmp: Path, dimension: int) -> None:
    """``path`` answers every query exactly as a fresh import of its rows under the model of ``dimension``."""
    fresh = tmp / "fresh"
    fresh_import(path, fresh, dimension)
    with open_store(fresh, dimension) as core:
        expected = answers(core)
        counts = {t: core.operator_parts().graph.count(t) for t in TENANTS}
    with open_store(path, dimension) as core:
        got = answers(core)
        assert got == expected, [(t, QUERIES[i], g, e) for t in TENANTS
                                 for i, (g, e) in enumerate(zip(got[t], expected[t], strict=True)) if g != e][:2]
        assert {t: core.operator_parts().graph.count(t) for t in TENANTS} == counts
        assert {t: len(core.operator_parts().vectors.all_ids(t)) for t in TENANTS} == counts
        embedded_with_the_model(core, dimension)


def embedded_with_the_model(core: MemoryCore, dimension: int) -> None:
    """Every memory's record in the index in use holds the vector the model of ``dimension`` gives its text."""
    parts, model = core.operator_parts(), HashEmbedder(dimension)
    for tenant in TENANTS:
        rows = [r for r in parts.maintenance.memory_rows(tenant) if r.node.archived_us is None]
        refs = [memory_ref(r.node.id) for r in rows]
        stored = parts.vectors.embeddings(tenant, refs)
        assert sorted(stored) == sorted(refs)
        for ref, want in zip(refs, model.embed([embedding_text(r) for r in rows]), strict=True):
            assert max(abs(a - b) for a, b in zip(stored[ref], want, strict=True)) < 1e-5, ref
