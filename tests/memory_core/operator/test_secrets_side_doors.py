"""Issue 46, point 3: the JSONL import's entity records pass the secrets guard (names, aliases,
kinds, relation labels), and doctor scans every string a store holds — entity names, aliases and
kinds, relation labels, names that address rows, hashes in metadata — not only the content."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.operator.doctor.run import check_stores, repair_stores
from memory_core.operator.jsonl_import import import_lines
from memory_core.settings import load_settings
from memory_core.write.rows import content_hash
from testbed.secrets_corpus import Fake

F = Fake(4647)
GH, PW = F.github_classic(), F.password()
GL = "glpat-" + F.chars("abcdefghijklmnopqrstuvwxyz0123456789", 20)  # lower case: a valid entity kind


def open_store(path: Path, policy: str) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "security": {"secrets": policy}})
    return MemoryCore.open(path, settings=settings, embedder=HashEmbedder())


def line(n: int, text: str = "a clean note about the deploy", session: str = "imp", **more: object) -> str:
    return json.dumps({"ref": f"mem:{n}", "tenant": "acme", "session": session, "agent": "c", "type": "note",
                       "salience": 0.5, "timestamp": f"2026-03-01T10:00:0{n}+00:00", "content": text,
                       "content_hash": content_hash(text), **more})


ENTITIES = {"entities": [{"ref": "ent:7", "name": GH, "kind": GL, "aliases": [GH, "deploy key"]},
                         {"ref": "ent:8", "name": "CI"}],
            "relations": [{"from": "ent:7", "to": "ent:8", "label": f"password={PW}"}]}


def stored_strings(core: MemoryCore) -> str:
    entities = [[e.name, e.kind, e.aliases] for e in core.list_entities("acme")]
    return json.dumps([entities, [r.label for r in core._graph.all_relations("acme")],
                       [r.as_row() for r in core.operator_parts().maintenance.memory_rows("acme", None)]], default=str)


def test_an_imported_line_s_entities_are_stored_redacted_and_doctor_finds_nothing(tmp_path: Path) -> None:
    with open_store(tmp_path / "data", "redact") as core:
        counts = import_lines(core.operator_parts(), [line(1, **ENTITIES)], "acme")
        assert (counts.written, counts.errors) == (1, 0), counts.error_lines
        held = stored_strings(core)
        assert GH not in held and GL not in held and PW not in held
        assert "[REDACTED:github-token]" in held
        assert check_stores(core.operator_parts()).ok


def test_under_reject_an_imported_line_with_a_secret_in_its_entities_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path / "data", "reject") as core:
        counts = import_lines(core.operator_parts(), [line(1, **ENTITIES), line(2)], "acme", skip_bad=True)
        assert (counts.written, counts.errors) == (1, 1)
        assert counts.error_lines[0]["code"] == "SECRET_REJECTED"
        assert GH not in json.dumps(counts.to_dict())
        assert core.list_entities("acme") == [] or GH not in stored_strings(core)


def test_an_imported_line_whose_session_holds_a_secret_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path / "data", "redact") as core:
        counts = import_lines(core.operator_parts(), [line(1, session=GH), line(2)], "acme", skip_bad=True)
        assert (counts.written, counts.errors) == (1, 1)
        assert counts.error_lines[0]["code"] == "SECRET_REJECTED" and "session" in counts.error_lines[0]["message"]
        assert GH not in json.dumps(counts.to_dict()) and GH not in stored_strings(core)


def old_store(path: Path) -> dict[str, str]:
    """Secrets stored through every side door under ``allow``, in memories whose content is clean."""
    with open_store(path, "allow") as core:
        refs = {
            "entity": core.add_memory("acme", "s1", "alice", "deploy notes", entities=[{"name": GH}]).ref,
            "kind": core.add_memory("acme", "s1", "alice", "who deploys", entities=[{"name": "bot", "kind": GL}]).ref,
            "label": core.add_memory("acme", "s1", "alice", "who owns CI", entities=[{"name": "Ann"}, {"name": "CI"}],
                                     relations=[{"from": "Ann", "to": "CI", "label": f"password={PW}"}]).ref,
            "session": core.add_memory("acme", f"password={PW}", "alice", "a clean turn").ref,
            "hash": core.add_memory("acme", "s2", "alice", f"the password is {PW}",
                                    metadata={"hash": hashlib.md5(f"the password is {PW}".encode()).hexdigest()}).ref,
            "clean": core.add_memory("acme", "s1", "alice", "nothing secret here").ref,
        }
        lines = [line(1, **{"entities": [{"ref": "ent:900", "name": f"token {GL}"}]})]
        assert import_lines(core.operator_parts(), lines, "acme").written == 1
    return refs


def test_doctor_finds_secrets_in_every_stored_string_not_only_the_content(tmp_path: Path) -> None:
    refs = old_store(tmp_path / "data")
    with open_store(tmp_path / "data", "redact") as core:
        report = check_stores(core.operator_parts())
        found = {f.ref: f.detail for f in report.findings if f.kind == "secret_stored"}
        entities = {e.id: e for e in core.list_entities("acme")}
    named = [ref for ref in found if ref and ref.startswith("ent:")]
    assert len(named) == 3, found  # the entity named after a token, the one whose kind is one, the imported one
    assert {f"ent:{i}" for i, e in entities.items() if GH in e.name or e.kind == GL or GL in e.name} == set(named)
    assert "relations: 1" in found[refs["label"]]
    assert "session: 1 password" in found[refs["session"]]
    assert "metadata: 1 secret-hash" in found[refs["hash"]]
    assert refs["clean"] not in found
    assert GH not in json.dumps(report.to_dict()) and PW not in json.dumps(report.to_dict())


def test_repair_removes_what_it_can_and_leaves_names_that_address_rows_reported(tmp_path: Path) -> None:
    refs = old_store(tmp_path / "data")
    with open_store(tmp_path / "data", "redact") as core:
        report = repair_stores(core.operator_parts())
        assert report.remaining is not None
        left = [(f.ref, f.detail) for f in report.remaining]
        assert [ref for ref, _ in left] == [refs["session"]], left
        assert "not rewritten" in left[0][1]
        held = stored_strings(core)
        assert GH not in held and GL not in held
        assert held.count(PW) == 1  # only in the session name (rows[].session), which repair cannot rename
        assert [r.label for r in core._graph.all_relations("acme")] == []
