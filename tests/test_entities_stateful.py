"""A hypothesis state machine of the entity graph, in the manner of tests/test_store_stateful.py:
declarations on add (names, case/space variants, aliases, kinds, relations; shared and private;
single and batch), merges by name as each viewer, deletes and reopens.

Invariants against a plain model, after every step: each model entity is exactly one stored
entity whatever alias names it; every tenant's entities, kinds and relations match; what each
viewer lists (names and mention counts) is what the memories it can read mention (agent
closure), and the names and aliases it sees are exactly those such memories declared; no
entity, mention or relation crosses a tenant. The extractor is switched off here (declarations only,
so the model is exact); it has tests of its own.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import open_core
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import memory_core.write.add_rows
from graph.api import entity_norm
from memory_core import MemoryCore, MemoryCoreError
from tests.support.store_checks import LONG

TENANTS = ("acme", "globex")
SESSIONS = ("s1", "s2")
AGENTS = ("alice", "bob")
PROFILES = {"memory": {"max_examples": 200 if LONG else 40, "stateful_step_count": 50 if LONG else 30},
            "persistent": {"max_examples": 40 if LONG else 10, "stateful_step_count": 40 if LONG else 25},
            "postgres": {"max_examples": 20 if LONG else 5, "stateful_step_count": 40 if LONG else 25}}

NAMES = ("Alice", "Payments API", "Falcon", "Bob")
ALIASES = ("al", "PAPI", "the falcon", "pay")
LABELS = ("owns", "uses")
VIEWERS = (None, *AGENTS)


def _variant(name: str, how: int) -> str:
    return (name, name.upper(), name.lower(), f"  {name.replace(' ', '   ')} ")[how]


@dataclass
class EntityModel:
    """Per tenant: model entity -> its normalised aliases and kind; which memory mentions which."""

    norms: dict[str, dict[int, list[str]]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    kinds: dict[str, dict[int, str | None]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    mentions: dict[str, set[int]] = field(default_factory=dict)  # memory ref -> model entities
    relations: set[tuple[str, int, int, str, str]] = field(default_factory=set)  # (tenant, src, dst, label, ref)
    seen: dict[str, dict[str, set[str]]] = field(default_factory=lambda: {t: {} for t in TENANTS})  # norm -> readers
    counter: int = 0

    def find(self, tenant: str, norm: str) -> int | None:
        return next((e for e, ns in self.norms[tenant].items() if norm in ns), None)

    def declare(self, tenant: str, names: list[str], kind: str | None) -> int:
        """As graph.entity_link.link: the first known name decides, unknown names become aliases."""
        norms = [entity_norm(n) for n in names]
        entity = next((e for n in norms if (e := self.find(tenant, n)) is not None), None)
        if entity is None:
            self.counter += 1
            entity = self.counter
            self.norms[tenant][entity], self.kinds[tenant][entity] = [], None
        for n in norms:
            if self.find(tenant, n) is None:
                self.norms[tenant][entity].append(n)
        if kind and self.kinds[tenant][entity] is None:
            self.kinds[tenant][entity] = kind
        return entity

    def merge(self, tenant: str, keep: int, gone: int) -> None:
        self.norms[tenant][keep] += self.norms[tenant].pop(gone)
        kind = self.kinds[tenant].pop(gone)
        self.kinds[tenant][keep] = self.kinds[tenant][keep] or kind
        for ents in self.mentions.values():
            if gone in ents:
                ents.discard(gone)
                ents.add(keep)
        moved = {(t, keep if s == gone else s, keep if d == gone else d, lb, r) if t == tenant else (t, s, d, lb, r)
                 for t, s, d, lb, r in self.relations}
        self.relations = {x for x in moved if x[1] != x[2]}


class EntityMachine(RuleBasedStateMachine):
    backend: ClassVar[str]
    root: ClassVar[Path]
    opener: ClassVar[Callable[[Path], MemoryCore]]

    def __init__(self) -> None:
        super().__init__()
        self.data_dir = Path(tempfile.mkdtemp(dir=self.root)) / "data"
        self.core = self.opener(self.data_dir)
        self.entities = EntityModel()
        self.live: dict[str, dict[str, str | None]] = {t: {} for t in TENANTS}  # ref -> private author or None

    def teardown(self) -> None:
        self.core.close()
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)

    def _readable(self, tenant: str, viewer: str | None) -> set[str]:
        return {ref for ref, owner in self.live[tenant].items() if owner is None or owner == viewer}

    def _visible(self, tenant: str, entity: int, viewer: str | None) -> bool:
        return any(entity in self.entities.mentions.get(ref, ()) for ref in self._readable(tenant, viewer))

    # ---- rules ---------------------------------------------------------------------------
    @rule(data=st.data(), tenant=st.sampled_from(TENANTS), session=st.sampled_from(SESSIONS),
          agent=st.sampled_from(AGENTS), private=st.booleans(), n=st.integers(1, 3), batch=st.booleans())
    def add_with_entities(self, data: st.DataObject, tenant: str, session: str, agent: str, private: bool,
                          n: int, batch: bool) -> None:
        declared: list[dict[str, Any]] = []
        for _ in range(n):
            decl: dict[str, Any] = {"name": _variant(data.draw(st.sampled_from(NAMES)), data.draw(st.integers(0, 3)))}
            aliases = data.draw(st.lists(st.sampled_from(ALIASES), max_size=2, unique=True))
            if aliases:
                decl["aliases"] = aliases
            if (kind := data.draw(st.sampled_from([None, "person", "service"]))) is not None:
                decl["kind"] = kind
            declared.append(decl)
        relations = []
        if len(declared) > 1 and data.draw(st.booleans(), label="relate"):
            relations.append({"from": declared[0]["name"], "to": declared[-1]["name"],
                              "label": data.draw(st.sampled_from(LABELS))})
        content = f"note {sum(map(len, self.live.values()))}"
        item = {"tenant": tenant, "session": session, "agent": agent, "content": content,
                "visibility": "agent" if private else "tenant", "entities": declared, "relations": relations}
        res = self.core.add_memories([item])[0] if batch else self.core.add_memory(**item)
        assert res.created
        self.live[tenant][res.ref] = agent if private else None
        ids = {self.entities.declare(tenant, [d["name"], *d.get("aliases", [])], d.get("kind")) for d in declared}
        for d in declared:  # '' : every agent may read the name; an agent: only its private memories declared it
            for name in (d["name"], *d.get("aliases", [])):
                self.entities.seen[tenant].setdefault(entity_norm(name), set()).add(agent if private else "")
        self.entities.mentions[res.ref] = ids
        for rel in relations:
            src = self.entities.find(tenant, entity_norm(rel["from"]))
            dst = self.entities.find(tenant, entity_norm(rel["to"]))
            assert src is not None and dst is not None
            if src != dst:
                self.entities.relations.add((tenant, src, dst, rel["label"], res.ref))

    @rule(data=st.data(), tenant=st.sampled_from(TENANTS))
    def delete_a_memory(self, data: st.DataObject, tenant: str) -> None:
        if not self.live[tenant]:
            return
        ref = data.draw(st.sampled_from(sorted(self.live[tenant])), label="ref")
        assert self.core.delete_memory_as_operator(tenant, ref)
        del self.live[tenant][ref]
        self.entities.mentions.pop(ref, None)

    @precondition(lambda self: self.backend != "memory")
    @rule()
    def reopen(self) -> None:
        self.core.close()
        self.core = self.opener(self.data_dir)

    @rule(tenant=st.sampled_from(TENANTS), keep=st.sampled_from(NAMES + ALIASES),
          gone=st.sampled_from(NAMES + ALIASES), viewer=st.sampled_from(VIEWERS), how=st.integers(0, 3))
    def merge_entities(self, tenant: str, keep: str, gone: str, viewer: str | None, how: int) -> None:
        k, g = (self.entities.find(tenant, entity_norm(x)) for x in (keep, gone))
        readers = {"", viewer} if viewer else {""}
        named = all(self.entities.seen[tenant].get(entity_norm(x), set()) & readers for x in (keep, gone))
        if k is None or g is None or not named or not self._visible(tenant, k, viewer) \
                or not self._visible(tenant, g, viewer):  # a name the viewer may not read names nothing
            expected = "NOT_FOUND"
        elif k == g:
            expected = "INVALID_INPUT"
        else:
            merged = self.core.merge_entities(tenant, _variant(keep, how), gone, viewer=viewer)
            assert entity_norm(keep) in {entity_norm(a) for a in merged.kept.aliases}
            self.entities.merge(tenant, k, g)
            return
        with pytest.raises(MemoryCoreError) as err:
            self.core.merge_entities(tenant, _variant(keep, how), gone, viewer=viewer)
        assert err.value.code == expected

    # ---- invariants ------------------------------------------------------------------------
    @invariant()
    def entities_match_the_model_for_every_tenant_and_viewer(self) -> None:
        model, graph = self.entities, self.core.graph
        live = {ref for t in TENANTS for ref in self.live[t]}
        for tenant in TENANTS:
            records = graph.entity_records(tenant)
            by_norm = {entity_norm(a): r.id for r in records for a in r.aliases}
            stored = {e: {by_norm.get(n) for n in ns} for e, ns in model.norms[tenant].items()}
            assert all(len(ids) == 1 and None not in ids for ids in stored.values()), "aliases split an entity"
            to_store = {e: next(iter(ids)) for e, ids in stored.items()}
            assert len(set(to_store.values())) == len(to_store) == len(records), "entities merged or extra"
            assert {to_store[e]: k for e, k in model.kinds[tenant].items()} == {r.id: r.kind for r in records}
            assert sorted((s, d, lb, f"mem:{m}") for s, d, lb, m in
                          ((r.src, r.dst, r.label, r.mem_id) for r in graph.all_relations(tenant))) == sorted(
                (to_store[s], to_store[d], lb, ref) for t, s, d, lb, ref in model.relations
                if t == tenant and ref in live)
            for viewer in VIEWERS:
                readable = self._readable(tenant, viewer)
                counts: dict[int, int] = {}
                for ref in readable:
                    for e in model.mentions.get(ref, ()):
                        counts[to_store[e]] = counts.get(to_store[e], 0) + 1
                nodes = self.core.list_entities(tenant, viewer=viewer)
                listed = {e.id: e.mentions for e in nodes}
                assert listed == counts, (tenant, viewer)
                readers = {"", viewer} if viewer else {""}
                from_store = {v: k for k, v in to_store.items()}
                for node in nodes:  # only names some memory the viewer may read declared, the first one its name
                    wanted = {n for n in model.norms[tenant][from_store[node.id]]
                              if model.seen[tenant].get(n, set()) & readers}
                    assert {entity_norm(a) for a in node.aliases} == wanted, "a private alias is shown"
                    assert node.aliases and node.name == node.aliases[0]
                for mems in graph.entity_mentions(tenant, listed, viewer).values():
                    assert {f"mem:{m}" for m in mems} <= readable, "a viewer reads another's private mention"
            for other in TENANTS:
                if other != tenant:
                    assert all(graph.entity(other, r.id, v) is None for r in records for v in VIEWERS)


@pytest.mark.parametrize("backend", ["memory", "persistent", "postgres"])
def test_entities_match_a_plain_model_under_random_declarations_merges_and_deletes(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_core.write.add_rows, "extract_entities", lambda _text: [])

    class Machine(EntityMachine):
        pass

    Machine.backend = backend
    Machine.root = tmp_path
    Machine.opener = staticmethod(lambda data_dir: open_core(backend, data_dir, request))  # type: ignore[assignment]
    run_state_machine_as_test(Machine, settings=settings(**PROFILES[backend], deadline=None,
                                                         suppress_health_check=list(HealthCheck), print_blob=True))
