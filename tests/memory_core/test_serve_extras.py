"""`make serve` installs the extras its configuration uses (memory_core/extras.py), no more."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from memory_core.extras import serve_extras
from memory_core.recall.presets import PRESETS
from memory_core.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_default_configuration_needs_no_extra() -> None:
    assert serve_extras(None, {}) == []


def test_a_postgres_graph_and_the_rerank_preset_each_bring_their_extra(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[storage]\ngraph = "postgres"\n[recall]\npreset = "balanced-rerank"\n')
    assert serve_extras(config, {}) == ["postgres", "rerank"]
    assert serve_extras(None, {"MEMORY_CORE_CONFIG": config}) == ["postgres", "rerank"]
    # environment variables override the file, as they do for the server
    assert serve_extras(config, {"MEMORY_CORE_STORAGE_GRAPH": "sqlite", "MEMORY_CORE_RECALL_PRESET": "balanced"}) == []


def test_traces_bring_the_otel_extra_from_the_file_or_the_environment(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "[tracing]\nenabled = true\n")
    assert serve_extras(config, {}) == ["otel"]
    assert serve_extras(None, {"MEMORY_CORE_TRACING_ENABLED": "1"}) == ["otel"]
    assert serve_extras(config, {"MEMORY_CORE_TRACING_ENABLED": "false"}) == []


@pytest.mark.parametrize("text", ['[storage]\ngraph = "postgres"\npostgres_dsn = "postgresql:///x"\n',
                                  '[recall]\npreset = "balanced-rerank"\n', '[recall]\npreset = "semantic"\n', "",
                                  '[tracing]\nenabled = "yes"\n', '[tracing]\nenabled = false\n'])
def test_it_reads_a_configuration_as_the_server_does(tmp_path: Path, text: str) -> None:
    config = write(tmp_path / "c.toml", text)
    settings = load_settings(config, environ={})
    expected = (["postgres"] if settings.storage.graph == "postgres" else []) + (
        ["rerank"] if PRESETS[settings.recall.preset].rerank.top > 0 else []) + (
        ["otel"] if settings.tracing.enabled else [])
    assert serve_extras(config, {}) == expected


def test_every_preset_that_reranks_is_known_to_it() -> None:
    from memory_core.extras import RERANK_PRESETS

    assert {name for name, preset in PRESETS.items() if preset.rerank.top > 0} == RERANK_PRESETS


def test_the_extras_it_names_exist_and_none_pulls_torch() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert {"postgres", "rerank", "otel"} <= set(extras)
    every = project["dependencies"] + [d for deps in extras.values() for d in deps]
    assert not [d for d in every if d.split("[")[0].split("=")[0].split(">")[0].strip().lower() in
                ("torch", "triton", "sentence-transformers", "transformers", "onnx")]


def test_it_runs_with_the_standard_library_alone_and_reports_an_unreadable_file(tmp_path: Path) -> None:
    # as `make serve` runs it, from the checkout; -S -s -E: no site-packages, no user site, no PYTHON* variables
    extras = [sys.executable, "-S", "-s", "-E", "-m", "memory_core.extras"]
    out = subprocess.run([*extras, str(tmp_path / "none")], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2 and "cannot read the configuration" in out.stderr
    config = write(tmp_path / "c.toml", '[storage]\ngraph = "postgres"\n')
    out = subprocess.run([*extras, config], capture_output=True, text=True, timeout=60, check=True, cwd=ROOT)
    assert out.stdout.strip() == "postgres"
