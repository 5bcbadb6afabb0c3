"""What a reader derives from a source must not carry a secret the guard cannot see (issue 46.3):
session names made from headings, a hash of the clear text kept in metadata, idempotency keys.
The guard itself (every stored string, in the shared write path) is tested with the write path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.importers import import_source
from memory_core.operator.transfer import export_tenant
from tests.support.backends import open_core

KEY = "3f9a1c0b7d2e4f6a8b9c0d1e2f3a4b5c"  # 32 hex, as a Datadog API key is


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core("memory", tmp_path / "data", request)
    yield core
    core.close()


def dumped(core: MemoryCore, tenant: str = "acme") -> str:
    """Everything the tenant's export holds (content, sessions, metadata, keys), as one text."""
    return json.dumps(list(export_tenant(core.operator_parts(), tenant)), ensure_ascii=False)


def test_a_heading_holding_an_api_key_never_becomes_a_session_name(store: MemoryCore, tmp_path: Path) -> None:
    notes = tmp_path / "CLAUDE.md"
    notes.write_text(f"# Setup\n\n## DD_API_KEY={KEY}\n\nExport it before running the agent.\n", encoding="utf-8")
    report = import_source(store.operator_parts(), "markdown", notes, "acme")
    assert report.written == 1
    text = dumped(store)
    assert KEY not in text and KEY.upper() not in text
    (row,) = export_tenant(store.operator_parts(), "acme")
    assert row["session"].startswith("claude/dd_api_key") and "redacted" in row["session"]


def mem0_dump(path: Path, secret: str) -> Path:
    text = f"The staging database password: {secret}"
    path.write_text(json.dumps({"results": [{
        "id": "0b6f1c9e-3f0a-4f7e-9a63-1d1b5a0c7e01", "memory": text,
        "hash": hashlib.md5(text.encode()).hexdigest(), "metadata": None,
        "created_at": "2026-02-20T08:15:30.123456-08:00", "updated_at": None, "user_id": "alice"}]}, indent=2))
    return path


def test_a_mem0_memory_keeps_no_hash_of_its_clear_text(store: MemoryCore, tmp_path: Path) -> None:
    dump = mem0_dump(tmp_path / "get_all.json", "hunter2")
    import_source(store.operator_parts(), "mem0", dump, "acme")
    clear = "The staging database password: hunter2"
    text = dumped(store)
    assert "hunter2" not in text and hashlib.md5(clear.encode()).hexdigest() not in text
    (row,) = export_tenant(store.operator_parts(), "acme")
    assert "[REDACTED:" in row["content"] and "hash" not in row["metadata"]["mem0"]


def keys(core: MemoryCore, tenant: str) -> list[Any]:
    return sorted(r["idempotency_key"] for r in export_tenant(core.operator_parts(), tenant))


@pytest.mark.parametrize("source", ["mem0", "markdown"])
def test_an_idempotency_key_tells_nothing_of_the_secret_it_was_derived_near(
        store: MemoryCore, tmp_path: Path, source: str) -> None:
    """Two sources that differ only in a secret's value get the same keys: a key is no hash of it."""
    for tenant, secret in (("acme", "hunter2"), ("globex", "correct-horse-battery")):
        folder = tmp_path / tenant
        folder.mkdir()
        if source == "mem0":
            path = mem0_dump(folder / "get_all.json", secret)
        else:
            path = folder / "CLAUDE.md"
            path.write_text(f"# Ops\n\n## password: {secret}\n\nThe staging password: {secret}\n")
        assert import_source(store.operator_parts(), source, path, tenant).written == 1
    assert keys(store, "acme") == keys(store, "globex")
