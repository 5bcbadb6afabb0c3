"""Every benchmark module imports: a benchmark is run by hand (``python -m bench.<name>``), so a
helper renamed in one module broke ``bench.pg_counts`` and ``bench.pg_store`` without any run
noticing. Importing runs no benchmark (each one starts under ``if __name__ == "__main__"``)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bench

MODULES = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def test_the_benchmarks_are_found() -> None:
    assert {"locomo", "pg_counts", "pg_store", "scale", "recall_latency"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_a_benchmark_module_imports(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert module.__doc__, f"bench.{name} says what it measures and how to run it"
