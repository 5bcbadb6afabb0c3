"""Issue 46, points 3, 4 and 9: every string a write stores goes through the secrets guard. Names
that address rows (tenant, session, agent, channel, project, role, type, idempotency key) holding a
secret refuse the write, naming the field, under ``redact`` too; a secret used as an entity kind is
dropped (the entity is stored without it) and reported; a hash of a secret, or of the clear text that
held one, in metadata or source is redacted; an ``aws configure`` transcript stores no key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import SecretRejectedError
from memory_core.secret_guard import SecretGuard
from memory_core.settings import load_settings
from memory_core.settings.schema import LimitSettings
from memory_core.write.add_rows import prepare_add
from testbed.secrets_corpus import REALISTIC, Fake

LIMITS = LimitSettings()
F = Fake(4646)
GH, GL, PW = F.github_classic(), "glpat-" + F.chars("abcdefghijklmnopqrstuvwxyz0123456789", 20), F.password()
NAMES = ("session", "agent", "channel", "project_id", "role", "idempotency_key")  # a type ([a-z][a-z0-9_]*) holds none


def item(content: str = "a plain note about the deploy", **more: object) -> dict[str, object]:
    return {"tenant": "acme", "session": "s1", "agent": "alice", "content": content, **more}


def open_store(path: Path, policy: str = "redact") -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "security": {"secrets": policy}})
    return MemoryCore.open(path, settings=settings, embedder=HashEmbedder())


@pytest.mark.parametrize("policy", ["redact", "reject"])
@pytest.mark.parametrize("field", NAMES)
def test_a_name_that_addresses_rows_holding_a_secret_refuses_the_write_and_names_the_field(
        field: str, policy: str) -> None:
    with pytest.raises(SecretRejectedError) as caught:
        prepare_add(item(**{field: GH}), LIMITS, guard=SecretGuard(policy))  # type: ignore[arg-type]
    err = caught.value
    assert err.code == "SECRET_REJECTED"
    assert [s["field"] for s in err.fields["secrets"]] == [field]
    assert GH not in json.dumps(err.to_dict()) + str(err)


def test_a_tenant_holding_a_secret_is_refused_too() -> None:
    with pytest.raises(SecretRejectedError):
        prepare_add({**item(), "tenant": GH}, LIMITS)


def test_names_shaped_like_ids_are_not_secrets() -> None:
    for session in ("2f9a6c1e-8b7d-4c3a-9e21-5d4f3b2a1c0e", "claude-code-" + F.hex(32), "01HX3Q9Z8K7M6N5P4R3S2T1V0W",
                    F.hex(40), "sess_" + F.chars("abcdefghijklmnopqrstuvwxyz0123456789", 24), "ledger/prod#42"):
        key = f"sha256:{F.hex(64)}"
        prepared = prepare_add(item(session=session, idempotency_key=key, channel="discord:1234567890"), LIMITS)
        assert prepared.row.node.session == session and prepared.row.idempotency_key == key


def test_under_allow_names_are_stored_as_given() -> None:
    prepared = prepare_add(item(session=GH), LIMITS, guard=SecretGuard("allow"))
    assert prepared.row.node.session == GH


def test_a_secret_used_as_an_entity_kind_is_dropped_and_reported_not_refused() -> None:
    prepared = prepare_add(item(entities=[{"name": "deploy bot", "kind": GL}, {"name": "Carol", "kind": "person"}]),
                           LIMITS)
    assert [(e.name, e.kind) for e in prepared.entities[:2]] == [("deploy bot", None), ("Carol", "person")]
    assert prepared.redacted == {"gitlab-token": 1}
    with pytest.raises(SecretRejectedError):
        prepare_add(item(entities=[{"name": "deploy bot", "kind": GL}]), LIMITS, guard=SecretGuard("reject"))


def test_entity_names_aliases_and_relation_labels_holding_secrets_are_redacted() -> None:
    prepared = prepare_add(item(entities=[{"name": GH, "aliases": [f"token {GL}"]}, {"name": "CI"}],
                                relations=[{"from": GH, "to": "CI", "label": f"pw {PW}"}]), LIMITS)
    dumped = json.dumps([[e.name, e.kind, e.aliases] for e in prepared.entities] +
                        [[r.src, r.dst, r.label] for r in prepared.relations])
    assert GH not in dumped and GL not in dumped
    assert prepared.entities[0].name == "[REDACTED:github-token]"


def test_a_hash_of_the_clear_text_or_of_a_secret_in_metadata_is_redacted() -> None:
    content = f"the db password is {PW}, rotate it"
    metadata = {"hash": hashlib.md5(content.encode()).hexdigest(),  # what mem0 keeps
                "pw_sha256": hashlib.sha256(PW.encode()).hexdigest().upper(),
                "other": hashlib.sha256(b"unrelated").hexdigest()}
    prepared = prepare_add(item(content, metadata=metadata, source={"digest": hashlib.sha1(PW.encode()).hexdigest()}),
                           LIMITS)
    assert prepared.row.node.metadata["hash"] == "[REDACTED:secret-hash]"
    assert prepared.row.node.metadata["pw_sha256"] == "[REDACTED:secret-hash]"
    assert prepared.row.node.metadata["other"] == metadata["other"]
    assert prepared.row.node.source["digest"] == "[REDACTED:secret-hash]"
    assert prepared.redacted == {"password": 1, "secret-hash": 3}


def test_an_aws_configure_transcript_added_to_a_store_keeps_no_key(tmp_path: Path) -> None:
    sample = next(s for s in REALISTIC if s.name == "aws configure transcript")
    with open_store(tmp_path / "data") as core:
        result = core.add_memory("acme", "s1", "alice", sample.text)
        stored = core.get_contents("acme", [result.ref])
        text = json.dumps([m.__dict__ for m in stored.found], default=str)
    assert result.redacted == {"aws-access-key": 1, "aws-secret-key": 1}
    for _kind, value in sample.secrets:
        assert value not in text


def test_a_refused_name_writes_nothing_to_either_store(tmp_path: Path) -> None:
    with open_store(tmp_path / "data") as core:
        with pytest.raises(SecretRejectedError):
            core.add_memory("acme", GH, "alice", "a plain note")
        with pytest.raises(SecretRejectedError):
            core.add_memories([{"tenant": "acme", "session": "s1", "agent": "alice", "content": "fine"},
                               {"tenant": "acme", "session": "s1", "agent": "alice", "content": "x",
                                "channel": f"password={PW}"}])
        assert core._graph.count("acme") == 0
        assert not core._vectors.all_ids("acme")
