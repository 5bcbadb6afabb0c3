"""The official MCP memory server (@modelcontextprotocol/server-memory): its file, and the whole graph its
``read_graph`` tool and ``memory://knowledge-graph`` resource return (issue 47.7). The fixtures under
``tests/fixtures/import/mcp-memory/server-2026.8.31`` were written by the server itself (see README.txt).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.importers import import_source
from memory_core.operator.transfer import export_tenant
from testbed.paths import ROOT
from tests.support.backends import open_core

SERVER = ROOT / "tests" / "fixtures" / "import" / "mcp-memory" / "server-2026.8.31"


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core("memory", tmp_path / "data", request)
    yield core
    core.close()


def rows(core: MemoryCore, tenant: str = "acme") -> list[dict[str, Any]]:
    return list(export_tenant(core.operator_parts(), tenant))


def test_the_servers_whole_graph_json_imports_as_its_file_does(store: MemoryCore) -> None:
    graph = import_source(store.operator_parts(), "mcp-memory", SERVER / "read_graph.json", "acme")
    assert (graph.errors, graph.written) == (0, 9)
    assert graph.by_kind == {"observation": {"read": 5, "written": 5, "skipped": 0},
                             "entity": {"read": 1, "written": 1, "skipped": 0},
                             "relation": {"read": 3, "written": 3, "skipped": 0}}
    contents = {r["content"] for r in rows(store)}
    assert {"Dana Ortiz: Based in Montréal", "Ingestion Jobs (service)", "Dana Ortiz visits 北京办公室"} <= contents
    first = next(r for r in rows(store) if r["content"] == "Dana Ortiz: Runs the data platform team")
    assert first["metadata"]["mcp-memory"] == {"entity": "Dana Ortiz", "entityType": "person"}
    # the same graph, as its file
    same = import_source(store.operator_parts(), "mcp-memory", SERVER / "memory.jsonl", "acme")
    assert (same.written, same.skipped, same.errors) == (0, 9, 0)


def test_a_whole_graph_names_the_line_and_field_of_a_bad_entity(store: MemoryCore, tmp_path: Path) -> None:
    text = (SERVER / "read_graph.json").read_text(encoding="utf-8")
    broken = tmp_path / "graph.json"
    broken.write_text(text.replace('"name": "Ingestion Jobs"', '"name": ""'), encoding="utf-8")
    report = import_source(store.operator_parts(), "mcp-memory", broken, "acme", skip_bad=True)
    line = text[: text.index('"name": "Ingestion Jobs"')].count("\n")  # the entity's "{" is the line before
    assert [(e["line"], e["field"]) for e in report.error_items] == [(line, "name")]
    assert report.written == 8
