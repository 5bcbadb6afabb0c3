"""The inspector and facts in time (issue 49): the memory page shows a version's validity and what ended it,
reads a chain as of an instant, the tenant page lists what is due for review, search takes as_of; another
tenant's rows never show."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from tests.support.ui_store import OPERATOR_TOKEN, ui_settings
from tools.ui import standalone_app

BASE = "http://127.0.0.1:8766"
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
T1 = "2026-03-01T00:00:00+00:00"


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[tuple[TestClient, MemoryCore]]:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, **ui_settings()})
    core = MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder())
    yield TestClient(standalone_app(core), base_url=BASE, headers=OPERATOR, follow_redirects=False), core
    core.close()


def test_memory_page_shows_validity_what_ended_it_and_the_version_as_of_a_date(
        ui: tuple[TestClient, MemoryCore]) -> None:
    client, core = ui
    old = core.add_memory("acme", "s", "ann", "Staging runs in eu-west-1", type="fact", timestamp=T1).ref
    new = core.update_memory("acme", old, content="Staging runs in eu-west-2", agent="bob").added.ref
    core.end_memory("acme", new, "staging was retired", agent="ops")
    page = client.get("/ui/memory", params={"t": "acme", "ref": new}).text
    assert 'id="ended-badge"' in page and "staging was retired" in page and "by ops" in page
    assert 'id="valid-to"' in page and "open (current)" not in page
    assert "corrected" in page  # the chain says what ended the old version
    then = client.get("/ui/memory", params={"t": "acme", "ref": new, "as_of": "2026-03-02T00:00:00+00:00"})
    assert then.status_code == 200 and 'id="as-of-note"' in then.text and "eu-west-1" in then.text
    assert f'data-ref="{old}"' in then.text
    bad = client.get("/ui/memory", params={"t": "acme", "ref": new, "as_of": "someday"})
    assert bad.status_code == 400


def test_tenant_page_lists_only_its_own_memories_due_for_review(ui: tuple[TestClient, MemoryCore]) -> None:
    client, core = ui
    due = core.add_memory("acme", "s", "ann", "The deploy freeze holds until Friday", type="fact",
                          review_after=T1).ref
    later = core.add_memory("acme", "s", "ann", "The new index ships next year", type="fact",
                            review_after="2099-01-01T00:00:00+00:00").ref
    foreign = core.add_memory("globex", "s", "gus", "Globex freeze holds", type="fact", review_after=T1).ref
    ended = core.add_memory("acme", "s", "ann", "An old freeze", type="fact", review_after=T1).ref
    core.end_memory("acme", ended, "lifted")
    page = client.get("/ui/tenant", params={"t": "acme"}).text
    assert f">{due}<" in page and f">{later}<" not in page and f">{ended}<" not in page
    assert "Globex freeze" not in page and f">{foreign}<" not in page


def test_search_takes_as_of_and_include_stale(ui: tuple[TestClient, MemoryCore]) -> None:
    client, core = ui
    old = core.add_memory("acme", "s", "ann", "The primary database is Postgres 13", type="fact",
                          timestamp=T1).ref
    core.update_memory("acme", old, content="The primary database is Postgres 16")
    page = client.get("/ui/search", params={"t": "acme", "q": "primary database",
                                            "as_of": "2026-03-02T00:00:00+00:00", "include_stale": "on"}).text
    assert "Postgres 13" in page and "Postgres 16" not in page
