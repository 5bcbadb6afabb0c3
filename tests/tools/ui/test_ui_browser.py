"""The inspector in a real browser: Debian's headless Chromium driven over the DevTools protocol
against `memory-core ui` running as a subprocess. Logs in, opens a tenant, pages a session,
opens a memory, clicks through the graph, runs a search, and checks that a memory holding HTML
stays inert. Screenshots go to .artifacts/ui-screenshots/ (override: MEMORY_CORE_TEST_UI_SHOTS).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from testbed.paths import ROOT
from tests.support.ui_store import HOSTILE, OPERATOR_TOKEN, make_store, running_ui

SHOTS = Path(os.environ.get("MEMORY_CORE_TEST_UI_SHOTS", ROOT / ".artifacts" / "ui-screenshots"))

pytest.importorskip("websockets", reason="websockets (a dev dependency) drives Chromium's DevTools protocol")
from tests.support.cdp import Page, chromium_page, find_chromium  # noqa: E402

CHROMIUM = find_chromium()
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None, reason="no system Chromium: `make chromium` installs Debian's package (apt-get install chromium)"
)]


def text(page: Page, selector: str) -> str:
    return str(page.eval(f"document.querySelector({json.dumps(selector)})?.innerText ?? ''"))


def count(page: Page, selector: str) -> int:
    return int(page.eval(f"document.querySelectorAll({json.dumps(selector)}).length"))


def correct_a_fact(data: Path, config: Path) -> tuple[str, str, str]:
    """A fact about an entity corrected with update_memory (in s2): the old ref, the new one, the entity's."""
    settings = load_settings(config, environ={}, overrides={"embedding": {"provider": "hash"}})
    with MemoryCore.open(data, settings=settings, embedder=HashEmbedder()) as core:
        old = core.add_memory("acme", "s2", "planner", "The Orion outage lasted 40 minutes.",
                              entities=[{"name": "Orion", "kind": "incident"}]).ref
        new = core.update_memory("acme", old, content="The Orion outage lasted 55 minutes.").added.ref
        entity = core._graph.entity_by_name("acme", "orion", None)
        assert entity is not None
        return old, new, entity.ref


def test_an_operator_inspects_the_store_in_a_real_browser(tmp_path: Path) -> None:
    data, config, refs = make_store(tmp_path)
    forty, fifty_five, orion = correct_a_fact(data, config)
    with running_ui(data, config) as url, chromium_page(str(CHROMIUM)) as page:
        # log in: an unauthenticated visit lands on the form
        page.goto(url)
        page.wait_for("document.querySelector('#login-form') !== null")
        page.type_into("#token", OPERATOR_TOKEN)
        page.click_and_wait("#login-submit", "document.querySelector('#tenants') !== null")
        assert "acme" in text(page, "#tenants") and "globex" in text(page, "#tenants")
        assert count(page, "svg.spark rect") > 0
        page.screenshot(SHOTS / "tenants.png")

        # a tenant, then its session
        page.click_and_wait("a.tenant-link[href*='t=acme']", "document.querySelector('#sessions') !== null")
        assert text(page, "#sessions").splitlines()[1].startswith("s2")
        page.click_and_wait("a.session-link[href*='s=s1']", "document.querySelector('#timeline') !== null")
        assert "Handoff two" in text(page, "#summary")
        assert count(page, "#timeline > li.item") == 25
        first = page.eval("document.querySelector('#timeline > li.item').dataset.ref")
        assert first == refs.second_handoff
        highlighted = page.eval("getComputedStyle(document.querySelector('#timeline > li.handoff')).backgroundColor")
        plain = page.eval(
            "getComputedStyle(document.querySelector('#timeline > li.item:not(.handoff)')).backgroundColor")
        assert highlighted != plain
        # the HTML memory is on this page: shown as text, nothing ran, no element injected
        hostile = f"#timeline > li[data-ref='{refs.hostile}'] .content"
        assert text(page, hostile) == HOSTILE
        assert count(page, "#timeline img") == 0 and count(page, "#timeline b") == 0
        assert "pwned" not in page.eval("document.title")
        page.screenshot(SHOTS / "session.png")

        # page the session by its cursor: no repeats, continues where the first page stopped
        page1 = page.eval("[...document.querySelectorAll('#timeline > li.item')].map(li => li.dataset.ref)")
        page.click_and_wait("#older", "document.querySelectorAll('#timeline > li.item').length > 0")
        page2 = page.eval("[...document.querySelectorAll('#timeline > li.item')].map(li => li.dataset.ref)")
        assert len(page2) == 25 and not set(page1) & set(page2)
        assert int(page1[-1].split(":")[1]) == int(page2[0].split(":")[1]) + 1

        # open a memory: the first handoff, with its chain and its graph
        page.goto(f"{url}memory?t=acme&ref={refs.first_handoff}")
        page.wait_for("document.querySelectorAll('#graph svg g.node').length > 3")
        assert text(page, "#memory-content") == "Handoff one: rotate the staging key next."
        assert refs.second_handoff in text(page, "#chain")
        assert text(page, "#graph-root") == refs.first_handoff
        depth1 = count(page, "#graph svg g.node")
        page.click("#depths button[data-depth='2']")
        page.wait_for(f"document.querySelectorAll('#graph svg g.node').length > {depth1}")
        page.eval("document.querySelector('#graph-card').scrollIntoView({block: 'end'})")
        page.screenshot(SHOTS / "memory-graph.png")

        # click through the graph: centre on the newer handoff, then open it
        page.click(f"#graph svg g.node[data-id='{refs.second_handoff}'] circle")
        page.wait_for(f"document.querySelector('#graph-root')?.innerText === '{refs.second_handoff}'")
        page.click_and_wait("#graph-open", "document.querySelector('#memory-ref') !== null")
        assert text(page, "#memory-ref") == refs.second_handoff
        assert "Handoff two" in text(page, "#memory-content")
        assert "Staging Key" in text(page, "#entities")

        # its entity in the graph (a diamond): click through to the entity's page and its mentions
        # (the extractor also finds names in the text, e.g. "Handoff": pick the declared one by its label)
        page.wait_for("document.querySelector('#graph svg g.node.ENTITY') !== null")
        entity = page.eval("[...document.querySelectorAll('#graph svg g.node.ENTITY')]"
                           ".find(g => g.querySelector('text').textContent === 'Staging Key')?.dataset.id")
        assert entity, "the declared entity is drawn in the graph view"
        page.click_and_wait(f"#graph svg g.node[data-id='{entity}'] rect",
                            "document.querySelector('#entity-name') !== null")
        assert text(page, "#entity-name") == "Staging Key"
        assert refs.second_handoff in text(page, "#mentions")
        page.goto(f"{url}memory?t=acme&ref={refs.second_handoff}")
        page.wait_for("document.querySelector('#memory-ref') !== null")

        # the HTML memory's own page: its text verbatim, inert
        page.goto(f"{url}memory?t=acme&ref={refs.hostile}")
        page.wait_for("document.querySelectorAll('#graph svg g.node').length > 1")
        assert text(page, "#memory-content") == HOSTILE
        assert count(page, "main img") == 0 and "pwned" not in page.eval("document.title")
        assert count(page, "#graph svg text") > 1  # labels with the HTML text were written as text

        # search from the nav: rows with confidence and match_reason
        page.click_and_wait("#nav-search", "document.querySelector('#search-form') !== null")
        page.type_into("#q", "staging key rotated")
        page.click_and_wait("#search-submit", "document.querySelector('#results') !== null")
        assert count(page, "#results > li.item") > 0
        top = text(page, "#results > li.item")
        assert "Handoff two" in top and "confidence" in top and "signal = confidence" in top
        assert "bm25 =" in top and "cosine =" in top
        page.screenshot(SHOTS / "search.png")

        # a fact stored three times is one row marked ×3, with links to the other two copies
        page.goto(f"{url}search?t=acme&q=where+does+ledger-svc+read+its+feature+flags")
        page.wait_for("document.querySelector('#results') !== null")
        flags = "[...document.querySelectorAll('#results > li.item')].find(li => li.innerText.includes('/etc/flags/'))"
        assert page.eval(f"{flags}.querySelector('.badge.repeats').innerText") == "×3"
        assert page.eval(f"{flags}.querySelector('a.ref').innerText") == refs.restated[-1]
        also = page.eval(f"[...{flags}.querySelectorAll('a.also-ref')].map(a => a.innerText)")
        assert also == [refs.restated[1], refs.restated[0]]
        page.eval(f"{flags}.scrollIntoView({{block: 'center'}})")
        page.screenshot(SHOTS / "search-repeats.png")
        page.click_and_wait(f"a.also-ref[href$='{refs.restated[0].replace(':', '%3A')}']",
                            "document.querySelector('#memory-ref') !== null")
        assert text(page, "#memory-ref") == refs.restated[0]

        # a handoff search says its rows come newest first, above bars drawn as "admitted", not ranked
        page.click_and_wait("#nav-search", "document.querySelector('#search-form') !== null")
        page.type_into("#q", "rotate the staging key")
        page.eval("document.querySelector('select[name=type]').value = 'handoff'")
        page.click_and_wait("#search-submit", "document.querySelector('#results') !== null")
        note = text(page, "#order-note")
        assert note.startswith("Newest first") and "not a ranking" in note
        assert page.eval("[...document.querySelectorAll('#results a.ref')].map(a => a.innerText)") == [
            refs.second_handoff, refs.first_handoff]
        assert count(page, "#results .score.admitted") == 2
        assert text(page, "#results > li.item .by-time") == "· #1 by time"
        page.screenshot(SHOTS / "search-handoffs.png")

        # an entity page: the corrected fact once, current, its old version folded under it
        page.goto(f"{url}entity?t=acme&ref={orion}")
        page.wait_for("document.querySelector('#mentions') !== null")
        assert page.eval("[...document.querySelectorAll('#mentions > li.item')].map(li => li.dataset.ref)") == [
            fifty_five]
        assert not page.eval("document.querySelector('#mentions details.older').open")
        assert not page.eval(f"document.querySelector('[data-version=\"{forty}\"]').checkVisibility()")
        page.click("#mentions details.older summary")
        page.wait_for(f"document.querySelector('[data-version=\"{forty}\"]').checkVisibility()")
        assert "40 minutes" in text(page, "#mentions details.older")
        page.screenshot(SHOTS / "entity-history.png")
        page.click_and_wait("#mentions details.older summary a", "document.querySelector('#chain') !== null")
        assert text(page, "#memory-ref") == fifty_five and forty in text(page, "#chain")

        page.click_and_wait("#nav-health", "document.querySelector('#doctor') !== null")
        page.wait_for("document.querySelector('#doctor-status')?.innerText.includes('agree')", timeout=30)
        page.screenshot(SHOTS / "health.png")
        assert page.exceptions == []
