"""What the reliability tests share: the run's intensity, the results table, tenant
markers, the response checks and an in-process MCP server callable from plain code.

- ``LONG``: ``MEMORY_CORE_RELIABILITY=long`` (``make reliability``) versus the CI run.
- ``RESULTS``: one ``HarnessResult`` row per harness, printed at the end of the run by
  ``conftest.pytest_terminal_summary`` and written to ``bench/results/reliability.json``.
- Tenant markers: every content a test writes starts with ``⟦tenant⟧`` (or
  ``⟦tenant|agent⟧`` for a private memory), so a leak is a marker found in a response
  sent to anyone else, whatever field or path carried it.
- ``in_process_server``: one ``MemoryCore`` behind ``build_server`` and the SDK's real
  ``Client``, driven from synchronous test code (hypothesis) through an anyio portal.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp_types import CallToolResult

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from memory_core.settings.schema import Settings
from testbed.paths import ROOT
from tools.mcp.server import build_server
from tools.mcp.stores import OpenedCore
from tools.registry import TOOL_SPECS

LONG = os.environ.get("MEMORY_CORE_RELIABILITY", "").strip().lower() == "long"
MODE = "long" if LONG else "ci"
RESULTS_PATH = ROOT / "bench" / "results" / "reliability.json"
CALL_TIMEOUT_S = 120.0

# every tool the server registers (the contract tests pin the names themselves)
TOOLS = tuple(spec.name for spec in TOOL_SPECS)

# ---- the results table -------------------------------------------------------------------


@dataclass
class HarnessResult:
    """One row of the summary table. ``errors``: calls that broke the contract (a tool error
    where none was due, a traceback, an exception); ``lost``: acknowledged writes not readable
    afterwards; ``leaked``: rows that reached a tenant (or agent) they do not belong to."""

    harness: str
    trials: int = 0
    steps: int = 0
    examples: int = 0
    errors: int = 0
    lost: int = 0
    leaked: int = 0
    seconds: float = 0.0
    outcome: str = "not run"
    notes: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class ReliabilityResults:
    """Rows by harness name, in the order the harnesses first reported."""

    def __init__(self) -> None:
        self.rows: dict[str, HarnessResult] = {}
        self.nodeids: dict[str, str] = {}

    def row(self, harness: str, nodeid: str | None = None) -> HarnessResult:
        if harness not in self.rows:
            self.rows[harness] = HarnessResult(harness)
        if nodeid is not None:
            self.nodeids[nodeid] = harness
        return self.rows[harness]

    def outcome(self, nodeid: str, outcome: str, seconds: float) -> None:
        """A test's outcome marks its row (a row fed by several tests keeps the worst one)."""
        harness = self.nodeids.get(nodeid)
        if harness is None:
            return
        row = self.rows[harness]
        if row.outcome in ("not run", "passed") or outcome == "failed":
            row.outcome = outcome
        row.seconds += seconds

    def table(self) -> list[str]:
        header = ("harness", "trials", "steps", "examples", "errors", "lost", "leaked", "seconds", "result")
        body = [
            (r.harness, str(r.trials), str(r.steps), str(r.examples), str(r.errors), str(r.lost), str(r.leaked),
             f"{r.seconds:.1f}", r.outcome)
            for r in self.rows.values()
        ]
        widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

        def fmt(line: tuple[str, ...]) -> str:
            return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                             enumerate(zip(line, widths, strict=True))).rstrip()

        totals = ("total", *(str(sum(getattr(r, k) for r in self.rows.values()))
                             for k in ("trials", "steps", "examples", "errors", "lost", "leaked")),
                  f"{sum(r.seconds for r in self.rows.values()):.1f}", "")
        rule = "  ".join("-" * w for w in widths)
        return [fmt(header), rule, *(fmt(line) for line in body), rule, fmt(totals)]

    def notes(self) -> list[str]:
        return [f"{r.harness}: {r.notes}" for r in self.rows.values() if r.notes]

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": MODE,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "rows": [asdict(r) for r in self.rows.values()],
        }


RESULTS = ReliabilityResults()

# ---- tenant markers ----------------------------------------------------------------------

_MARKER = re.compile(r"⟦([^⟧|]+)(?:\|([^⟧]+))?⟧")


def marker(tenant: str, private_to: str | None = None) -> str:
    """The tag a test puts in front of every content it writes."""
    return f"⟦{tenant}|{private_to}⟧" if private_to else f"⟦{tenant}⟧"


def leaks(text: str, tenant: object, viewer: object = None, *, ignore: str = "") -> list[str]:
    """Markers in ``text`` that ``tenant`` (as ``viewer``) must never see: another tenant's
    rows, or a private row of another agent. Markers also present in ``ignore`` (what the
    caller sent) are the caller's own words echoed back, not leaks."""
    sent = {m.group(0) for m in _MARKER.finditer(ignore)}
    found = []
    for m in _MARKER.finditer(text):
        if m.group(0) in sent:
            continue
        owner, private_to = m.group(1), m.group(2)
        if owner != tenant or (private_to is not None and private_to != viewer):
            found.append(m.group(0))
    return found


# ---- response checks ---------------------------------------------------------------------

_ERROR_TEXT = re.compile(r"^([A-Z][A-Z0-9_]*): (\S.*[.?!])$", re.DOTALL)


def response_text(result: CallToolResult) -> str:
    """Everything a client receives: the text blocks and the structured payload."""
    texts = [getattr(block, "text", "") for block in result.content]
    return "\n".join(texts) + "\n" + json.dumps(result.structured_content, ensure_ascii=False, default=str)


def contract_problem(result: object) -> str | None:
    """Why a call's answer breaks the tool contract, or None when it keeps it: a success with a
    JSON object payload, or an ``isError`` result "CODE: one sentence" whose structured error
    carries the same code, without a traceback, and never INTERNAL_ERROR (that is a bug)."""
    if not isinstance(result, CallToolResult):
        return f"not a tool result: {result!r}"[:500]
    if not result.content or getattr(result.content[0], "type", None) != "text":
        return "the result has no text block"
    text = result.content[0].text  # type: ignore[union-attr]
    if not result.is_error:
        if not isinstance(result.structured_content, dict):
            return "a success without a structured payload"
        try:
            json.loads(text)
        except ValueError:
            return f"a success whose text is not JSON: {text[:200]!r}"
        return None
    match = _ERROR_TEXT.match(text)
    if match is None or "\n" in text or "Traceback" in text or 'File "' in text:
        return f"a tool error without the 'CODE: sentence' shape: {text[:500]!r}"
    code = match.group(1)
    structured = (result.structured_content or {}).get("error", {})
    if structured.get("code") != code:
        return f"the structured error code {structured.get('code')!r} differs from the text's {code!r}"
    if code == "INTERNAL_ERROR":
        return f"an internal error (a bug; see the server log): {text}"
    return None


def error_code(result: CallToolResult) -> str | None:
    """The code of a tool error, None for a success (call ``contract_problem`` first)."""
    if not result.is_error:
        return None
    return result.content[0].text.split(":", 1)[0]  # type: ignore[union-attr]


def payload(result: CallToolResult) -> dict[str, Any]:
    """The structured payload of a success; fails the test on a tool error."""
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


# ---- an in-process server ----------------------------------------------------------------


def hash_settings(**overrides: Any) -> Settings:
    """Default settings with the deterministic hash embedder and no environment leaking in."""
    return load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, **overrides})


@dataclass
class InProcessServer:
    """The MCP server on one opened store, reached through the SDK's in-process client."""

    portal: BlockingPortal
    client: Client
    core: MemoryCore
    settings: Settings

    def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """One tool call from synchronous code; the server stays up between calls."""
        return self.portal.call(self._call, tool, arguments)

    async def _call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await self.client.call_tool(tool, arguments)


@contextmanager
def in_process_server(data_dir: Path, **overrides: Any) -> Iterator[InProcessServer]:
    """Open a persistent store (embedded Chroma + SQLite graph) and serve it in-process.

    The server's lifespan closes the store when the block exits.
    """
    settings = hash_settings(**overrides)
    core = MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder())
    with start_blocking_portal("asyncio") as portal, portal.wrap_async_context_manager(
        Client(build_server(settings, OpenedCore(core)))
    ) as client:
        yield InProcessServer(portal, client, core, settings)


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]
