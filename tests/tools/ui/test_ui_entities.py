"""The inspector shows entities where a memory's neighbours are shown: the memory page lists them
(the operator sees every alias, private ones included), the graph view has them as nodes with
MENTIONS edges, and an entity page lists its names and the memories that mention it."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings.schema import load_settings
from tests.support.ui_store import OPERATOR_TOKEN, ui_settings
from tools.ui import standalone_app

BASE = "http://127.0.0.1:8766"


def test_memory_page_graph_and_entity_page_show_a_memorys_entities(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, **ui_settings()})
    with MemoryCore.open(tmp_path / "d", settings=settings, embedder=HashEmbedder(), in_memory_vectors=True) as core:
        private = core.add_memory("acme", "s1", "ann", "mine", visibility="agent",
                                  entities=[{"name": "Heron", "kind": "project", "aliases": ["<b>ann-heron</b>"]}]).ref
        shared = core.add_memory("acme", "s1", "ann", "the release", entities=[{"name": "heron"}]).ref
        heron = core.graph.entity_by_name("acme", "heron", None)
        assert heron is not None
        client = TestClient(standalone_app(core), base_url=BASE, headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        page = client.get("/ui/memory", params={"t": "acme", "ref": shared}).text
        entities = page[page.index('id="entities"'):]
        assert f'href="/ui/entity?t=acme&amp;ref=ent%3A{heron.id}"' in entities and ">Heron<" in entities
        assert "&lt;b&gt;ann-heron&lt;/b&gt;" in entities and "<b>ann-heron" not in page  # the operator sees all, inert
        graph = client.get("/ui/api/graph", params={"t": "acme", "ref": shared, "depth": 1}).json()
        node = next(n for n in graph["nodes"] if n["id"] == heron.ref)
        assert node["kind"] == "ENTITY" and node["label"] == "Heron"
        assert {"source": shared, "target": heron.ref, "kind": "MENTIONS"} in graph["edges"]
        r = client.get("/ui/entity", params={"t": "acme", "ref": heron.ref})
        assert r.status_code == 200 and "project" in r.text
        assert set(re.findall(r'data-ref="(mem:\d+)"', r.text)) == {private, shared}
        assert client.get("/ui/entity", params={"t": "globex", "ref": heron.ref}).status_code == 404
        assert client.get("/ui/entity", params={"t": "acme", "ref": "bogus"}).status_code == 400
