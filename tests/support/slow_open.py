"""``memory-core`` whose store open waits for a gate file (``SLOW_OPEN_GATE``): a slow open, injected.

Run as the shared server's command (``ensure_shared_server(command=...)``) to show what a
client sees while the stores are still opening.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def main() -> None:
    from memory_core.service import MemoryCore
    from tools.cli.app import main as cli

    gate = Path(os.environ["SLOW_OPEN_GATE"])
    original = MemoryCore.open.__func__  # type: ignore[attr-defined]

    def gated(cls: type[MemoryCore], *args: Any, **kwargs: Any) -> MemoryCore:
        deadline = time.monotonic() + 60
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return original(cls, *args, **kwargs)  # type: ignore[no-any-return]

    MemoryCore.open = classmethod(gated)  # type: ignore[method-assign,assignment]
    cli()
