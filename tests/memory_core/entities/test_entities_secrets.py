"""Entities the model provider names pass the secrets guard too (issue 46, point 3): an entity named
after a secret, an alias or kind that is one, and a relation labelled with one or ending at a dropped
entity are dropped before they are linked — the server writes them itself, so under ``reject`` as
under ``redact`` nothing is refused, and ``allow`` links them as named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.api import EntitySpec, RelationSpec
from memory_core import MemoryCore
from memory_core.entities.model import ModelEntities
from testbed.secrets_corpus import Fake
from tests.support.backends import open_core

F = Fake(4648)
GH, PW = F.github_classic(), F.password()
GL = "glpat-" + F.chars("abcdefghijklmnopqrstuvwxyz0123456789", 20)


class EchoingModel:
    """A model that names a token it was never shown, as a confused model might."""

    def extract(self, text: str) -> ModelEntities:
        return ModelEntities(
            [EntitySpec("Priya", "person"), EntitySpec(GH, "token"), EntitySpec("CI bot", GL),
             EntitySpec("Zeta Corp", "org", (f"password={PW}",))],
            [RelationSpec("Priya", "Zeta Corp", "works at"), RelationSpec("Priya", GH, "holds"),
             RelationSpec("Priya", "CI bot", f"password={PW}")])


@pytest.fixture(params=["redact", "reject", "allow"])
def core(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core("memory", tmp_path / "d", request, security={"secrets": request.param}, model_provider={
        "enabled": True, "extract_entities": True, "model": "openai/test-model", "api_base": "http://127.0.0.1:9"})
    assert c._entity_worker is not None
    c._entity_worker.model = EchoingModel()
    yield c
    c.close()


def test_entities_a_model_names_after_secrets_are_never_linked(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "she joined the company last week")
    assert core._entity_worker is not None and core._entity_worker.drain(60)
    names = {e.name: (e.kind, e.aliases) for e in core.list_entities("acme")}
    labels = [r.label for r in core._graph.all_relations("acme")]
    if core._writer.guard.active:
        assert names == {"Priya": ("person", ("Priya",)), "CI bot": (None, ("CI bot",)),
                         "Zeta Corp": ("org", ("Zeta Corp",))}
        assert labels == ["works at"]
    else:
        assert GH in names and labels
