"""The inspector shows entities where a memory's neighbours are shown: the memory page lists them
(the operator sees every alias, private ones included), the graph view has them as nodes with
MENTIONS edges, and an entity page lists its names and the memories that mention it."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from tests.support.ui_store import OPERATOR_TOKEN, ui_settings
from tools.ui import standalone_app

BASE = "http://127.0.0.1:8766"


def test_memory_page_graph_and_entity_page_show_a_memorys_entities(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, **ui_settings()})
    with MemoryCore.open(tmp_path / "d", settings=settings, embedder=HashEmbedder(), in_memory_vectors=True) as core:
        private = core.add_memory("acme", "s1", "ann", "mine", visibility="agent",
                                  entities=[{"name": "Heron", "kind": "project", "aliases": ["<b>ann-heron</b>"]}]).ref
        shared = core.add_memory("acme", "s1", "ann", "the release", entities=[{"name": "heron"}]).ref
        heron = core._graph.entity_by_name("acme", "heron", None)
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


def _quoted(ref: str) -> str:
    return ref.replace(":", "%3A")


def test_the_entity_page_shows_current_facts_and_folds_superseded_versions_with_a_link_to_history(
        tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, **ui_settings()})
    with MemoryCore.open(tmp_path / "d", settings=settings, embedder=HashEmbedder(), in_memory_vectors=True) as core:
        orion = [{"name": "Orion", "kind": "incident"}]
        forty = core.add_memory("acme", "ops", "ann", "The Orion outage lasted 40 minutes.", entities=orion).ref
        fifty_five = core.update_memory("acme", forty, content="The Orion outage lasted 55 minutes.").added.ref
        runbook = core.add_memory("acme", "ops", "bob", "Orion's runbook is in the old wiki.", entities=orion).ref
        moved = core.update_memory("acme", runbook, content="The runbook is in the handbook now.").added.ref
        entity = core._graph.entity_by_name("acme", "orion", None)
        assert entity is not None
        client = TestClient(standalone_app(core), base_url=BASE, headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        html = client.get("/ui/entity", params={"t": "acme", "ref": entity.ref}).text
        mentions = html[html.index('id="mentions"'):]
        # the current facts are the top-level rows; "40 minutes" is not one of them
        top = re.findall(r'<li class="item([^"]*)" data-ref="(mem:\d+)"', mentions)
        assert top == [(" superseded", runbook), ("", fifty_five)]
        current = mentions[mentions.index(f'data-ref="{fifty_five}"'):]
        older = current[current.index('<details class="older"'):current.index("</details>")]
        assert "1 older version" in older and "40 minutes" in older
        assert f'data-version="{forty}"' in older and "superseded" in older
        assert f'href="/ui/memory?t=acme&amp;ref={_quoted(fifty_five)}#chain"' in current  # its history
        gone = mentions[mentions.index(f'data-ref="{runbook}"'):mentions.index(f'data-ref="{fifty_five}"')]
        assert 'class="badge superseded"' in gone
        assert f'class="current-ref" href="/ui/memory?t=acme&amp;ref={_quoted(moved)}">{moved}<' in gone
        # the history the link opens: every version, newest first, the old ones marked
        page = client.get("/ui/memory", params={"t": "acme", "ref": forty}).text
        assert 'class="badge superseded"' in page[:page.index('id="memory-content"')]
        chain = page[page.index('id="chain"'):]
        assert chain.index(fifty_five) < chain.index(forty) and "valid to" in chain
        timeline = client.get("/ui/session", params={"t": "acme", "s": "ops"}).text  # marked wherever rows show
        old_row = timeline[timeline.index(f'data-ref="{forty}"'):]
        assert 'class="badge superseded"' in old_row[:old_row.index("</li>")]
        new_row = timeline[timeline.index(f'data-ref="{fifty_five}"'):]
        assert 'class="badge superseded"' not in new_row[:new_row.index("</li>")]
        assert f"corrects {forty}" in new_row[:new_row.index("</li>")]
        assert client.get("/ui/entity", params={"t": "globex", "ref": entity.ref}).status_code == 404
