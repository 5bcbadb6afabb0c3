"""Tenant isolation: a hypothesis stateful run over 3 tenants and every read path.

Each example works on three fresh tenants that share session, agent, channel, source and
project names (the cases where a leak would hide). Rules write turns, notes, private
(``visibility="agent"``) memories and handoffs, delete refs of any tenant, and read back
through every path: recall with each filter, recall_with_context, get_contents and
check_memory with any tenant's refs (memories and episodes), query_recent_turns paged to
the end and with any tenant's cursors, summarize_session, recover_context, and the
library's export. Every content carries its tenant's marker (and its author's, when
private): 0 markers of another tenant, or of another agent's private rows, may come back;
no answer names another agent's private ref (idempotent replies, duplicate_of, edges,
covers); idempotency keys of private rows are their author's own; a private row is
deleted by its author only; corrections (update_memory) and locks follow the same closure
(another tenant's or agent's ref reads as missing; SUPERSEDED, LOCKED as the model says); under
the connection's default ``write`` scope a shared row, too, is corrected, locked or deleted
only by its author (SCOPE_DENIED for anyone else, nothing changed); and
recall shows superseded versions only when deep; and every answer is checked against a plain
model. ~150 steps in CI; ≥ 2,000 with ``MEMORY_CORE_RELIABILITY=long``. Afterwards the stores
hold exactly the model's memories and doctor is clean. The same run goes over SQLite + embedded
Chroma and over PostgreSQL + ``chroma run`` (a replica's stores).
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test
from mcp_types import CallToolResult

from memory_core.operator.doctor.run import check_stores
from memory_core.operator.transfer import export_tenant
from tests.reliability.harness import (
    LONG,
    HarnessResult,
    InProcessServer,
    contract_problem,
    error_code,
    in_process_server,
    leaks,
    marker,
    payload,
)
from tests.support.backends import graph_backends
from tests.support.store_checks import tenant_view
from tools.mcp.preview import expand_rows

TENANT_NAMES = ("acme", "beta", "gamma")
SESSIONS = ("s1", "s2")
AGENTS = ("alice", "bob")
VIEWERS = (None, "alice", "bob")
CHANNELS = ("chat", "discord")
SOURCES = ("discord:1", "discord:12", "slack:1")
PROJECTS = (None, "p1", "p2")
TYPES = ("turn", "turn", "turn", "note", "decision")
REF = re.compile(r"mem:[0-9]+")
VOCAB = ("orion", "vault", "deploy", "billing", "invoice", "queue", "retry", "schema", "canary", "pager")
# Hypothesis picks each example's length (up to the step count); batches run until the target is met.
TARGET_STEPS, EXAMPLES_PER_BATCH, STEPS_PER_EXAMPLE = (2000, 20, 50) if LONG else (150, 5, 30)
MAX_BATCHES = 50


@dataclass
class Mem:
    ref: str
    tenant: str
    session: str
    agent: str
    type: str
    channel: str | None
    source_id: str | None
    project_id: str | None
    private: bool
    content: str
    live: bool = True
    superseded: bool = False
    locked: bool = False

    def visible_to(self, tenant: str, viewer: str | None) -> bool:
        return self.live and self.tenant == tenant and (not self.private or viewer == self.agent)


@dataclass
class Run:
    """What outlives one example: the server, the table row, and every tenant's expected refs."""

    server: InProcessServer
    row: HarnessResult
    expected: dict[str, set[str]]
    counter: Iterator[int]


class IsolationMachine(RuleBasedStateMachine):
    run: Run  # set by the test before hypothesis builds machines

    def __init__(self) -> None:
        super().__init__()
        n = next(self.run.counter)
        self.tenants = [f"{name}{n}" for name in TENANT_NAMES]
        self.mems: dict[str, Mem] = {}
        self.episodes: dict[str, tuple[str, str]] = {}
        self.cursors: list[tuple[str, str, str]] = []
        self.keys: dict[tuple[str, str], str] = {}
        self.written = 0
        for tenant in self.tenants:
            self.run.expected[tenant] = set()

    # ---- plumbing --------------------------------------------------------------------------
    def call(self, tool: str, tenant: str, viewer: str | None = None, **arguments: Any) -> CallToolResult:
        """One call as ``tenant`` (and ``viewer``); fails on a broken contract or any leak."""
        arguments = {"tenant": tenant, **{k: v for k, v in arguments.items() if v is not None}}
        if viewer is not None:
            arguments["viewer"] = viewer
        result = self.run.server.call(tool, arguments)
        calls = self.run.row.details.setdefault("calls", {})
        calls[tool] = calls.get(tool, 0) + 1
        problem = contract_problem(result)
        if problem is not None:
            self.run.row.errors += 1
            raise AssertionError(f"{tool}({arguments!r:.1000}) -> {problem}")
        shown = dict(result.structured_content or {})
        shown.pop("context", None)  # recall_with_context echoes the caller's own entries
        text = json.dumps(shown, ensure_ascii=False)
        self.assert_no_leak(f"{tool}({arguments!r:.300})", text, tenant, viewer)
        # a write's identity is its author: its reply (idempotent ref, duplicate_of) names nothing hidden from it
        identity = viewer if viewer is not None else arguments.get("agent")
        self.assert_no_private_ref(f"{tool}({arguments!r:.300})", text, json.dumps(arguments), identity)
        return result

    def assert_no_private_ref(self, what: str, text: str, sent: str, identity: str | None) -> None:
        """No ref of another agent's private row, anywhere in an answer (a ref the caller sent aside)."""
        echoed = set(REF.findall(sent))
        hidden = [ref for ref in REF.findall(text) if ref not in echoed and (m := self.mems.get(ref)) is not None
                  and m.private and m.agent != identity]
        self.run.row.leaked += len(hidden)
        assert not hidden, f"{what} named private refs {hidden} to {identity}"

    def assert_no_leak(self, what: str, text: str, tenant: str, viewer: str | None) -> None:
        found = leaks(text, tenant, viewer)
        self.run.row.leaked += len(found)
        assert not found, f"{what} leaked {found}"

    def step(self) -> None:
        self.run.row.steps += 1

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.run.row.errors += 1
            raise AssertionError(message)

    def owned(self, tenant: str, viewer: str | None) -> dict[str, Mem]:
        return {ref: m for ref, m in self.mems.items() if m.visible_to(tenant, viewer)}

    def all_refs(self) -> list[str]:
        return [*self.mems, *self.episodes]

    def check_row(self, row: dict[str, Any], tenant: str, viewer: str | None, *, preview: bool) -> None:
        """A returned row is one of the caller's: a visible live memory with its content, or an episode."""
        ref = row["ref"]
        if ref.startswith("ep:"):
            self.expect(self.episodes.get(ref, ("", ""))[0] == tenant, f"episode {ref} is not {tenant}'s")
            return
        mem = self.mems.get(ref)
        self.expect(mem is not None and mem.visible_to(tenant, viewer), f"{ref} returned to {tenant}/{viewer}")
        assert mem is not None
        content = row["content"]
        self.expect(mem.content.startswith(content) if preview else mem.content == content, f"{ref}: content differs")

    # ---- writes ----------------------------------------------------------------------------
    @rule(
        t=st.integers(0, 2), session=st.sampled_from(SESSIONS), agent=st.sampled_from(AGENTS),
        kind=st.sampled_from(TYPES), channel=st.sampled_from((None, *CHANNELS)),
        source=st.sampled_from((None, *SOURCES)), project=st.sampled_from(PROJECTS),
        private=st.integers(0, 4).map(lambda i: i == 0), words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6),
        key=st.sampled_from((None, None, None, "k1", "k2")),
    )
    def add_memory(self, t: int, session: str, agent: str, kind: str, channel: str | None, source: str | None,
                   project: str | None, private: bool, words: list[str], key: str | None) -> None:
        self.step()
        self.add(self.tenants[t], session, agent, kind, channel, source, project, private, words, key)

    @initialize()
    def seed(self) -> None:
        """Each tenant starts with the same shape of data under the same names: a leak has
        something to leak, and a filter something to confuse."""
        for tenant in self.tenants:
            for i, session in enumerate(SESSIONS * 2):
                self.add(tenant, session, AGENTS[i % 2], "turn", CHANNELS[i % 2], SOURCES[i % 3], PROJECTS[i % 3],
                         i == 3, [VOCAB[i], VOCAB[i + 1]], None)

    def add(self, tenant: str, session: str, agent: str, kind: str, channel: str | None, source: str | None,
            project: str | None, private: bool, words: list[str], key: str | None) -> None:
        self.written += 1
        content = f"{marker(tenant, agent if private else None)} {' '.join(words)} #{self.written}"
        # a private row's key is its author's own; a shared row's key is the tenant's
        scoped = (tenant, key, agent if private else None)
        earlier = self.keys.get(scoped) if key else None
        if earlier is not None and not self.mems[earlier].live:
            key, earlier = None, None  # a key whose memory was deleted: its fate is not this test's subject
        out = payload(self.call(
            "add_memory", tenant, session=session, agent=agent, content=content, type=kind, channel=channel,
            source={"id": source} if source else None, project_id=project,
            visibility="agent" if private else None, idempotency_key=key,
        ))
        if earlier is not None:
            self.expect(out["ref"] == earlier and out["created"] is False,
                        f"idempotent retry in {tenant} gave {out} instead of {earlier}")
            return
        self.expect(out["ref"] not in self.mems, f"{tenant} got another row's ref {out['ref']} (key {key})")
        self.mems[out["ref"]] = Mem(out["ref"], tenant, session, agent, kind, channel, source, project, private,
                                    content)
        self.run.expected[tenant].add(out["ref"])
        if key:
            self.keys[scoped] = out["ref"]

    @rule(t=st.integers(0, 2), session=st.sampled_from(SESSIONS), agent=st.sampled_from(AGENTS),
          words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6))
    def create_handoff(self, t: int, session: str, agent: str, words: list[str]) -> None:
        self.step()
        tenant = self.tenants[t]
        self.written += 1
        content = f"{marker(tenant)} handoff: {' '.join(words)} #{self.written}"
        out = payload(self.call("create_handoff", tenant, session=session, agent=agent, content=content))
        self.mems[out["ref"]] = Mem(out["ref"], tenant, session, agent, "handoff", None, None, None, False, content)
        self.run.expected[tenant].add(out["ref"])

    @rule(t=st.integers(0, 2), viewer=st.sampled_from(VIEWERS), data=st.data())
    def delete_memory(self, t: int, viewer: str | None, data: st.DataObject) -> None:
        if not self.mems:
            return
        self.step()
        tenant = self.tenants[t]
        ref = data.draw(st.sampled_from(sorted(self.mems)), label="ref")
        mem = self.mems[ref]
        result = self.call("delete_memory", tenant, viewer, ref=ref)
        should = mem.visible_to(tenant, viewer)  # a private row: its author only
        if should and mem.agent != viewer:  # the write scope: its own rows only
            self.expect(error_code(result) == "SCOPE_DENIED", f"delete of {mem.agent}'s {ref} as {viewer}: "
                                                               f"{result.content[0].text[:200]}")  # type: ignore[union-attr]
            return
        if should and mem.locked:
            self.expect(error_code(result) == "LOCKED", f"delete of locked {ref}: {result.content[0].text[:200]}")  # type: ignore[union-attr]
            return
        deleted = payload(result)["deleted"]
        self.expect(deleted == should, f"delete {ref} of {mem.tenant}/{mem.agent} as {tenant}/{viewer}: {deleted}")
        if should:
            mem.live = False
            self.run.expected[tenant].discard(ref)

    @rule(t=st.integers(0, 2), agent=st.sampled_from(AGENTS), data=st.data(),
          words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6))
    def update_memory(self, t: int, agent: str, data: st.DataObject, words: list[str]) -> None:
        """Correct any tenant's ref as ``agent``: a new version only where the model allows one."""
        if not self.mems:
            return
        self.step()
        tenant = self.tenants[t]
        ref = data.draw(st.sampled_from(sorted(self.mems)), label="ref")
        mem = self.mems[ref]
        self.written += 1
        # the text carries the marker the new version may show: this tenant's, and the author's if private
        content = f"{marker(tenant, mem.agent if mem.private else None)} corrected {' '.join(words)} #{self.written}"
        result = self.call("update_memory", tenant, ref=ref, agent=agent, content=content)
        want = ("NOT_FOUND" if not mem.visible_to(tenant, agent) else "SCOPE_DENIED" if mem.agent != agent
                else "INVALID_INPUT" if mem.type == "handoff" else "SUPERSEDED" if mem.superseded
                else "LOCKED" if mem.locked else None)
        self.expect(error_code(result) == want, f"update {ref} of {mem.tenant}/{mem.agent} as {tenant}/{agent}: "
                                                f"{result.content[0].text[:200]} (expected {want})")  # type: ignore[union-attr]
        if want is None:
            out = payload(result)
            self.expect(out["supersedes"] == ref and out["ref"] not in self.mems, f"update {ref}: {out}")
            mem.superseded = True
            self.mems[out["ref"]] = Mem(out["ref"], tenant, mem.session, agent, mem.type, mem.channel, mem.source_id,
                                        mem.project_id, mem.private, content)
            self.run.expected[tenant].add(out["ref"])

    @rule(t=st.integers(0, 2), viewer=st.sampled_from(VIEWERS), data=st.data(), lock=st.booleans())
    def lock_memory(self, t: int, viewer: str | None, data: st.DataObject, lock: bool) -> None:
        if not self.mems:
            return
        self.step()
        tenant = self.tenants[t]
        ref = data.draw(st.sampled_from(sorted(self.mems)), label="ref")
        mem = self.mems[ref]
        result = self.call("lock_memory" if lock else "unlock_memory", tenant, viewer, ref=ref)
        visible = mem.visible_to(tenant, viewer)
        own = visible and mem.agent == viewer  # the write scope: its own rows only
        want = "NOT_FOUND" if not visible else None if own else "SCOPE_DENIED"
        self.expect(error_code(result) == want,
                    f"lock={lock} {ref} as {tenant}/{viewer}: {result.content[0].text[:200]}")  # type: ignore[union-attr]
        if own:
            self.expect(payload(result)["changed"] == (mem.locked != lock), f"lock={lock} {ref}: changed is wrong")
            mem.locked = lock

    # ---- reads -----------------------------------------------------------------------------
    @rule(
        t=st.integers(0, 2), viewer=st.sampled_from(VIEWERS), words=st.lists(st.sampled_from(VOCAB), max_size=4),
        flt=st.sampled_from(("type", "session", "agent", "channel", "source_id", "project_id", "exclude", "none")),
        data=st.data(), deep=st.booleans(), full=st.booleans(), limit=st.integers(1, 50), with_context=st.booleans(),
    )
    def recall(self, t: int, viewer: str | None, words: list[str], flt: str, data: st.DataObject, deep: bool,
               full: bool, limit: int, with_context: bool) -> None:
        self.step()
        tenant = self.tenants[t]
        pools: dict[str, tuple[Any, ...]] = {
            "type": ("turn", "note", "handoff", "episode"), "session": SESSIONS, "agent": AGENTS,
            "channel": CHANNELS, "source_id": ("discord:", "discord:1", "slack:", "discord:12"),
            "project_id": ("", "p1", "p2"),
        }
        filters: dict[str, Any] = {}
        if flt in pools:
            filters[flt] = data.draw(st.sampled_from(pools[flt]), label=flt)
        elif flt == "exclude" and self.mems:
            # other tenants' texts too: excluding them must neither fail nor reveal anything
            filters["exclude_contents"] = [m.content for m in data.draw(
                st.lists(st.sampled_from(list(self.mems.values())), max_size=3), label="exclude")]
        context = None
        if with_context:
            own = [m.content for m in self.owned(tenant, None).values()]
            picked = data.draw(st.lists(st.sampled_from(own), max_size=3), label="context") if own else []
            context = [{"role": "user", "content": text} for text in picked] + [{"role": "user",
                                                                                "content": " ".join(words)}]
        tool = "recall_with_context" if context is not None else "recall"
        out = payload(self.call(tool, tenant, viewer, query=" ".join(words), limit=limit, deep=deep,
                                full_content=full or None, context=context, **filters))
        for row in expand_rows(out):
            self.check_row(row, tenant, viewer, preview=True)
            self.check_filters(row, filters, tenant)
            if not deep and row["ref"] in self.mems:
                self.expect(not self.mems[row["ref"]].superseded, f"recall returned superseded {row['ref']}")
            if context is not None:
                self.expect(row["content"] not in [c["content"] for c in context], f"{row['ref']} was in context")

    def check_filters(self, row: dict[str, Any], filters: dict[str, Any], tenant: str) -> None:
        # an episode (a session summary) records no channel or source: a channel filter admits it
        # only when its session holds a live shared memory in that channel (seed 002, issue 10 §7)
        episode = row.get("type") == "episode"
        for name in ("type", "session", "agent", "channel"):
            if name in filters and not (name == "channel" and episode):
                self.expect(row.get(name) == filters[name], f"{row['ref']}: {name}={row.get(name)!r} vs {filters}")
        if episode and "channel" in filters:
            self.expect(any(m.live and not m.private and m.tenant == tenant and m.session == row.get("session")
                            and m.channel == filters["channel"] for m in self.mems.values()),
                        f"{row['ref']}: session {row.get('session')!r} holds no shared row in {filters}")
        if "source_id" in filters and not (episode and "channel" in filters):
            source = str((row.get("source") or {}).get("id", ""))
            self.expect(source.startswith(filters["source_id"]), f"{row['ref']}: source {source!r} vs {filters}")
        if "project_id" in filters:
            allowed = {None, filters["project_id"] or None}
            self.expect(row.get("project_id") in allowed, f"{row['ref']}: project {row.get('project_id')} vs {filters}")
        if "exclude_contents" in filters and row["ref"] in self.mems:
            self.expect(self.mems[row["ref"]].content not in filters["exclude_contents"], f"{row['ref']} excluded")

    @rule(t=st.integers(0, 2), viewer=st.sampled_from(VIEWERS), data=st.data())
    def get_contents(self, t: int, viewer: str | None, data: st.DataObject) -> None:
        if not self.all_refs():
            return
        self.step()
        tenant = self.tenants[t]
        refs = data.draw(st.lists(st.sampled_from(self.all_refs()), min_size=1, max_size=18), label="refs")
        refs += data.draw(st.lists(st.sampled_from(["mem:0", "ep:999999999", "mem:x", "mem:99999999"]), max_size=2))
        out = payload(self.call("get_contents", tenant, viewer, refs=refs))
        expected = {r for r in refs if (r in self.mems and self.mems[r].visible_to(tenant, viewer))
                    or self.episodes.get(r, ("", ""))[0] == tenant}
        found = {row["ref"] for row in out["found"]}
        self.expect(found == expected, f"get_contents as {tenant}/{viewer}: found {found ^ expected} wrongly")
        self.expect(set(out["missing"]) == set(refs) - expected, "get_contents: missing is not the rest")
        for row in out["found"]:
            self.check_row(row, tenant, viewer, preview=False)

    @rule(t=st.integers(0, 2), viewer=st.sampled_from(VIEWERS), data=st.data())
    def check_memory(self, t: int, viewer: str | None, data: st.DataObject) -> None:
        if not self.all_refs():
            return
        self.step()
        tenant = self.tenants[t]
        ref = data.draw(st.sampled_from(self.all_refs()), label="ref")
        result = self.call("check_memory", tenant, viewer, ref=ref)
        mem = self.mems.get(ref)
        visible = mem.visible_to(tenant, viewer) if mem else self.episodes[ref][0] == tenant
        self.expect(error_code(result) == (None if visible else "NOT_FOUND"),
                    f"check_memory {ref} as {tenant}/{viewer}: {result.content[0].text[:200]}")  # type: ignore[union-attr]
        if visible:
            out = payload(result)
            self.check_row(out["memory"], tenant, viewer, preview=False)
            for side in ("previous", "next"):
                neighbour = out["neighbours"].get(side)
                if neighbour:
                    self.check_row(neighbour, tenant, viewer, preview=True)

    @rule(t=st.integers(0, 2), session=st.sampled_from(SESSIONS), viewer=st.sampled_from(VIEWERS),
          limit=st.integers(1, 7))
    def page_recent_turns(self, t: int, session: str, viewer: str | None, limit: int) -> None:
        self.step()
        tenant = self.tenants[t]
        seen: list[str] = []
        cursor = None
        while True:
            out = payload(self.call("query_recent_turns", tenant, viewer, session=session, limit=limit, cursor=cursor))
            for row in out["turns"]:
                self.check_row(row, tenant, viewer, preview=True)
            seen += [row["ref"] for row in out["turns"]]
            cursor = out["next_cursor"]
            if cursor is None:
                break
            self.cursors.append((tenant, session, cursor))
        expected = {r for r, m in self.owned(tenant, viewer).items() if m.session == session and m.type == "turn"}
        self.expect(len(seen) == len(set(seen)), f"pages repeated a turn: {seen}")
        self.expect(set(seen) == expected, f"pages of {tenant}/{session}: {set(seen) ^ expected} differ")

    @rule(t=st.integers(0, 2), session=st.sampled_from(SESSIONS), viewer=st.sampled_from(VIEWERS), data=st.data())
    def reuse_any_cursor(self, t: int, session: str, viewer: str | None, data: st.DataObject) -> None:
        if not self.cursors:
            return
        self.step()
        tenant = self.tenants[t]
        owner, owner_session, cursor = data.draw(st.sampled_from(self.cursors), label="cursor")
        result = self.call("query_recent_turns", tenant, viewer, session=session, cursor=cursor)
        mine = (owner, owner_session) == (tenant, session)
        self.expect(error_code(result) == (None if mine else "INVALID_CURSOR"),
                    f"cursor of {owner}/{owner_session} used by {tenant}/{session}: {result.content[0].text[:200]}")  # type: ignore[union-attr]
        if mine:
            for row in payload(result)["turns"]:
                self.check_row(row, tenant, viewer, preview=True)

    @rule(t=st.integers(0, 2), session=st.sampled_from(SESSIONS))
    def summarize_session(self, t: int, session: str) -> None:
        self.step()
        tenant = self.tenants[t]
        result = self.call("summarize_session", tenant, session=session)
        # summaries are built from shared rows only: a session of private rows has nothing to summarize
        has_rows = any(m.visible_to(tenant, None) and m.session == session and not m.superseded
                       for m in self.mems.values())
        if has_rows:
            self.expect(error_code(result) is None, f"summarize {tenant}/{session}: {result.content[0].text[:200]}")  # type: ignore[union-attr]
        if error_code(result) is None:
            ref = payload(result)["ref"]
            self.expect(self.episodes.get(ref, (tenant, session)) == (tenant, session), f"{ref} changed owner")
            self.episodes[ref] = (tenant, session)
        else:
            self.expect(error_code(result) == "NOT_FOUND", "summarize: unexpected error")

    @rule(t=st.integers(0, 2), session=st.sampled_from(SESSIONS), viewer=st.sampled_from(VIEWERS))
    def recover_context(self, t: int, session: str, viewer: str | None) -> None:
        self.step()
        tenant = self.tenants[t]
        out = payload(self.call("recover_context", tenant, viewer, session=session))
        handoffs = [m for m in self.owned(tenant, viewer).values() if m.session == session and m.type == "handoff"]
        newest = max(handoffs, key=lambda m: int(m.ref.split(":")[1])) if handoffs else None
        got = out["handoff"]["ref"] if out["handoff"] else None
        self.expect(got == (newest.ref if newest else None), f"recover {tenant}/{session}: handoff {got}")
        if out["handoff"]:
            self.check_row(out["handoff"], tenant, viewer, preview=False)
        for row in out["turns"]:
            self.check_row(row, tenant, viewer, preview=True)
        if out["summary"]:
            self.episodes[out["summary"]["ref"]] = (tenant, session)
        if out["next_cursor"]:
            self.cursors.append((tenant, session, out["next_cursor"]))

    @rule(t=st.integers(0, 2))
    def export(self, t: int) -> None:
        self.step()
        tenant = self.tenants[t]
        lines = list(export_tenant(self.run.server.core.operator_parts(), tenant))
        # An export is an operator's backup: the tenant's private rows belong in it, no other tenant's rows do.
        text = json.dumps(lines, ensure_ascii=False, default=str)
        foreign = [m for m in leaks(text, tenant, None) if not m.startswith(f"⟦{tenant}|")]
        self.run.row.leaked += len(foreign)
        assert not foreign, f"export of {tenant} leaked {foreign}"
        expected = {r: m for r, m in self.mems.items() if m.live and m.tenant == tenant}
        self.expect({line["ref"] for line in lines} == set(expected), f"export of {tenant} differs from the model")
        for line in lines:
            self.expect(line["tenant"] == tenant and line["content"] == expected[line["ref"]].content,
                        f"export line {line['ref']} differs")


@pytest.fixture(scope="module", params=graph_backends())
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """The server over SQLite + embedded Chroma, or over PostgreSQL + `chroma run` (a replica's stores)."""
    storage: dict[str, Any] = {}
    if request.param == "postgres":
        from testbed.postgres import fresh_database

        host, port = request.getfixturevalue("chroma_server")
        storage = {"graph": "postgres", "postgres_dsn": fresh_database(request.getfixturevalue("postgres_dsn")),
                   "chroma": "http", "chroma_host": host, "chroma_port": port,
                   "collection_prefix": "iso" + secrets.token_hex(4)}
    with in_process_server(tmp_path_factory.mktemp("isolation") / "data", storage=storage) as srv:
        yield srv


def test_no_row_of_one_tenant_ever_reaches_another_on_any_read_path(
    server: InProcessServer, results_row: Callable[[str], HarnessResult], request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["server"]
    row = results_row(f"isolation (3 tenants, stateful, {backend})")
    run = Run(server, row, {}, itertools.count())
    IsolationMachine.run = run
    batch = settings(max_examples=EXAMPLES_PER_BATCH, stateful_step_count=STEPS_PER_EXAMPLE, deadline=None,
                     suppress_health_check=list(HealthCheck))
    for _ in range(MAX_BATCHES):
        run_state_machine_as_test(IsolationMachine, settings=batch)
        if row.steps >= TARGET_STEPS:
            break
    row.examples = next(run.counter)
    for tenant, refs in sorted(run.expected.items()):
        assert set(tenant_view(server.core, tenant).graph) == refs, f"{tenant}: the store differs from the model"
    report = check_stores(server.core.operator_parts())
    row.notes = (f"{row.examples} examples x up to {STEPS_PER_EXAMPLE} steps; "
                 f"calls {row.details.get('calls', {})}; doctor: {len(report.findings)} findings")
    assert report.ok, report.to_dict()["findings"][:20]
    assert row.steps >= TARGET_STEPS, f"only {row.steps} steps ran"
