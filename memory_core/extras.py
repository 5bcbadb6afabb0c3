"""The package extras a configuration needs to be served: ``python -m memory_core.extras [CONFIG]``.

``make serve`` asks this before installing, so a server gets what its configuration uses and
nothing else: the extra of the graph backend (``storage.graph``; the backend registry
:data:`graph.open.BACKENDS` says which, e.g. ``postgres``), ``rerank`` when the default recall preset
reads the cross-encoder (``recall.preset``), ``otel`` when traces are on (``tracing.enabled``). The
same layering as :func:`memory_core.settings.load_settings` decides: the TOML file (``CONFIG``, else
``$MEMORY_CORE_CONFIG``), then ``MEMORY_CORE_<SECTION>_<KEY>`` variables.

Standard library only (the registry too): ``make serve`` runs ``python -m memory_core.extras`` from
the checkout with the system's Python, before the virtual environment exists.
Prints the extras comma-separated (an empty line for none).
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graph.open import BACKENDS, DEFAULT_BACKEND

RERANK_PRESETS = frozenset({"balanced-rerank"})  # presets with rerank.top > 0 (memory_core/recall/presets.py)
TRUE = frozenset({"true", "1", "yes", "on", "t", "y"})  # what pydantic reads as true


def _setting(config: Mapping[str, Any], environ: Mapping[str, str], section: str, key: str, default: str) -> str:
    env = environ.get(f"MEMORY_CORE_{section}_{key}".upper())
    if env is not None:
        return env
    value = config.get(section, {}).get(key, default)
    return str(value)


def serve_extras(config_path: str | None, environ: Mapping[str, str]) -> list[str]:
    """The extras of ``pyproject.toml`` that serving this configuration needs."""
    path = config_path or environ.get("MEMORY_CORE_CONFIG")
    config: dict[str, Any] = {}
    if path:
        with Path(path).expanduser().open("rb") as fh:
            config = tomllib.load(fh)
    extras = []
    graph = BACKENDS.get(_setting(config, environ, "storage", "graph", DEFAULT_BACKEND))
    if graph is not None and graph.extra:  # an unknown backend: the server refuses the configuration
        extras.append(graph.extra)
    if _setting(config, environ, "recall", "preset", "balanced") in RERANK_PRESETS:
        extras.append("rerank")
    if _setting(config, environ, "tracing", "enabled", "false").strip().lower() in TRUE:
        extras.append("otel")
    return extras


def main(argv: list[str]) -> int:
    try:
        print(",".join(serve_extras(argv[0] if argv and argv[0] else None, os.environ)))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        print(f"memory-core: cannot read the configuration: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
