"""The preview tier: how the MCP boundary trims the library's full rows for agents.

The library always returns full content; only this module shapes it, so direct library
callers (bench, CLI) are never held to a diet that exists to protect a context window.

Contract (docs/tools.md, "The preview tier"):
- ``content`` is a pure prefix of at most ``preview_chars`` characters (0 disables
  trimming), ending at a sentence or word end when one lies in its last fifth. No
  ellipsis: a preview fed back in ``exclude_contents`` still matches.
- Only trimmed rows carry ``content_truncated: true`` and ``content_len``.
- ``full_content=True`` returns whole rows under a per-response budget; rows that do not
  fit, visited most relevant first, fall back to the preview tier and the response
  carries ``full_content_budget_chars``.
- Echoed context entries are trimmed the same way and carry no ref.
- A recall's rows leave out what they all share (one ``session``, one ``agent``, one
  ``match_reason.signal``): the response names it once in ``shared``.

Pure functions over :mod:`memory_core.models` dataclasses: no I/O, no MCP imports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memory_core import DEFAULT_SALIENCE, AddResult, CheckResult, Contents, RecallResult, RecentTurnsPage

if TYPE_CHECKING:
    from memory_core import Recovery  # the store's modules (networkx) load with the stores

# Token economy: the response is already scoped to the caller's tenant, and fields at
# their defaults or empty (``source: {}``) say nothing, so rows leave them out.
_DROPPED_ROW_KEYS = frozenset({"tenant"})
_OMITTED_DEFAULTS: dict[str, Any] = {"visibility": "tenant", "salience": DEFAULT_SALIENCE, "type": "turn",
                                     "provenance": "agent"}
SCORE_DECIMALS = 3  # confidence: enough to rank by
REASON_DECIMALS = 2  # match_reason contributions explain a rank; they need not reproduce it
_PAGE_SHARED_KEYS = frozenset({"session", "type"})
_KEPT_REASON_KEYS = frozenset({"signal", "score"})
_FUSED_REASON_KEYS = frozenset({"rrf", "rsf"})
_HOISTED_KEYS = ("session", "agent")  # stated once in ``shared`` when every row has the same
_BOUNDARY_WINDOW_DIVISOR = 5  # a preview may end early by at most a fifth of its length
_SENTENCE_END = re.compile(r"[.!?:;](?=\s)|\n")
_WHITESPACE = re.compile(r"\s")


@runtime_checkable
class Row(Protocol):
    """Any addressable row: a memory (``mem:``) or an episode (``ep:``)."""

    @property
    def ref(self) -> str: ...

    @property
    def content(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class PreviewShaper:
    """Shapes library results into MCP payloads (plain JSON-safe dicts)."""

    preview_chars: int = 500
    full_content_budget_chars: int = 200_000
    recover_turn_chars: int = 200

    def trim(self, content: str) -> dict[str, Any]:
        """``{"content": prefix}`` plus the two markers only when the text was cut."""
        if self.preview_chars <= 0 or len(content) <= self.preview_chars:
            return {"content": content}
        return {
            "content": content[: preview_end(content, self.preview_chars)],
            "content_truncated": True,
            "content_len": len(content),
        }

    def full_row(self, row: Row) -> dict[str, Any]:
        """The row with its whole content (``check_memory``, ``get_contents``)."""
        return _row_dict(row)

    def preview_row(self, row: Row) -> dict[str, Any]:
        """The row in the preview tier: content trimmed, markers only when trimmed."""
        out = _row_dict(row)
        out.update(self.trim(row.content))
        return out

    def messages(self, rows: Sequence[Row], *, full_content: bool) -> tuple[list[dict[str, Any]], bool]:
        """Shape ranked rows; returns the messages and whether the budget degraded any.

        With ``full_content``, rows are visited in rank order and kept whole while they
        fit the remaining budget; a row that does not fit degrades to its preview and the
        next ones still get their chance, so the most relevant rows are whole first.
        """
        if not full_content:
            return [self.preview_row(row) for row in rows], False
        remaining = self.full_content_budget_chars
        shaped: list[dict[str, Any]] = []
        degraded = False
        for row in rows:
            if len(row.content) <= remaining:
                remaining -= len(row.content)
                shaped.append(self.full_row(row))
            else:
                degraded = True
                shaped.append(self.preview_row(row))
        return shaped, degraded

    def context_entries(self, entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Echo recall_with_context's conversation entries trimmed, without refs."""
        echoed: list[dict[str, Any]] = []
        for entry in entries:
            out: dict[str, Any] = {"role": entry.get("role")}
            out.update(self.trim(str(entry.get("content", ""))))
            echoed.append(out)
        return echoed

    def recall(
        self,
        result: RecallResult,
        *,
        full_content: bool = False,
        context: Iterable[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The recall / recall_with_context response; optional flags appear only when set."""
        messages, degraded = self.messages(result.messages, full_content=full_content)
        shared = shared_fields(messages)
        out = recall_response(result, messages)
        if shared:
            out["shared"] = shared
        if context is not None:
            out["context"] = self.context_entries(context)
        if degraded:
            out["full_content_budget_chars"] = self.full_content_budget_chars
        return out

    def recent_turns(self, page: RecentTurnsPage) -> dict[str, Any]:
        """Turns newest first in the preview tier, with the cursor for the next page.

        Every row of a page shares its session and is a turn, so those two fields are left
        out of the rows (the caller named the session).
        """
        turns = [{k: v for k, v in self.preview_row(row).items() if k not in _PAGE_SHARED_KEYS} for row in page.turns]
        return {"turns": turns, "next_cursor": page.next_cursor}

    def contents(self, contents: Contents) -> dict[str, Any]:
        """get_contents: whole rows plus the refs that did not resolve. A row asked for by a string
        other than its ref (``" mem:6"``) carries that string as ``requested``."""
        found = []
        for i, row in enumerate(contents.found):
            shaped = self.full_row(row)
            asked = contents.requested[i] if i < len(contents.requested) else row.ref
            if asked != row.ref:
                shaped["requested"] = asked
            found.append(shaped)
        return {"found": found, "missing": list(contents.missing)}

    def check(self, result: CheckResult) -> dict[str, Any]:
        """check_memory: the row whole; neighbouring rows in the preview tier."""
        return {"memory": self.full_row(result.memory), "neighbours": self._neighbours(result.neighbours)}

    def added(self, result: AddResult) -> dict[str, Any]:
        return result.to_dict()

    def recovery(self, recovery: Recovery) -> dict[str, Any]:
        """recover_context: the latest handoff whole, the summary, the cursor, and the turns as
        shorter previews (``recover_turn_chars``) so the whole answer fits a small budget."""
        turn_shaper = replace(self, preview_chars=self.recover_turn_chars)
        return {
            "handoff": self.full_row(recovery.handoff) if recovery.handoff is not None else None,
            "summary": recovery.episode.to_dict() if recovery.episode is not None else None,
            **turn_shaper.recent_turns(recovery.turns),
        }

    def _neighbours(self, value: Any) -> Any:
        if isinstance(value, Row):
            return self.preview_row(value)
        if isinstance(value, Mapping):
            return {str(key): self._neighbours(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._neighbours(item) for item in value]
        if hasattr(value, "to_dict"):
            return value.to_dict()
        return value


def shared_fields(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Move the ``_HOISTED_KEYS`` every row (of two or more) has with one value out of the rows.

    Returns them (``{"agent": "alice"}``) for the response's ``shared``; a recall filtered by
    session, or answered from one agent's memories, then names it once instead of per row.
    """
    if len(rows) < 2:
        return {}
    shared = {
        key: rows[0][key]
        for key in _HOISTED_KEYS
        if key in rows[0] and all(key in row and row[key] == rows[0][key] for row in rows)
    }
    for row in rows:
        for key in shared:
            del row[key]
    reasons = [row.get("match_reason") for row in rows]
    signals = {r.get("signal") for r in reasons if isinstance(r, dict)}
    if len(signals) == 1 and all(isinstance(r, dict) and "signal" in r for r in reasons):
        shared["signal"] = signals.pop()  # match_reason.signal of every row
        for r in reasons:
            del r["signal"]  # type: ignore[union-attr]
    return shared


def recall_response(result: RecallResult, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The one recall response shape, for the MCP tools and ``memory-core recall --json`` alike:
    ``{messages, gate_fallback?, order?, resolved_project_id?, warning?}``, flags only when set
    (``order: "newest_first"``: time orders the rows, not confidence). The rows are the caller's
    (previews over MCP, whole library rows in the CLI)."""
    out: dict[str, Any] = {"messages": messages}
    if result.gate_fallback:
        out["gate_fallback"] = True
    if result.order is not None:
        out["order"] = result.order
    if result.resolved_project_id is not None:
        out["resolved_project_id"] = result.resolved_project_id
    if result.operating_context_warning:
        out["warning"] = result.operating_context_warning
    return out


def expand_rows(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A recall response's rows with what the shaping left out put back: the ``shared`` fields
    and the defaults (``type: 'turn'``, ``provenance: 'agent'``, ``flags: []``). For clients and tests that
    read rows one by one."""
    shared = dict(response.get("shared", {}))
    signal = shared.pop("signal", None)
    rows = [{"type": _OMITTED_DEFAULTS["type"], "provenance": _OMITTED_DEFAULTS["provenance"], "flags": [], **shared,
             **row} for row in response.get("messages", [])]
    if signal is not None:
        for row in rows:
            if isinstance(row.get("match_reason"), dict):
                row["match_reason"] = {"signal": signal, **row["match_reason"]}
    return rows


def preview_end(content: str, limit: int) -> int:
    """Where a preview of at most ``limit`` characters ends: after the last sentence end in its
    last fifth, else at the last whitespace there, else at ``limit``.

    A half word or half sentence costs tokens and tells the agent nothing; the prefix stays pure,
    so a preview fed back in ``exclude_contents`` still matches the stored text.
    """
    start = limit - max(1, limit // _BOUNDARY_WINDOW_DIVISOR)
    window = content[start : limit + 1]  # a boundary right after the limit still counts
    sentence_ends = [m.end() for m in _SENTENCE_END.finditer(window) if start + m.end() <= limit]
    if sentence_ends:
        return start + sentence_ends[-1]
    spaces = [m.start() for m in _WHITESPACE.finditer(window) if m.start() > 0]
    return start + spaces[-1] if spaces else limit


def _row_dict(row: Row) -> dict[str, Any]:
    """``MemoryRow.to_dict()`` without the tenant, null or empty fields and fields at their
    defaults; scores rounded to ``SCORE_DECIMALS`` (enough to rank by, a third fewer tokens)."""
    out = {
        key: value
        for key, value in row.to_dict().items()
        if value is not None
        and value != {}
        and value != []
        and key not in _DROPPED_ROW_KEYS
        and not (key in _OMITTED_DEFAULTS and value == _OMITTED_DEFAULTS[key])
    }
    if isinstance(out.get("confidence"), float):
        out["confidence"] = round(out["confidence"], SCORE_DECIMALS)
    if isinstance(out.get("timestamp"), str):
        out["timestamp"] = _minutes(out["timestamp"])
    if isinstance(out.get("match_reason"), dict):
        out["match_reason"] = _compact_reason(out["match_reason"], out.get("confidence"))
    return out


def _minutes(iso_ts: str) -> str:
    """``2026-11-30T11:17:23.436972+00:00`` → ``2026-11-30T11:17Z`` (ISO 8601): an agent reasons
    about when something happened in minutes; the order of rows is the server's to give."""
    if iso_ts.endswith("+00:00") and len(iso_ts) >= 25:
        return iso_ts[:16] + "Z"
    return iso_ts


def _compact_reason(reason: dict[str, Any], confidence: object = None) -> dict[str, Any]:
    """Round the contributions and leave out retrievers that contributed nothing to this row.

    The fused scores (``rrf``, ``rsf``) stay only when they are the signal the ranking keyed
    on; otherwise ``score`` already carries the ranking and the per-retriever keys (cosine,
    bm25, keyword, graph, …) explain it. ``score`` itself goes when it only repeats the row's
    ``confidence``; ``signal`` always stays (it names the branch the ranking keyed on). The
    library's rows keep every key.
    """
    compact: dict[str, Any] = {}
    for key, value in reason.items():
        if key in _FUSED_REASON_KEYS and reason.get("signal") != key:
            continue
        if isinstance(value, float):
            if value == 0.0 and key not in _KEPT_REASON_KEYS:
                continue
            value = round(value, REASON_DECIMALS)
        compact[key] = value
    score = reason.get("score")
    if isinstance(confidence, float) and isinstance(score, float) and round(score, SCORE_DECIMALS) == confidence:
        compact.pop("score", None)
    return compact
