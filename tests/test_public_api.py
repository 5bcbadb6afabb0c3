"""The public names are pinned (as httpx pins its own in its test of exported members): ``memory_core``,
``memory_core.operator`` and ``memory_core.observe`` export exactly these, each resolves, and importing
any of them stays cheap.

The boundaries (``tools/``) import the core through these names only (``tests/test_architecture.py``),
so a name added here is a name the library promises; one removed breaks its callers. Change the list
on purpose, with the CHANGELOG.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

import memory_core
import memory_core.harness
import memory_core.observe
import memory_core.operator
from testbed.paths import ROOT

ERRORS = [
    "AgentMismatchError", "ConfigError", "ContentTooLargeError", "EmbedderMismatchError", "EmbeddingError",
    "EmptyContentError", "InvalidCursorError", "InvalidInputError", "InvalidRefError", "InvalidTenantError",
    "LockedError", "MemoryCoreError", "NotFoundError", "PoisoningRejectedError", "ScopeDeniedError",
    "SecretRejectedError", "StoreError", "StoreFullError", "StoreLockedError", "StoreReadOnlyError",
    "StoreUnavailableError", "SupersededError",
    "TenantMismatchError", "TenantRequiredError",
]
MEMORY_CORE = sorted([
    # the service, its settings and what its methods take and return
    "MemoryCore", "Settings", "TokenBinding", "load_settings", "template_text",
    "AddResult", "CheckResult", "Contents", "MemoryRow", "RecallResult", "RecentTurnsPage", "Episode", "Recovery",
    "UpdateResult", "MergedEntity", "EntityNode", "RelatedItem", "RelatedResult", "RecallOptions",
    "AddFields", "AddItem", "MemoryFields",
    "DEFAULT_SALIENCE", "MEMORY_TYPES", "RELATED_MAX_DEPTH", "entity_dict", "describe_stages",
    # who may act, checked by a boundary before it opens anything
    "Scope", "DEFAULT_SCOPE", "SCOPE_NAMES", "parse_scope", "NAME_PATTERN", "TENANT_PATTERN", "validate_name",
    "validate_tenant",
    # embedders, and what a serving process does before it opens a store
    "Embedder", "HashEmbedder", "shared_minilm", "DirLock", "claim_data_dir", "warm_up_in_background",
    *ERRORS,
])
OPERATOR = sorted([
    "OperatorParts", "Inspector",
    "DoctorReport", "check_stores", "repair_stores",
    "SessionSummary", "TenantStats", "TenantSummary", "disk_use", "graph_neighbourhood", "list_sessions",
    "list_tenants", "tenant_stats",
    "export_count", "export_tenant", "ImportCounts", "import_lines", "SourceReport", "import_source",
    # upkeep (issue 50): consolidation and its reversal
    "ConsolidationReport", "UndoResult", "consolidate", "undo_merge", "ConsolidationSchedule",
    "ModelCanonical",
    "RetentionReport", "apply_retention", "restore_archived", "ReembedReport", "embedding_for", "reembed",
])

# what a server builds its metrics, logs and traces from; the cheap instruments load with the package
OBSERVE = sorted([
    "CallRecord", "Tally", "TallySnapshot", "TimedRLock", "current_call", "note_stage", "note_wait",
    "request_id_var", "Metrics", "Observer", "new_request_id", "configure_logs", "log_event",
])
# what a harness's hook command runs: the event, the store seam, the install into the harness's settings
HARNESS = sorted([
    "MAX_PAYLOAD_BYTES", "SESSION_START", "USER_PROMPT", "HookEvent", "parse_payload", "CapturedRow", "Limits",
    "HookOptions", "HookRunner", "Outcome", "StateStore", "Ack", "Added", "Binding", "DirectStore", "HookStore",
    "Recovered", "StoredRow", "hook_entries", "merge_hooks", "read_harness_settings", "remove_hooks",
    "write_harness_settings", "hook_model_client", "ModelClient",
])


@pytest.mark.parametrize(("module", "expected"), [(memory_core, MEMORY_CORE), (memory_core.operator, OPERATOR),
                                                  (memory_core.harness, HARNESS)],
                         ids=["memory_core", "memory_core.operator", "memory_core.harness"])
def test_the_exported_names_are_exactly_the_pinned_ones(module: ModuleType, expected: list[str]) -> None:
    assert sorted(module.__all__) == expected
    assert len(set(module.__all__)) == len(module.__all__)
    assert set(module._LAZY) == set(module.__all__)  # every name loads on first use, and no other does


def test_observe_exports_exactly_the_pinned_names_and_loads_only_prometheus_users_lazily() -> None:
    assert sorted(memory_core.observe.__all__) == OBSERVE
    assert set(memory_core.observe._LAZY) <= set(memory_core.observe.__all__)


@pytest.mark.parametrize(("module", "name"), [(memory_core, n) for n in MEMORY_CORE]
                         + [(memory_core.operator, n) for n in OPERATOR]
                         + [(memory_core.observe, n) for n in OBSERVE]
                         + [(memory_core.harness, n) for n in HARNESS])
def test_every_exported_name_resolves_and_is_listed_by_dir(module: ModuleType, name: str) -> None:
    value = getattr(module, name)
    assert value is not None
    assert name in dir(module)
    if isinstance(value, type) or callable(value):
        assert value.__module__.split(".")[0] in ("memory_core", "graph"), f"{name} is not the project's own"


def test_the_errors_are_the_whole_error_tree() -> None:
    tree = {n for n, v in vars(importlib.import_module("memory_core.errors")).items()
            if isinstance(v, type) and issubclass(v, memory_core.MemoryCoreError)}
    assert tree == set(ERRORS)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Operator'"):
        memory_core.operator.Operator  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'graph'"):
        memory_core.graph  # noqa: B018


def test_importing_the_public_modules_loads_no_store_and_no_model() -> None:
    code = ("import sys, memory_core, memory_core.operator, memory_core.observe, memory_core.harness\n"
            "heavy = ['memory_core.service', 'memory_core.operator.doctor.run', 'networkx', 'pydantic', 'numpy',\n"
            "         'chromadb', 'litellm', 'prometheus_client', 'opentelemetry']\n"
            "print(' '.join(m for m in heavy if m in sys.modules) or 'none')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["none"]
