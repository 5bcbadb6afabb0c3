"""Entities in recall and in ``related``: what the query names pulls in the memories that mention it,
one hop reaches memories that share a rare entity, and tenancy and agent privacy hold on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.recall.branches.entity import MAX_LOOKUPS, query_names, weight
from tests.support.backends import open_core, store_backends


@pytest.fixture(params=store_backends("memory", "postgres"))
def core(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    c = open_core(str(request.param), tmp_path / "data", request)
    yield c
    c.close()


def _filler(core: MemoryCore, tenant: str = "acme", n: int = 60) -> None:
    core.add_memories([{"tenant": tenant, "session": "noise", "agent": "ops", "type": "note",
                        "content": f"routine status line {i}: disk usage and backups look fine"} for i in range(n)])


def _reason(core: MemoryCore, ref: str, query: str, **kw: object) -> dict[str, object] | None:
    res = core.recall("acme", query, limit=20, **kw)  # type: ignore[arg-type]
    return next((m.match_reason for m in res.messages if m.ref == ref), None)


def test_a_memory_that_mentions_what_the_query_names_is_found_and_says_which_entity(core: MemoryCore) -> None:
    _filler(core)
    ref = core.add_memory("acme", "s1", "ann", "Rotated the signing key for ledger-svc after the audit.",
                          type="note").ref
    reason = _reason(core, ref, "what changed on ledger-svc")
    assert reason is not None and reason["entities"] == ["ledger-svc"]
    assert float(reason["entity"]) > 0  # type: ignore[arg-type]


def test_one_hop_brings_a_memory_that_shares_a_rare_entity_with_a_found_one(core: MemoryCore) -> None:
    _filler(core)
    first = core.add_memory("acme", "s1", "ann", "The ledger-svc outage was caused by Kestrel Proxy.",
                            type="note").ref
    # shares no word with the query; only the entity "Kestrel Proxy" links it to the first memory
    second = core.add_memory("acme", "s2", "bob", "Kestrel Proxy gets patched on Thursdays by Dana.",
                             type="note").ref
    reason = _reason(core, second, "why was ledger-svc down")
    assert reason is not None, "the hop did not bring the second memory"
    assert reason["entity_via"] == first and "Kestrel Proxy" in reason["entities"]  # type: ignore[operator]


@pytest.mark.slow
def test_the_entity_branch_respects_filters_and_agent_privacy(core: MemoryCore) -> None:
    _filler(core)
    core.add_memory("acme", "s1", "ann", "The ledger-svc outage was caused by Kestrel Proxy.", type="note")
    hidden = core.add_memory("acme", "s2", "bob", "Kestrel Proxy keys live in vault path kv/kestrel.",
                             type="note", visibility="agent").ref
    for viewer in ("ann", None):
        rows = core.recall("acme", "why was ledger-svc down", limit=20, viewer=viewer).messages
        assert hidden not in {m.ref for m in rows}
    assert hidden in {m.ref for m in core.recall("acme", "why was ledger-svc down", limit=20, viewer="bob").messages}
    only_s1 = core.recall("acme", "why was ledger-svc down", limit=20, session="s1").messages
    assert {m.session for m in only_s1} <= {"s1"}


@pytest.mark.slow
def test_another_tenants_entities_never_reach_recall_or_related(core: MemoryCore) -> None:
    _filler(core, "other")
    core.add_memory("other", "s1", "eve", "ledger-svc belongs to Kestrel Proxy team", type="note")
    _filler(core)
    assert all(m.tenant == "acme" for m in core.recall("acme", "ledger-svc Kestrel Proxy", limit=20).messages)
    with pytest.raises(NotFoundError):
        core.related("acme", "Kestrel Proxy")


def test_related_walks_from_an_entity_to_memories_and_on_to_their_entities_with_paths(core: MemoryCore) -> None:
    a = core.add_memory("acme", "s1", "ann", "The ledger-svc outage was caused by Kestrel Proxy.").ref
    b = core.add_memory("acme", "s2", "bob", "Kestrel Proxy is owned by @dana.").ref
    out = core.related("acme", "kestrel proxy", depth=2, limit=10)
    assert out.start.name == "Kestrel Proxy"
    by_ref = {i.ref: i for i in out.items}
    assert {a, b} <= set(by_ref)
    assert by_ref[a].depth == 1 and by_ref[a].path[-1].via == "MENTIONED_BY"
    dana = next(i for i in out.items if i.entity is not None and i.entity.name == "@dana")
    assert dana.depth == 2 and [s.ref for s in dana.path][1] == b
    scores = [i.score for i in out.items]
    assert scores == sorted(scores, reverse=True)
    one = core.related("acme", "kestrel proxy", depth=1, limit=10)
    assert all(i.depth == 1 for i in one.items)


def test_related_from_a_memory_ref_and_a_declared_relation(core: MemoryCore) -> None:
    ref = core.add_memory("acme", "s1", "ann", "we moved billing onto the new cluster", entities=[
        {"name": "billing"}, {"name": "cluster-b"}], relations=[{"from": "billing", "to": "cluster-b",
                                                                "label": "runs on"}]).ref
    out = core.related("acme", ref, depth=1)
    assert {i.entity.name for i in out.items if i.entity is not None} >= {"billing", "cluster-b"}
    rel = core.related("acme", "billing", depth=1)
    hop = next(i for i in rel.items if i.entity is not None and i.entity.name == "cluster-b")
    assert hop.path[-1].via == "RELATED:runs on"


def test_related_lists_the_current_version_of_a_corrected_memory_and_walks_only_through_current_ones(
        core: MemoryCore) -> None:
    old = core.add_memory("acme", "s1", "ann", "ledger-svc went down: Kestrel Proxy and Zorbit Cache.").ref
    new = core.update_memory("acme", old, content="The ledger-svc outage was caused by Kestrel Proxy.", agent="ann")
    out = core.related("acme", "Kestrel Proxy", depth=2, limit=20)
    refs = {i.ref for i in out.items}
    assert new.added.ref in refs and old not in refs
    assert "Zorbit Cache" not in {i.entity.name for i in out.items if i.entity is not None}
    assert all(old not in [s.ref for s in i.path] for i in out.items)


def test_related_hides_what_only_another_agents_private_memory_mentions(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "bob", "Kestrel Proxy creds rotate monthly", visibility="agent")
    with pytest.raises(NotFoundError):
        core.related("acme", "Kestrel Proxy", viewer="ann")
    assert core.related("acme", "Kestrel Proxy", viewer="bob").items


@pytest.mark.parametrize(("kw", "field"), [({"depth": 4}, "depth"), ({"depth": 0}, "depth"), ({"depth": True}, "depth"),
                                           ({"limit": 0}, "limit"), ({"limit": 101}, "limit")])
def test_related_refuses_out_of_range_depth_and_limit(core: MemoryCore, kw: dict[str, object], field: str) -> None:
    core.add_memory("acme", "s1", "ann", "Kestrel Proxy")
    with pytest.raises(InvalidInputError) as err:
        core.related("acme", "Kestrel Proxy", **kw)  # type: ignore[arg-type]
    assert err.value.code == "INVALID_INPUT" and err.value.fields.get("field") == field


def test_related_of_an_unknown_name_or_a_missing_memory_is_not_found(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "Kestrel Proxy")
    for start in ("Nobody Here", "mem:999999", "ent:999999"):
        with pytest.raises(NotFoundError):
            core.related("acme", start)
    with pytest.raises(InvalidInputError):
        core.related("acme", "   ")


def test_the_query_looks_up_its_names_identifiers_and_phrases_but_not_single_plain_words() -> None:
    names = query_names("what did Caroline say about the payments api and ERR_CONN_RESET in research?",
                        skip=frozenset())
    assert "Caroline" in names and "ERR_CONN_RESET" in names and "payments api" in names
    assert "research" not in names and "payments" not in names


def test_agents_the_query_names_are_left_to_the_speaker_signal() -> None:
    assert "Caroline" not in query_names("what did Caroline research?", skip=frozenset({"caroline"}))


def test_lookups_per_query_are_capped_whatever_its_length() -> None:
    assert len(query_names(" ".join(f"Name{i} Other{i}" for i in range(500)), skip=frozenset())) == MAX_LOOKUPS


def test_an_entity_every_memory_mentions_weighs_nothing_and_a_unique_one_everything() -> None:
    assert weight(1000, 1000) == 0.0 and weight(1, 1000) == 1.0
    assert 0.0 < weight(40, 600) < weight(5, 600) < 1.0
