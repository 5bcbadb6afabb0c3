"""The labelled sets write-time hygiene and the poisoning scan are measured on, for the tests and the benches.

``testbed/labelled/<name>/labelled.jsonl`` is what the rules were written against; ``heldout.jsonl`` was
written after them and never tuned on. ``hygiene`` rows carry ``text``, ``junk`` and the expected
``reason``; ``poisoning`` rows ``text`` and ``poisoned``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from testbed.paths import ROOT

SETS = ROOT / "testbed" / "labelled"


def labelled_set(name: Literal["hygiene", "poisoning"], part: Literal["labelled", "heldout"] = "labelled"
                 ) -> list[dict[str, Any]]:
    """The rows of one labelled set, in file order."""
    path = SETS / name / f"{part}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
