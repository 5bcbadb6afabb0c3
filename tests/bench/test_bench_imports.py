"""Every benchmark module imports: a benchmark is run by hand (``python -m bench.<group>.<name>``), so a
helper renamed in one module broke ``bench.scale.pg.counts`` and ``bench.scale.pg.store`` without any run
noticing. Importing runs no benchmark (each one starts under ``if __name__ == "__main__"``)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bench

MODULES = sorted(m.name for m in pkgutil.walk_packages(bench.__path__, "bench.")
                 if not m.ispkg and not m.name.rpartition(".")[2].startswith("_"))


def test_the_benchmarks_are_found() -> None:
    assert {"bench.quality.locomo", "bench.scale.pg.counts", "bench.scale.pg.store", "bench.scale.run",
            "bench.latency.recall"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_a_benchmark_module_imports(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__, f"{name} says what it measures and how to run it"
