"""Vector counts compare like with like (issue 37, point 3): memories with memory vectors,
episodes (session summaries) with episode vectors. A summarised tenant is not a mismatch; a
tenant whose stores really disagree still is. Through the CLI (Typer's runner) and the
inspector's front page (the real app), on embedded Chroma and SQLite."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.settings import load_settings
from tests.support.ui_store import OPERATOR_TOKEN, ui_settings
from tools.cli.app import app
from tools.ui import standalone_app

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """acme: 3 memories and one session summary; globex: 2 memories, never summarised;
    initech: 2 memories, one of whose vectors was lost; hooli: a summary whose vector was lost
    (those two stores really disagree)."""
    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    path = tmp_path / "data"
    with MemoryCore.open(path, settings=load_settings(overrides=ui_settings())) as core:
        for i in range(3):
            core.add_memory("acme", "s1", "ann", f"turn {i} about the harvest")
        core.summarize_session("acme", "s1")
        for i in range(2):
            core.add_memory("globex", "g1", "zed", f"globex turn {i}")
        lost = core.add_memory("initech", "i1", "bo", "initech turn 0").ref
        core.add_memory("initech", "i1", "bo", "initech turn 1")
        core._vectors.delete("initech", [lost])
        core.add_memory("hooli", "h1", "gav", "hooli turn")
        core._vectors.delete("hooli", [core.summarize_session("hooli", "h1").ref])
    yield path


def run_json(data_dir: Path, *args: str) -> Any:
    result = runner.invoke(app, [*args, "--data-dir", str(data_dir), "--json"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_tenants_counts_memory_vectors_and_episode_vectors_apart(data_dir: Path) -> None:
    tenants = {t["tenant"]: t for t in run_json(data_dir, "tenants")["tenants"]}
    pick = ("memories", "vectors", "episodes", "episode_vectors")
    assert {k: tenants["acme"][k] for k in pick} == {"memories": 3, "vectors": 3, "episodes": 1, "episode_vectors": 1}
    assert {k: tenants["globex"][k] for k in pick} == {"memories": 2, "vectors": 2, "episodes": 0,
                                                       "episode_vectors": 0}
    assert {k: tenants["initech"][k] for k in pick} == {"memories": 2, "vectors": 1, "episodes": 0,
                                                        "episode_vectors": 0}
    assert {k: tenants["hooli"][k] for k in pick} == {"memories": 1, "vectors": 1, "episodes": 1,
                                                      "episode_vectors": 0}
    table = runner.invoke(app, ["tenants", "--data-dir", str(data_dir)])
    assert table.exit_code == 0 and "episode" in table.stdout


def test_stats_with_vectors_counts_like_with_like(data_dir: Path) -> None:
    stats = run_json(data_dir, "stats", "-t", "acme", "--vectors")
    assert (stats["memories"], stats["vectors"], stats["episodes"], stats["episode_vectors"]) == (3, 3, 1, 1)
    graph_only = run_json(data_dir, "stats", "-t", "acme")
    assert graph_only["vectors"] is None and graph_only["episode_vectors"] is None
    table = runner.invoke(app, ["stats", "-t", "acme", "--vectors", "--data-dir", str(data_dir)])
    assert table.exit_code == 0 and "episode vector records" in table.stdout


def _row(html: str, tenant: str) -> str:
    rows = re.findall(r"<tr>.*?</tr>", html, flags=re.S)
    return next(r for r in rows if f'class="tenant-link">{tenant}<' in r)


@pytest.mark.slow
def test_the_inspector_flags_only_real_disagreement(data_dir: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, **ui_settings()})
    with MemoryCore.open(data_dir, settings=settings) as core:
        client = TestClient(standalone_app(core), base_url="http://127.0.0.1:8766",
                            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        page = client.get("/ui/")
    assert page.status_code == 200
    assert "bad" not in _row(page.text, "acme")  # summarised: 3 memories, 3 memory vectors, 1 episode, 1 vector
    assert "bad" not in _row(page.text, "globex")
    assert _row(page.text, "initech").count('class="num bad"') == 1  # a lost vector is still flagged
    assert _row(page.text, "hooli").count('class="num bad"') == 1  # and a lost summary vector


def test_every_vector_backend_counts_episode_vectors_apart_and_only_in_their_tenant(core: MemoryCore) -> None:
    from memory_core.operator.stats import list_tenants

    for i in range(3):
        core.add_memory("acme", "s1", "ann", f"turn {i} about the harvest")
    core.summarize_session("acme", "s1")
    core.add_memory("globex", "g1", "zed", "globex turn")
    counts = {t.tenant: (t.memories, t.vectors, t.episodes, t.episode_vectors)
              for t in list_tenants(core.operator_parts())}
    assert counts == {"acme": (3, 3, 1, 1), "globex": (1, 1, 0, 0)}
    assert core._vectors.count("globex", {"kind": "episode"}) == 0
    assert core._vectors.count("acme", {"kind": "episode"}) == 1 and core._vectors.count("acme") == 4
