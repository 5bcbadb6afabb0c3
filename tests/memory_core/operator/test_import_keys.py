"""Idempotency keys across releases (issues 46 and 47): keys now hash each item's identity in its source
and its text as stored (after the secrets guard). A store imported by an earlier release, under the
keys it derived, is recognised: importing the same source again with this one writes nothing twice.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.importers import FORMATS, import_source
from memory_core.importers.source import SourceItem
from memory_core.operator.transfer import export_tenant
from testbed.paths import ROOT
from tests.support.backends import open_core

FIXTURES = ROOT / "tests" / "fixtures" / "import"


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core("memory", tmp_path / "data", request)
    yield core
    core.close()


def import_as_before(core: MemoryCore, source: str, path: Path, tenant: str = "acme") -> int:
    """Write ``path`` the way releases before issue 46 did: each item under the key they derived (its
    first legacy key), the first of a key winning. Returns how many memories that wrote."""
    fmt = FORMATS[source]
    items = [got for got in importlib.import_module(fmt.module).read(path) if isinstance(got, SourceItem)]
    adds: list[dict[str, Any]] = [got.add_item(tenant, fmt.default_agent, got.legacy_keys[0]) for got in items]
    results = core._writer.add_many(adds, extract=fmt.extract)
    return sum(r.created for r in results)


@pytest.mark.parametrize(("source", "path"), [
    ("mcp-memory", FIXTURES / "mcp-memory" / "memory.json"), ("basic-memory", FIXTURES / "basic-memory"),
    ("mem0", FIXTURES / "mem0" / "get_all.json"), ("markdown", FIXTURES / "markdown")])
def test_a_store_imported_by_an_earlier_release_is_not_doubled_by_this_one(
        store: MemoryCore, source: str, path: Path) -> None:
    before = import_as_before(store, source, path)
    rows = list(export_tenant(store.operator_parts(), "acme"))
    again = import_source(store.operator_parts(), source, path, "acme")
    assert (again.written, again.skipped, again.errors) == (0, before, 0)
    assert list(export_tenant(store.operator_parts(), "acme")) == rows
