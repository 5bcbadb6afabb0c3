"""One harness event, start to end: capture, the handoff before a compaction, the block at a start.

=================  ==========================================================================
event              what :class:`HookRunner` does
=================  ==========================================================================
SessionStart       capture what is new; then inject one block: ``compact`` (handoff, summary,
                   last turns, related memories), ``resume`` (what this session was not shown
                   yet; its turns are back in the context already), ``startup`` in a project
                   with memory (the project's newest handoff and the session it closed);
                   ``clear`` injects nothing: the user asked for an empty context
PreCompact         capture, then write the handoff (no model needed; one polishes it when set)
PostCompact, Stop  capture
SessionEnd         capture, settling tool calls that never got a result
UserPromptSubmit   nothing, unless prompt injection is on: then the few memories above a
                   relevance threshold that were not injected since the last compaction
=================  ==========================================================================

Capture reads the transcript from the session's saved offset, stores the rows in order through the
:class:`~memory_core.harness.store.HookStore`, and saves the offset only past rows the store
acknowledged (never past a tool call still waiting for its result). A crash anywhere leaves
rows stored and an older offset: the next event reads those lines again and their keys store
nothing twice.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memory_core import validation as v
from memory_core.harness.block import Block, BlockInputs, render
from memory_core.harness.capture import HARNESS, Capture, Limits
from memory_core.harness.handoff import HandoffDraft, build_handoff, polish
from memory_core.harness.payload import (
    POST_COMPACT,
    PRE_COMPACT,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_STOP,
    USER_PROMPT,
    HookEvent,
)
from memory_core.harness.state import SessionState, StateStore
from memory_core.harness.store import Binding, HookStore, Recovered, StoredRow
from memory_core.harness.transcript import entries, identity_of, read_from
from memory_core.provider.errors import timeout_reason

if TYPE_CHECKING:
    from memory_core.provider.client import ModelClient

CAPTURING = frozenset({SESSION_START, PRE_COMPACT, POST_COMPACT, STOP, SUBAGENT_STOP, SESSION_END})
QUERY_CHARS = 2_000  # what a recall reads of the last request
WRITE_RESERVE_S = 3.0  # of the hook's time, kept for writing the handoff after a model was asked


@dataclass(frozen=True)
class HookOptions:
    """How the hook captures and injects (``[hooks]`` in the settings)."""

    budget_tokens: int = 1_500
    turns: int = 4  # last turns the block shows in full (older ones go to its one-line digest)
    relevant: int = 3  # related memories the block may show
    min_confidence: float = 0.3
    inject_on_startup: bool = True
    prompt_injection: bool = False
    prompt_budget_tokens: int = 400
    prompt_min_confidence: float = 0.55
    summaries: bool = False  # a model provider writes the sessions' summaries: the block shows them
    handoff_rows: int = 300  # the session's newest turns a handoff reads
    digest_rows: int = 200  # the session's newest turns the block may list after a compaction
    digest_written: int = 50  # the session's newest rows agents wrote (decisions, notes) it may list
    max_read_bytes: int = 16 << 20  # transcript bytes one event reads (the rest: the next event)
    limits: Limits = field(default_factory=Limits)


@dataclass
class Outcome:
    """What one event did: the harness's answer (stdout JSON), counts, and problems worth a line."""

    output: dict[str, Any] | None = None
    stored: int = 0  # new rows
    repeated: int = 0  # rows the store already had (a re-read)
    refused: int = 0  # rows the store refused (a secret under ``reject``)
    handoff: str | None = None
    block: Block | None = None
    problem: str | None = None  # one line for stderr


def project_of(cwd: str | None) -> str | None:
    """The memory project of a working directory: the path itself when it is a valid name, else its
    last part and a hash of the whole (paths with whitespace or over 128 characters)."""
    if not cwd:
        return None
    path = os.path.normpath(cwd)
    if v.NAME_PATTERN.match(path):
        return path
    base = re.sub(r"[\x00-\x20\x7f]+", "_", os.path.basename(path))[:80] or "project"
    return f"{base}#{hashlib.sha256(path.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"


class HookRunner:
    """Runs events for one binding against one store and one data directory's hook states."""

    def __init__(self, store: HookStore, states: StateStore, binding: Binding, options: HookOptions | None = None,
                 *, model: Callable[[], ModelClient | None] | None = None, deadline: float | None = None) -> None:
        self.store = store
        self.states = states
        self.binding = binding
        self.options = options or HookOptions()
        self._model = model  # builds the provider's client when a handoff is written (None: no provider)
        self._deadline = deadline  # time.monotonic() past which optional work is skipped

    def run(self, event: HookEvent) -> Outcome:
        """Handle one event under the session's state lock; the state is saved as work is acknowledged."""
        outcome = Outcome()
        b = self.binding
        with self.states.locked(b.tenant, b.agent, event.session) as state:
            if state.project is None and event.cwd:
                state.project = project_of(event.cwd)
            try:
                self._run(event, state, outcome)
            finally:
                self.states.save(b.tenant, b.agent, event.session, state)
        return outcome

    def _run(self, event: HookEvent, state: SessionState, outcome: Outcome) -> None:
        if event.name in CAPTURING:
            self.capture(event, state, outcome, final=event.name == SESSION_END)
        if event.name == PRE_COMPACT:
            self.write_handoff(event, state, outcome)
        elif event.name == SESSION_START:
            block = self.session_block(event, state)
            if block is not None:
                state.note_injected(block.refs)
                outcome.block = block
                outcome.output = _answer(SESSION_START, block.text)
        elif event.name == USER_PROMPT and self.options.prompt_injection and event.prompt:
            block = self.prompt_block(event.session, event.prompt, state)
            if block is not None:
                state.note_injected(block.refs)
                outcome.block = block
                outcome.output = _answer(USER_PROMPT, block.text)

    # ---- capture ---------------------------------------------------------------------------
    def capture(self, event: HookEvent, state: SessionState, outcome: Outcome, *, final: bool = False) -> None:
        """Store what the transcript holds past the saved offset (see the module docstring)."""
        if not self.binding.can_write or event.transcript is None:
            return
        path = event.transcript
        identity = identity_of(path)
        if identity is None:
            if event.name != SESSION_START:  # a new session's transcript is written with its first prompt
                outcome.problem = f"the transcript {path} is not there; nothing was captured"
            return
        if state.transcript != str(path) or state.identity != list(identity):
            state.transcript, state.identity, state.offset, state.sent = str(path), list(identity), 0, []
        while True:
            try:
                chunk = read_from(path, state.offset, max_bytes=self.options.max_read_bytes)
            except OSError as exc:
                outcome.problem = f"the transcript {path} could not be read ({exc.strerror or exc})"
                return
            capture = Capture(event.session, self.options.limits)
            for line in chunk.lines:
                capture.feed(entries(line))
            if final:
                capture.settle()
            sent = set(state.sent)
            rows = [r for r in capture.rows if r.key not in sent]
            added = self.store.add_rows(event.session, state.project, rows) if rows else None
            acks = added.acks if added is not None else []
            for ack in acks:
                if ack.refused:
                    outcome.refused += 1
                elif ack.created:
                    outcome.stored += 1
                else:
                    outcome.repeated += 1
            taken = {a.key for a in acks}
            hold = [r.start for r in rows if r.key not in taken]  # not taken: read again next time
            if (pending := capture.hold_from()) is not None:
                hold.append(pending)
            offset = min([chunk.end, *hold])
            done = sent | taken
            state.remember_sent([r.key for r in capture.rows if r.start >= offset and r.key in done])
            state.offset = offset
            self.states.save(self.binding.tenant, self.binding.agent, event.session, state)
            if added is not None and added.error is not None:
                stored = f"{len(acks)} of {len(rows)} new rows were stored"
                outcome.problem = f"capture stopped: {added.error.code}: {added.error.message} ({stored})"
                return
            if offset <= chunk.begin or chunk.end >= chunk.size or self._late():
                return  # read to the end, or no further without a tool call's result

    # ---- the handoff -----------------------------------------------------------------------
    def write_handoff(self, event: HookEvent, state: SessionState, outcome: Outcome) -> None:
        """Write the session's handoff from what was captured (nothing new captured: nothing new written)."""
        if not self.binding.can_write:
            return
        rows = self.store.session_rows(event.session, self.options.handoff_rows)
        draft = build_handoff(rows, session=event.session)
        if draft is None:
            return
        key = f"{HARNESS}:{event.session}:handoff:{draft.covers}"
        if state.handoff_key == key:
            return
        if self._model is not None and not self._late():
            draft = self._polished(draft)
        metadata: dict[str, Any] = {"harness": HARNESS, "provenance": "hook", "covers": draft.covers,
                                    "handoff_source": draft.source}
        if event.trigger:
            metadata["trigger"] = event.trigger
        if draft.error:
            metadata["handoff_error"] = draft.error
        outcome.handoff = self.store.add_handoff(event.session, state.project, draft.text, key, metadata)
        state.handoff_key = key

    def _polished(self, draft: HandoffDraft) -> HandoffDraft:
        """The model's version of ``draft`` if it comes while the hook still has time to write it (the
        provider's import and call run on a thread the hook does not wait for past that); else the draft."""
        build = self._model
        assert build is not None
        done: list[HandoffDraft] = []
        worker = threading.Thread(target=lambda: done.append(polish(draft, build())), daemon=True,
                                  name="memory-core-hook-handoff")
        worker.start()
        wait = None if self._deadline is None else max(0.0, self._deadline - time.monotonic() - WRITE_RESERVE_S)
        worker.join(wait)
        if done:
            return done[0]
        return replace(draft, error=timeout_reason(wait or 0.0))

    # ---- injection -------------------------------------------------------------------------
    def session_block(self, event: HookEvent, state: SessionState) -> Block | None:
        """The block a session start injects (None: nothing worth it; see the module docstring)."""
        source = event.source or "startup"
        if source == "compact":
            state.note_compaction()  # what was injected before is gone from the context
            return self._session(event.session, state, "after a compaction", turns=True)
        if source == "resume":
            return self._session(event.session, state, "as this session resumes", turns=False)
        if source == "startup" and self.options.inject_on_startup:
            return self._project_start(state)
        return None

    def _session(self, session: str, state: SessionState, why: str, *, turns: bool) -> Block | None:
        recovered = self._recover(session)
        rows = self.store.session_rows(session, self.options.digest_rows if turns else max(self.options.turns * 3, 30))
        handoff = recovered.handoff or self._project_handoff(state.project)
        last = _last_request(rows)
        said = [r for r in rows if r.role in ("user", "assistant")]  # the last turns shown whole
        inputs = BlockInputs(
            why=why, handoff=handoff, summary=_summary(recovered, handoff), summary_ref=recovered.summary_ref,
            turns=said if turns else (), max_turns=self.options.turns,
            # a resumed session has its own turns back in the context: related memories come from elsewhere
            relevant=[r for r in self._relevant(last, state.project, self.options.relevant, self.options.min_confidence)
                      if turns or not (r.session == session and r.type == "turn")],
            digest=self._digest(session, rows) if turns else ())
        return render(inputs, self.options.budget_tokens, self.binding, skip=state.injected)

    def _digest(self, session: str, older_turns: list[StoredRow]) -> list[StoredRow]:
        """The rest of the session, knowledge first: what agents wrote in it (decisions, notes, handoffs),
        then its older turns, newest first."""
        written = [r for r in self.store.recall("", limit=self.options.digest_written, project=None,
                                                session=session) if r.type not in ("turn", "episode")
                   and not (r.type == "handoff" and r.metadata.get("harness") == HARNESS)]  # superseded ones of ours
        return [*written, *older_turns]

    def _project_start(self, state: SessionState) -> Block | None:
        """A new session in a project: where the project's last session stopped."""
        if state.project is None:
            return None
        handoff = self._project_handoff(state.project)
        newest = handoff or next(iter(self._in_project(self.store.recall("", limit=20, project=state.project),
                                                       state.project)), None)
        if newest is None or newest.session is None:
            return None  # a project without memory: nothing to say
        recovered = self._recover(newest.session)
        rows = self.store.session_rows(newest.session, max(self.options.turns * 3, 30))
        inputs = BlockInputs(
            why=f"from this project's last session ({newest.session})", handoff=handoff,
            summary=_summary(recovered, handoff), summary_ref=recovered.summary_ref,
            turns=[r for r in rows if r.role in ("user", "assistant")], max_turns=self.options.turns // 2,
            relevant=self._relevant(_last_request(rows), state.project, self.options.relevant,
                                    self.options.min_confidence))
        return render(inputs, self.options.budget_tokens, self.binding, skip=state.injected)

    def prompt_block(self, session: str, prompt: str, state: SessionState) -> Block | None:
        """The memories relevant enough to this prompt that were not injected since the last compaction
        (never this session's own turns: the context holds them, or their summary)."""
        rows = self._relevant(prompt, state.project, self.options.relevant, self.options.prompt_min_confidence)
        fresh = [r for r in rows if not (r.session == session and r.type == "turn")]
        if not fresh:
            return None
        return render(BlockInputs(why="for this prompt", relevant=fresh), self.options.prompt_budget_tokens,
                      self.binding, skip=state.injected)

    def _relevant(self, query: str | None, project: str | None, limit: int, floor: float) -> list[StoredRow]:
        if not query or limit <= 0 or self._late():
            return []
        found = self.store.recall(query[:QUERY_CHARS], limit=limit * 3, project=project)
        return [r for r in found if r.type != "episode" and (r.confidence or 0.0) >= floor][: limit * 2]

    def _recover(self, session: str) -> Recovered:
        """The session's newest handoff, and its summary when the block would show it: a model's summary
        (``summaries``: a provider is configured), or the extractive one of a session without a handoff.
        ``recover_context`` refreshes and stores the summary, the dearest call of an injection: it is
        made only then."""
        found = self.store.recall("", limit=1, project=None, type="handoff", session=session, full=True)
        handoff = found[0] if found and found[0].session in (None, session) else None
        if handoff is not None and not self.options.summaries:
            return Recovered(handoff, None)
        return self.store.recover(session)

    def _project_handoff(self, project: str | None) -> StoredRow | None:
        if project is None:
            return None
        found = self.store.recall("", limit=5, project=project, type="handoff", full=True)
        return next(iter(self._in_project(found, project)), None)

    @staticmethod
    def _in_project(rows: list[StoredRow], project: str) -> list[StoredRow]:
        """Only the project's own rows (a project filter also admits the global pool)."""
        return [r for r in rows if r.project_id == project]

    def _late(self) -> bool:
        return self._deadline is not None and time.monotonic() > self._deadline


def _summary(recovered: Recovered, handoff: StoredRow | None) -> str | None:
    """The session's summary, unless it is the extractive one and a handoff is shown: built from the same
    rows, it would only say again, less precisely, what the handoff says."""
    if handoff is not None and recovered.summary_source != "model":
        return None
    return recovered.summary


def _last_request(rows_newest_first: list[StoredRow]) -> str | None:
    return next((r.content for r in rows_newest_first if r.role == "user"), None)


def _answer(event: str, context: str) -> dict[str, Any]:
    """What Claude Code reads on stdout: ``hookSpecificOutput.additionalContext``."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
