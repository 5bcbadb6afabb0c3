"""The backend registry (graph.open.BACKENDS) is the one list of graph backends: the setting's choices,
the package extras and the suite's graph backends all agree with it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import get_args

import pytest

from graph.errors import GraphConfigError
from graph.open import BACKENDS, DEFAULT_BACKEND, GraphConfig, graph_backend, open_graph
from memory_core.settings.schema import StorageSettings
from testbed.paths import ROOT
from tests.support.backends import GRAPHS


def test_the_setting_offers_exactly_the_registered_backends_with_the_same_default() -> None:
    field = StorageSettings.model_fields["graph"]
    assert set(get_args(field.annotation)) == set(BACKENDS)
    assert field.default == DEFAULT_BACKEND == GraphConfig().backend


def test_every_extra_a_backend_names_is_a_package_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [b.extra for b in BACKENDS.values() if b.extra and b.extra not in extras] == []


def test_only_a_backend_without_a_data_directory_is_shared() -> None:
    assert {name: b.shared for name, b in BACKENDS.items()} == {"sqlite": False, "postgres": True}


def test_the_suite_runs_every_registered_backend() -> None:
    assert set(GRAPHS) == set(BACKENDS)


def test_an_unknown_backend_is_a_configuration_error_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError) as caught:
        open_graph(GraphConfig(backend="oracle", root=tmp_path))
    assert caught.value.key == "storage.graph" and "sqlite, postgres" in str(caught.value)
    with pytest.raises(GraphConfigError):
        graph_backend("")
