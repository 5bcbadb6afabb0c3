"""A hypothesis state machine of the entity graph, in the manner of tests/reliability/test_store_stateful.py:
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
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import memory_core.write.add_rows
from graph.api import entity_norm
from memory_core import MemoryCore, MemoryCoreError
from tests.support.backends import open_core, store_backends
from tests.support.store_checks import LONG

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

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
    """Per tenant, the alias keys as graph.entity_link writes them: a plain key per name (its
    entity and who may read it: '' or private authors) and the private keys of names that had to
    make way (agent, name) -> entity; kinds; which memory mentions which entity."""

    plain: dict[str, dict[str, int]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    seen: dict[str, dict[str, set[str]]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    private: dict[str, dict[tuple[str, str], int]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    order: dict[str, dict[int, list[str]]] = field(default_factory=lambda: {t: {} for t in TENANTS})  # names by pos
    kinds: dict[str, dict[int, str | None]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    mentions: dict[str, set[int]] = field(default_factory=dict)  # memory ref -> model entities
    relations: set[tuple[str, int, int, str, str]] = field(default_factory=set)  # (tenant, src, dst, label, ref)
    counter: int = 0

    def find(self, tenant: str, norm: str, viewer: str | None, shared_first: bool = False) -> int | None:
        """The entity ``norm`` names for ``viewer``: its private key, else a plain key it may read
        (``shared_first``: a shared memory's declaration, the other way round)."""
        readers = {"", viewer} if viewer else {""}
        plain = self.plain[tenant][norm] if norm in self.plain[tenant] and \
            self.seen[tenant].get(norm, set()) & readers else None
        mine = self.private[tenant].get((viewer, norm)) if viewer is not None else None
        return (plain if plain is not None else mine) if shared_first else (mine if mine is not None else plain)

    def names(self, tenant: str, entity: int, viewer: str | None) -> set[str]:
        """The normalised names of ``entity`` ``viewer`` may read."""
        readers = {"", viewer} if viewer else {""}
        plain = {n for n, e in self.plain[tenant].items() if e == entity and self.seen[tenant].get(n, set()) & readers}
        return plain | {n for (a, n), e in self.private[tenant].items() if e == entity and a == viewer}

    def declare(self, tenant: str, agent: str, shared: bool, specs: list[tuple[list[str], str | None]]) -> list[int]:
        """As graph.entity_link.link: names another agent's private key holds make way, the first
        name the writer may read decides, its unknown names become aliases; returns the entities."""
        view = "" if shared else agent
        wanted = list(dict.fromkeys(entity_norm(n) for names, _kind in specs for n in names))
        for n in wanted:
            if n in self.plain[tenant] and not self.seen[tenant].get(n, set()) & {"", agent}:
                entity = self.plain[tenant].pop(n)
                for reader in self.seen[tenant].pop(n, set()):
                    self.private[tenant].setdefault((reader, n), entity)
        known = {n: e for n in wanted if (e := self.find(tenant, n, agent, shared)) is not None}
        held = {n for n in wanted if n in self.plain[tenant]}
        out = []
        for names, kind in specs:
            norms = [entity_norm(n) for n in names]
            entity = next((known[n] for n in norms if n in known), None)
            if entity is None:
                self.counter += 1
                entity = self.counter
                self.order[tenant][entity], self.kinds[tenant][entity] = [], None
            for n in norms:
                if n not in known or (shared and n not in held and known[n] == entity):
                    self.plain[tenant][n] = entity
                    held.add(n)
                    known.setdefault(n, entity)
                    self.order[tenant][entity].append(n)
            if kind and self.kinds[tenant][entity] is None:
                self.kinds[tenant][entity] = kind
            out.append(entity)
        for n in wanted:
            if n in held:
                self.seen[tenant].setdefault(n, set()).add(view)
        return out

    def merge(self, tenant: str, keep: int, gone: int) -> None:
        self.plain[tenant] = {n: keep if e == gone else e for n, e in self.plain[tenant].items()}
        self.private[tenant] = {k: keep if e == gone else e for k, e in self.private[tenant].items()}
        self.order[tenant][keep] += self.order[tenant].pop(gone)
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
        self.stored: dict[str, dict[int, int]] = {t: {} for t in TENANTS}  # model entity -> stored id

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
        specs = [([d["name"], *d.get("aliases", [])], d.get("kind")) for d in declared]
        specs += [([r[end]], None) for r in relations for end in ("from", "to")]
        ids = self.entities.declare(tenant, agent, not private, specs)
        self.entities.mentions[res.ref] = set(ids)
        for (names, _kind), entity in zip(specs, ids, strict=True):  # the store resolves each name as its author
            stored = self.core._graph.entity_ids(tenant, [names[0]], agent if private else None).get(names[0])
            assert stored is not None and self.stored[tenant].setdefault(entity, stored) == stored, "resolved apart"
        for rel in relations:
            src = self.entities.find(tenant, entity_norm(rel["from"]), agent, not private)
            dst = self.entities.find(tenant, entity_norm(rel["to"]), agent, not private)
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
        k, g = (self.entities.find(tenant, entity_norm(x), viewer) for x in (keep, gone))
        if k is None or g is None or not self._visible(tenant, k, viewer) \
                or not self._visible(tenant, g, viewer):  # a name the viewer may not read names nothing
            expected = "NOT_FOUND"
        elif k == g:
            expected = "INVALID_INPUT"
        else:
            merged = self.core.merge_entities(tenant, _variant(keep, how), gone, viewer=viewer)
            assert entity_norm(keep) in {entity_norm(a) for a in merged.kept.aliases}
            assert merged.kept.id == self.stored[tenant][k]
            self.entities.merge(tenant, k, g)
            del self.stored[tenant][g]
            return
        with pytest.raises(MemoryCoreError) as err:
            self.core.merge_entities(tenant, _variant(keep, how), gone, viewer=viewer)
        assert err.value.code == expected

    # ---- invariants ------------------------------------------------------------------------
    @invariant()
    def entities_match_the_model_for_every_tenant_and_viewer(self) -> None:
        model, graph = self.entities, self.core._graph
        live = {ref for t in TENANTS for ref in self.live[t]}
        for tenant in TENANTS:
            records = graph.entity_records(tenant)
            to_store = self.stored[tenant]
            assert set(to_store) == set(model.kinds[tenant]), "a model entity was never resolved"
            assert len(set(to_store.values())) == len(to_store) == len(records), "entities merged or extra"
            assert set(to_store.values()) == {r.id for r in records}
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
                from_store = {v: k for k, v in to_store.items()}
                for node in nodes:  # only names some memory the viewer may read declared, the first one its name
                    wanted = model.names(tenant, from_store[node.id], viewer)
                    assert {entity_norm(a) for a in node.aliases} == wanted, "a private alias is shown"
                    assert node.name == (node.aliases[0] if node.aliases else node.ref)
                    for n in wanted:  # and each of them names this entity for the viewer
                        assert model.find(tenant, n, viewer) is not None
                for mems in graph.entity_mentions(tenant, listed, viewer).values():
                    assert {f"mem:{m}" for m in mems} <= readable, "a viewer reads another's private mention"
            for other in TENANTS:
                if other != tenant:
                    assert all(graph.entity(other, r.id, v) is None for r in records for v in VIEWERS)


@pytest.mark.parametrize("backend", store_backends("memory", "persistent", "postgres"))
def test_entities_match_a_plain_model_under_random_declarations_merges_and_deletes(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_core.write.add_rows, "extract_entities", lambda _text: [])

    class Machine(EntityMachine):
        pass

    Machine.backend = backend
    Machine.root = tmp_path
    # the model links every add it is given: write-time hygiene (an agent's exact repeat) has its own tests
    Machine.opener = staticmethod(  # type: ignore[assignment]
        lambda data_dir: open_core(backend, data_dir, request, hygiene={"enabled": False}))
    run_state_machine_as_test(Machine, settings=settings(**PROFILES[backend], deadline=None,
                                                         suppress_health_check=list(HealthCheck), print_blob=True))
