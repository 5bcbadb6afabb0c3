"""Settings: defaults, an optional TOML file, then environment variables.

The sections are plain pydantic models (:mod:`.schema`); :func:`load_settings` layers them
(:mod:`.sources`: the file, the environment, the caller's overrides). ``config.template.toml`` beside
this module is the one template: every setting with its default and a one-line comment
(``memory-core init`` writes it; the checkout's top-level ``config.template.toml`` is a link to it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_core.settings.schema import Settings

TEMPLATE = "config.template.toml"


def template_text() -> str:
    """The commented configuration template."""
    return resources.files(__name__).joinpath(TEMPLATE).read_text(encoding="utf-8")


def load_settings(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults ← TOML file (``path`` or ``$MEMORY_CORE_CONFIG``) ← env vars ← ``overrides``.

    Only the composition root (``MemoryCore.open``, the servers) calls it: nothing reads configuration
    at import time. ``MEMORY_CORE_TENANT`` / ``MEMORY_CORE_AGENT`` / ``MEMORY_CORE_SCOPE`` bind the
    server's tenant, agent and scope; set but malformed, they fail here (CONFIG_INVALID), as do any
    unknown ``MEMORY_CORE_*`` variable (with the setting it probably meant) and a value that fails
    validation, each naming its key.
    """
    from memory_core.settings.sources import layered_settings  # pydantic-settings (~70-90 ms) loads only here

    return layered_settings(path, os.environ if environ is None else environ, overrides or {})
