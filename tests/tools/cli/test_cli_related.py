"""memory-core related through Typer's runner, on a temporary store (embedded Chroma)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.settings import load_settings
from tools.cli.app import app

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in [k for k in os.environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    path = tmp_path / "data"
    with MemoryCore.open(path, settings=load_settings()) as core:
        core.add_memory("acme", "s1", "ann", "The payments-api outage came from Kestrel Proxy.", type="note")
        core.add_memory("acme", "s2", "bob", "Kestrel Proxy is owned by @dana.", type="note")
        core.add_memory("globex", "g1", "zed", "payments-api at globex is fine")
    yield path


def _json(data_dir: Path, *args: str, code: int = 0) -> Any:
    result = runner.invoke(app, [*args, "--data-dir", str(data_dir), "--json"])
    assert result.exit_code == code, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_related_prints_memories_and_entities_with_their_paths_as_json(data_dir: Path) -> None:
    out = _json(data_dir, "related", "payments-api", "--tenant", "acme", "--depth", "3")
    assert out["start"]["name"] == "payments-api"
    kinds = {i["kind"] for i in out["items"]}
    assert kinds == {"memory", "entity"}
    far = next(i for i in out["items"] if i["kind"] == "memory" and "@dana" in i["memory"]["content"])
    # entity -> memory -> entity -> memory: three edges, each step naming the edge it took
    assert far["depth"] == 3 and [s.get("via") for s in far["path"]] == [None, "MENTIONED_BY", "MENTIONS",
                                                                         "MENTIONED_BY"]
    assert far["path"][2]["name"] == "Kestrel Proxy"
    assert all(i["memory"]["tenant"] == "acme" for i in out["items"] if i["kind"] == "memory")


def test_related_as_a_table_names_the_start_and_each_item(data_dir: Path) -> None:
    result = runner.invoke(app, ["related", "Kestrel Proxy", "--tenant", "acme", "--data-dir", str(data_dir)])
    assert result.exit_code == 0 and "Kestrel Proxy" in result.stdout and "@dana" in result.stdout


def test_related_of_an_unknown_entity_exits_not_found_and_a_bad_depth_is_usage(data_dir: Path) -> None:
    assert _json(data_dir, "related", "Nobody", "--tenant", "acme", code=3)["error"]["code"] == "NOT_FOUND"
    assert _json(data_dir, "related", "payments-api", "--tenant", "acme", "--depth", "9",
                 code=2)["error"]["code"] == "INVALID_INPUT"
    assert _json(data_dir, "related", "payments-api", code=2)["error"]["code"] == "TENANT_REQUIRED"


def test_the_cli_states_the_librarys_depth_and_limit_caps() -> None:
    from memory_core.entities import related as lib
    from tools.cli import related as cli

    assert (cli.MAX_DEPTH, cli.MAX_LIMIT) == (lib.MAX_DEPTH, lib.MAX_LIMIT)
