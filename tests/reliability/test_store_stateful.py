"""A hypothesis state machine over the store, checked against a plain Python model.

As Chroma tests its collections: random sequences of adds (single and batch, with fresh
and repeated idempotency keys, explicit and repeated timestamps), deletes (own, foreign,
already deleted, malformed), reopens, recent-turn paging with cursors (while turns
arrive and across a reopen) and batch reads with own, foreign and malformed refs, over
three tenants; corrections (update_memory: chains, stale versions, foreign and private refs)
and locks (lock/unlock, LOCKED updates and deletes). After every step: both stores hold exactly
the model's memories per tenant, every version link, validity end and lock is the model's,
and no row ever crosses a tenant.

`make test` runs a short profile; ``MEMORY_CORE_RELIABILITY=long`` a much longer one.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memory_core import MemoryCore, MemoryCoreError
from memory_core.models import from_us, iso, to_us
from tests.support.backends import open_core, store_backends
from tests.support.store_checks import LONG, assert_stores_agree

TENANTS = ("acme", "globex", "initech")
SESSIONS = ("s1", "s2", "s3")
AGENTS = ("alice", "bob")
DUPLICATE_WINDOW_US = 600 * 1_000_000  # the default limits.duplicate_window_s
BASE = datetime(2025, 1, 1, tzinfo=UTC)
# Few distinct explicit timestamps, so several turns of a session share one.
FIXED_TIMES = (BASE, BASE + timedelta(microseconds=1), BASE + timedelta(seconds=1), BASE + timedelta(hours=1))
MALFORMED_REFS: tuple[object, ...] = ("", "mem:", "mem:0", "mem:-1", "mem:x", "memory:1", "ep:1", " ", 42, None,
                                      "mem:1;DROP TABLE memories", "mem:１")
BAD_CURSORS = ("", "x", "a.b", "..", "eyJ4Ijo.abc", "é.é", "A" * 500)

PROFILES: dict[str, dict[str, int]] = {
    # backend: (examples, steps per example)
    "memory": {"max_examples": 300 if LONG else 60, "stateful_step_count": 60 if LONG else 40},
    "persistent": {"max_examples": 60 if LONG else 20, "stateful_step_count": 50 if LONG else 30},
    "http": {"max_examples": 20 if LONG else 6, "stateful_step_count": 40 if LONG else 25},
    "postgres": {"max_examples": 20 if LONG else 6, "stateful_step_count": 40 if LONG else 25},
}

contents = st.one_of(
    st.sampled_from(["hello", "Hello", "hello  world", "HELLO WORLD", "status update", "done"]),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=30).filter(
        lambda s: bool(s.strip())
    ),
)
timestamps = st.one_of(st.none(), st.sampled_from(FIXED_TIMES))
key_choices = st.sampled_from(["none", "none", "fresh", "reuse"])


def normalized_hash(text: str) -> str:
    """The duplicate-detection identity: whitespace-collapsed, case-folded content."""
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class ModelMemory:
    ref: str
    id: int
    tenant: str
    session: str
    agent: str
    content: str
    type: str
    ts_us: int
    key: str | None
    visibility: str = "tenant"

    @property
    def order(self) -> tuple[int, int]:
        return (self.ts_us, self.id)


@dataclass
class Model:
    """What the store should hold: live memories, deleted refs, idempotency keys."""

    live: dict[str, dict[str, ModelMemory]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    deleted: dict[str, set[str]] = field(default_factory=lambda: {t: set() for t in TENANTS})
    keys: dict[tuple[str, str], str] = field(default_factory=dict)
    issued_ids: set[int] = field(default_factory=set)
    key_counter: int = 0
    successor: dict[str, str] = field(default_factory=dict)  # ref -> the version that superseded it
    supersedes: dict[str, str] = field(default_factory=dict)  # ref -> the version it corrected
    locked: set[str] = field(default_factory=set)
    valid_to: dict[str, int] = field(default_factory=dict)  # ref -> when a correction or an end ended it
    ended: dict[str, str | None] = field(default_factory=dict)  # ref -> who ended it without a replacement

    def expected_refs(self) -> dict[str, set[str]]:
        return {t: set(rows) for t, rows in self.live.items()}

    def turns(self, tenant: str, session: str) -> list[ModelMemory]:
        rows = [m for m in self.live[tenant].values() if m.session == session and m.type == "turn"]
        return sorted(rows, key=lambda m: m.order, reverse=True)

    def duplicate_of(self, tenant: str, session: str, content: str, ts_us: int, agent: str = "",
                     corrects: str | None = None) -> str | None:
        """The newest same-content current version the writer can read; a superseded or ended version, and
        the version a correction replaces, are never what a write repeats."""
        h = normalized_hash(content)
        near = [
            m for m in self.live[tenant].values()
            if m.session == session and normalized_hash(m.content) == h and abs(m.ts_us - ts_us) <= DUPLICATE_WINDOW_US
            and (m.visibility != "agent" or m.agent == agent)
            and m.ref not in self.successor and m.ref not in self.ended and m.ref != corrects
        ]
        return max(near, key=lambda m: m.order).ref if near else None

    def new_key(self) -> str:
        self.key_counter += 1
        return f"key-{self.key_counter}"

    def all_key_names(self) -> list[str]:
        return sorted({k for (_t, k) in self.keys})


class StoreMachine(RuleBasedStateMachine):
    """Rules drive the public library API; invariants compare both stores with the model."""

    backend: ClassVar[str]
    root: ClassVar[Path]
    opener: ClassVar[Callable[[Path], MemoryCore]]

    def __init__(self) -> None:
        super().__init__()
        self.data_dir = Path(tempfile.mkdtemp(dir=self.root)) / "data"
        self.core = self.opener(self.data_dir)
        self.model = Model()

    def teardown(self) -> None:
        self.core.close()
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)

    # ---- helpers -------------------------------------------------------------------------
    def _item(self, tenant: str, session: str, agent: str, content: str, mtype: str, ts: datetime | None,
              key: str | None) -> dict[str, Any]:
        item: dict[str, Any] = {"tenant": tenant, "session": session, "agent": agent, "content": content,
                                "type": mtype}
        if mtype == "turn":
            item["role"] = "user" if agent == "alice" else "assistant"
        if ts is not None:
            item["timestamp"] = ts
        if key is not None:
            item["idempotency_key"] = key
        return item

    def _choose_key(self, data: st.DataObject, choice: str) -> str | None:
        if choice == "fresh" or (choice == "reuse" and not self.model.keys):
            return self.model.new_key()
        if choice == "reuse":
            return data.draw(st.sampled_from(self.model.all_key_names()), label="reused key")
        return None

    def _add_items(self, items: list[dict[str, Any]], batch: bool) -> None:
        results = self.core.add_memories(items) if batch else [self.core.add_memory(**items[0])]
        assert len(results) == len(items)
        batch_first: dict[tuple[str, str], Any] = {}
        for item, res in zip(items, results, strict=True):
            tenant, key = item["tenant"], item.get("idempotency_key")
            earlier = self.model.keys.get((tenant, key)) if key is not None else None
            if earlier is not None:
                assert res.ref == earlier, f"replayed key {key} returned {res.ref}, first write was {earlier}"
                assert res.created is False
                continue
            if key is not None and (tenant, key) in batch_first:
                assert res.ref == batch_first[(tenant, key)].ref and res.created is False
                continue
            assert res.created is True
            mem_id = int(res.ref.split(":", 1)[1])
            assert mem_id not in self.model.issued_ids, f"id {mem_id} was issued twice"
            assert all(mem_id > i for i in self.model.issued_ids), "ids must grow"
            ts_us = to_us(res.timestamp)
            if "timestamp" in item:
                assert ts_us == to_us(item["timestamp"])
            expected_dup = self.model.duplicate_of(tenant, item["session"], item["content"], ts_us, item["agent"])
            assert res.duplicate_of == expected_dup, (res, expected_dup)
            mem = ModelMemory(res.ref, mem_id, tenant, item["session"], item["agent"], item["content"],
                              item["type"], ts_us, key, item.get("visibility", "tenant"))
            self.model.issued_ids.add(mem_id)
            self.model.live[tenant][res.ref] = mem
            if key is not None:
                self.model.keys[(tenant, key)] = res.ref
                batch_first[(tenant, key)] = res

    def _refs_of_others(self, tenant: str) -> list[str]:
        return sorted(r for t in TENANTS if t != tenant for r in self.model.live[t])

    def _expect_error(self, code: str, fn: Callable[[], object]) -> None:
        with pytest.raises(MemoryCoreError) as info:
            fn()
        assert info.value.code == code, f"expected {code}, got {info.value.code}: {info.value.message}"

    # ---- rules ---------------------------------------------------------------------------
    @initialize(data=st.data(), sizes=st.lists(st.integers(0, 9), min_size=3, max_size=3))
    def seed(self, data: st.DataObject, sizes: list[int]) -> None:
        """Start with sessions long enough to page, their turns sharing a few timestamps."""
        for tenant, size in zip(TENANTS, sizes, strict=True):
            session = data.draw(st.sampled_from(SESSIONS), label=f"seed session of {tenant}")
            items = [self._item(tenant, session, AGENTS[i % 2], f"seed turn {i}", "turn",
                                FIXED_TIMES[i % 3], None) for i in range(size)]
            if items:
                self._add_items(items, batch=True)

    @rule(tenant=st.sampled_from(TENANTS), session=st.sampled_from(SESSIONS), n=st.integers(1, 6),
          ts=st.sampled_from([None, *FIXED_TIMES]))
    def turns_arrive_one_by_one(self, tenant: str, session: str, n: int, ts: datetime | None) -> None:
        for i in range(n):
            self._add_items([self._item(tenant, session, AGENTS[i % 2], f"turn {i} of {n}", "turn", ts, None)],
                            batch=False)

    @rule(data=st.data(), tenant=st.sampled_from(TENANTS), session=st.sampled_from(SESSIONS),
          agent=st.sampled_from(AGENTS), content=contents, mtype=st.sampled_from(["turn", "turn", "note"]),
          ts=timestamps, key_choice=key_choices)
    def add(self, data: st.DataObject, tenant: str, session: str, agent: str, content: str, mtype: str,
            ts: datetime | None, key_choice: str) -> None:
        key = self._choose_key(data, key_choice)
        self._add_items([self._item(tenant, session, agent, content, mtype, ts, key)], batch=False)

    @precondition(lambda self: bool(self.model.keys))
    @rule(data=st.data(), content=contents, session=st.sampled_from(SESSIONS))
    def retry_with_same_idempotency_key(self, data: st.DataObject, content: str, session: str) -> None:
        """A retried add (even with other content) returns the first ref and writes nothing."""
        tenant, key = data.draw(st.sampled_from(sorted(self.model.keys)), label="tenant/key")
        before = self.model.expected_refs()
        res = self.core.add_memory(tenant, session, "alice", content, idempotency_key=key)
        assert res.ref == self.model.keys[(tenant, key)] and res.created is False
        assert self.model.expected_refs() == before

    @rule(data=st.data(), n=st.integers(1, 5), tenant_mix=st.booleans())
    def add_batch(self, data: st.DataObject, n: int, tenant_mix: bool) -> None:
        first_tenant = data.draw(st.sampled_from(TENANTS), label="tenant")
        items = []
        for _ in range(n):
            tenant = data.draw(st.sampled_from(TENANTS)) if tenant_mix else first_tenant
            key_choice = data.draw(key_choices, label="key choice")
            key = self._choose_key(data, key_choice)
            if key is None and items and data.draw(st.booleans(), label="repeat a key inside the batch"):
                key = items[-1].get("idempotency_key")
            items.append(self._item(tenant, data.draw(st.sampled_from(SESSIONS)), data.draw(st.sampled_from(AGENTS)),
                                    data.draw(contents), data.draw(st.sampled_from(["turn", "note"])),
                                    data.draw(timestamps), key))
        self._add_items(items, batch=True)

    @rule(data=st.data(), tenant=st.sampled_from(TENANTS),
          which=st.sampled_from(["own", "own", "foreign", "deleted", "other-kind"]))
    def delete(self, data: st.DataObject, tenant: str, which: str) -> None:
        if which == "own" and self.model.live[tenant]:
            ref = data.draw(st.sampled_from(sorted(self.model.live[tenant])), label="own ref")
            if ref in self.model.locked:
                self._expect_error("LOCKED", lambda: self.core.delete_memory_as_operator(tenant, ref))
                return
            assert self.core.delete_memory_as_operator(tenant, ref) is True
            mem = self.model.live[tenant].pop(ref)
            self.model.deleted[tenant].add(ref)
            self.model.ended.pop(ref, None)
            # the chain keeps its other versions: an older one stays superseded, a newer one's link dangles
            older = self.model.supersedes.pop(ref, None)
            if older is not None and self.model.successor.get(older) == ref:
                self.model.successor[older] = "(deleted)"
            newer = self.model.successor.pop(ref, None)
            if newer is not None and newer in self.model.supersedes:
                self.model.supersedes[newer] = "(deleted)"
            if mem.key is not None:
                del self.model.keys[(tenant, mem.key)]
        elif which == "foreign" and self._refs_of_others(tenant):
            ref = data.draw(st.sampled_from(self._refs_of_others(tenant)), label="foreign ref")
            assert self.core.delete_memory(tenant, ref) is False  # the invariants check it survived
        elif which == "deleted" and self.model.deleted[tenant]:
            ref = data.draw(st.sampled_from(sorted(self.model.deleted[tenant])), label="deleted ref")
            assert self.core.delete_memory(tenant, ref) is False
        else:
            assert self.core.delete_memory(tenant, "ep:1") is False

    @rule(tenant=st.sampled_from(TENANTS), ref=st.sampled_from([r for r in MALFORMED_REFS if r != "ep:1"]))
    def delete_malformed_ref_is_a_coded_error(self, tenant: str, ref: object) -> None:
        self._expect_error("INVALID_REF", lambda: self.core.delete_memory(tenant, ref))  # type: ignore[arg-type]

    @precondition(lambda self: self.backend != "memory")
    @rule()
    def reopen(self) -> None:
        self.core.close()
        self.core = self.opener(self.data_dir)
        assert self.core.operator_parts().recovered == ()  # nothing was interrupted (a tuple)

    @rule(data=st.data(), tenant=st.sampled_from(TENANTS), session=st.sampled_from(SESSIONS),
          limit=st.integers(1, 7), meanwhile=st.sampled_from(["nothing", "nothing", "add", "reopen"]),
          busiest=st.booleans())
    def page_recent_turns(self, data: st.DataObject, tenant: str, session: str, limit: int, meanwhile: str,
                          busiest: bool) -> None:
        """Page to the end; in between, turns may arrive (old or new timestamps) or the store may reopen."""
        if busiest:  # the longest session, so that most walks take several pages
            tenant, session = max(((t, s) for t in TENANTS for s in SESSIONS),
                                  key=lambda ts: len(self.model.turns(*ts)))
        if meanwhile == "reopen" and self.backend == "memory":
            meanwhile = "nothing"
        expected = {m.ref for m in self.model.turns(tenant, session)}
        seen: list[str] = []
        cursor: str | None = None
        last_key: tuple[int, int] | None = None
        pages = 0
        while True:
            page = self.core.query_recent_turns(tenant, session, limit=limit, cursor=cursor)
            pages += 1
            assert pages <= len(self.model.live[tenant]) + 2, "paging does not terminate"
            assert len(page.turns) <= limit
            assert page.turns or cursor is None, "a next_cursor led to an empty page"
            for row in page.turns:
                assert row.tenant == tenant and row.session == session and row.type == "turn"
                mem = self.model.live[tenant].get(row.ref)
                assert mem is not None, f"{row.ref} is not a live memory of {tenant}"
                assert row.content == mem.content and to_us(row.timestamp) == mem.ts_us
                key = (mem.ts_us, mem.id)
                assert last_key is None or key < last_key, "pages must be strictly newest-first, no repeats"
                last_key = key
                seen.append(row.ref)
            if page.next_cursor is None:
                break
            assert len(page.turns) == limit, "a short page must be the last"
            cursor = page.next_cursor
            if meanwhile == "add" and data.draw(st.booleans(), label="add between pages"):
                ts = data.draw(st.sampled_from(FIXED_TIMES), label="ts of arriving turn")
                self._add_items([self._item(tenant, session, "bob", "arrives while paging", "turn", ts, None)],
                                batch=False)
                new = max(self.model.live[tenant].values(), key=lambda m: m.id)
                if last_key is not None and new.order < last_key:
                    expected.add(new.ref)  # older than the cursor: this walk must still return it
            elif meanwhile == "reopen" and data.draw(st.booleans(), label="reopen between pages"):
                self.reopen()
        assert len(seen) == len(set(seen))
        assert set(seen) == expected, f"missing {expected - set(seen)}, extra {set(seen) - expected}"
        if meanwhile == "nothing":
            assert seen == [m.ref for m in self.model.turns(tenant, session)]

    @precondition(lambda self: any(len(self.model.turns(t, s)) >= 2 for t in TENANTS for s in SESSIONS))
    @rule(data=st.data(), bad=st.sampled_from(BAD_CURSORS))
    def foreign_or_malformed_cursor_is_refused(self, data: st.DataObject, bad: str) -> None:
        tenant, session = data.draw(st.sampled_from(
            [(t, s) for t in TENANTS for s in SESSIONS if len(self.model.turns(t, s)) >= 2]))
        cursor = self.core.query_recent_turns(tenant, session, limit=1).next_cursor
        assert cursor is not None
        other_tenant = data.draw(st.sampled_from([t for t in TENANTS if t != tenant]))
        other_session = data.draw(st.sampled_from([s for s in SESSIONS if s != session]))
        tampered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
        for t, s, c in ((other_tenant, session, cursor), (tenant, other_session, cursor), (tenant, session, tampered),
                        (tenant, session, bad)):
            self._expect_error("INVALID_CURSOR", lambda t=t, s=s, c=c: self.core.query_recent_turns(t, s, 3, c))

    @rule(data=st.data(), tenant=st.sampled_from(TENANTS), n_own=st.integers(0, 5), n_foreign=st.integers(0, 3),
          n_deleted=st.integers(0, 2), malformed=st.lists(st.sampled_from(MALFORMED_REFS), max_size=3))
    def get_contents(self, data: st.DataObject, tenant: str, n_own: int, n_foreign: int, n_deleted: int,
                     malformed: list[object]) -> None:
        """Own refs resolve to full rows; foreign, deleted and malformed ones land in missing."""
        own_pool = sorted(self.model.live[tenant])
        own = data.draw(st.lists(st.sampled_from(own_pool), max_size=n_own)) if own_pool else []
        foreign_pool = self._refs_of_others(tenant)
        foreign = data.draw(st.lists(st.sampled_from(foreign_pool), max_size=n_foreign, unique=True)) \
            if foreign_pool else []
        deleted_pool = sorted(self.model.deleted[tenant])
        deleted = data.draw(st.lists(st.sampled_from(deleted_pool), max_size=n_deleted, unique=True)) \
            if deleted_pool else []
        refs: list[object] = data.draw(st.permutations([*own, *foreign, *deleted, *malformed]), label="refs")
        result = self.core.get_contents(tenant, refs)
        live = self.model.live[tenant]  # (private rows are read by no viewer here: missing)
        want_found = [r for r in refs if isinstance(r, str) and r in live and live[r].visibility != "agent"]
        assert [row.ref for row in result.found if row.type != "episode"] == want_found
        assert len(result.found) + len(result.missing) == len(refs)  # every ref sent is answered once
        for row in result.found:
            mem = self.model.live[tenant][row.ref]
            assert row.tenant == tenant and row.content == mem.content and row.session == mem.session
            assert row.agent == mem.agent and to_us(row.timestamp) == mem.ts_us
        for ref in [*foreign, *deleted]:
            assert ref in result.missing, f"{ref} should read as missing in {tenant}"
        assert len(result.missing) >= len(foreign) + len(deleted) + sum(
            1 for m in malformed if not (isinstance(m, str) and m == "ep:1"))

    @rule(data=st.data(), tenant=st.sampled_from(TENANTS))
    def check_memory_sees_only_own_rows(self, data: st.DataObject, tenant: str) -> None:
        if self.model.live[tenant]:
            ref = data.draw(st.sampled_from(sorted(self.model.live[tenant])))
            mem = self.model.live[tenant][ref]
            assert self.core.check_memory(tenant, ref, viewer=mem.agent).memory.content == mem.content
        foreign = self._refs_of_others(tenant)
        if foreign:
            ref = data.draw(st.sampled_from(foreign))
            self._expect_error("NOT_FOUND", lambda: self.core.check_memory(tenant, ref))

    # ---- versions and locks ------------------------------------------------------------------
    def _private_ok(self, mem: ModelMemory, agent: str) -> bool:
        return mem.visibility != "agent" or mem.agent == agent

    @precondition(lambda self: any(self.model.live.values()))
    @rule(data=st.data(), content=contents, agent=st.sampled_from(AGENTS), head=st.booleans())
    def update(self, data: st.DataObject, content: str, agent: str, head: bool) -> None:
        """Correct a memory as ``agent``: a new version, or the refusal the model predicts."""
        tenant = data.draw(st.sampled_from([t for t in TENANTS if self.model.live[t]]), label="tenant")
        pool = sorted(r for r in self.model.live[tenant] if not head or r not in self.model.successor)
        ref = data.draw(st.sampled_from(pool or sorted(self.model.live[tenant])), label="ref to update")
        old = self.model.live[tenant][ref]
        if not self._private_ok(old, agent):
            self._expect_error("NOT_FOUND", lambda: self.core.update_memory(tenant, ref, content=content, agent=agent))
            return
        if ref in self.model.successor or ref in self.model.ended:  # an ended fact is revived, not corrected
            self._expect_error("SUPERSEDED", lambda: self.core.update_memory(tenant, ref, content=content, agent=agent))
            return
        if ref in self.model.locked:
            self._expect_error("LOCKED", lambda: self.core.update_memory(tenant, ref, content=content, agent=agent))
            return
        res = self.core.update_memory(tenant, ref, content=content, agent=agent)
        assert res.supersedes == ref and res.added.created
        mem_id = int(res.added.ref.split(":", 1)[1])
        assert all(mem_id > i for i in self.model.issued_ids), "ids must grow"
        ts_us = to_us(res.added.timestamp)
        assert ts_us > old.ts_us, "a new version is later than the one it corrects"
        assert res.added.duplicate_of == self.model.duplicate_of(tenant, old.session, content, ts_us, agent,
                                                             corrects=ref)
        self.model.issued_ids.add(mem_id)
        self.model.live[tenant][res.added.ref] = ModelMemory(res.added.ref, mem_id, tenant, old.session, agent,
                                                             content, old.type, ts_us, None, old.visibility)
        self.model.successor[ref] = res.added.ref
        self.model.supersedes[res.added.ref] = ref
        self.model.valid_to[ref] = ts_us
        viewer = old.agent if old.visibility == "agent" else None
        shown = {r.ref for r in self.core.recall(tenant, "", limit=50, viewer=viewer).messages}
        assert not shown & set(self.model.successor), "recall returned a superseded version"
        chain = [r.ref for r in self.core.history_as_operator(tenant, res.added.ref)]
        assert chain[-2:] == [ref, res.added.ref] and chain == self._model_chain(ref)

    def _model_chain(self, ref: str) -> list[str]:
        back = [ref]
        while (prev := self.model.supersedes.get(back[0])) not in (None, "(deleted)"):
            back.insert(0, str(prev))
        while (succ := self.model.successor.get(back[-1])) not in (None, "(deleted)"):
            back.append(str(succ))
        return back

    @precondition(lambda self: any(self.model.live.values()))
    @rule(data=st.data(), lock=st.booleans())
    def lock_or_unlock(self, data: st.DataObject, lock: bool) -> None:
        tenant = data.draw(st.sampled_from([t for t in TENANTS if self.model.live[t]]), label="tenant")
        ref = data.draw(st.sampled_from(sorted(self.model.live[tenant])), label="ref to lock")
        mem = self.model.live[tenant][ref]
        act = self.core.lock_memory if lock else self.core.unlock_memory
        changed = act(tenant, ref, viewer=mem.agent)
        assert changed == ((ref in self.model.locked) != lock)
        (self.model.locked.add if lock else self.model.locked.discard)(ref)

    @precondition(lambda self: any(self.model.live.values()))
    @rule(data=st.data(), end=st.booleans(), agent=st.sampled_from(AGENTS))
    def end_or_revive(self, data: st.DataObject, end: bool, agent: str) -> None:
        """End a fact without a replacement, or revive it, as ``agent``: the change or the refusal the model
        predicts; recall never shows an ended fact."""
        tenant = data.draw(st.sampled_from([t for t in TENANTS if self.model.live[t]]), label="tenant")
        ref = data.draw(st.sampled_from(sorted(self.model.live[tenant])), label="ref to end or revive")
        mem = self.model.live[tenant][ref]

        def act() -> Any:
            if end:
                return self.core.end_memory(tenant, ref, "no longer true", agent=agent)
            return self.core.revive_memory(tenant, ref, agent=agent)

        if not self._private_ok(mem, agent):
            self._expect_error("NOT_FOUND", act)
            return
        if ref in self.model.successor:
            self._expect_error("SUPERSEDED", act)
            return
        if end == (ref in self.model.ended):  # ended already, or not ended: nothing changes
            assert act().changed is False
            return
        if ref in self.model.locked:
            self._expect_error("LOCKED", act)
            return
        res = act()
        assert res.changed is True
        if end:
            assert res.valid_to is not None and res.reason == "no longer true"
            self.model.ended[ref] = agent
            self.model.valid_to[ref] = to_us(datetime.fromisoformat(res.valid_to))
        else:
            assert res.valid_to is None
            del self.model.ended[ref]
            del self.model.valid_to[ref]
        viewer = mem.agent if mem.visibility == "agent" else None
        shown = {r.ref for r in self.core.recall(tenant, "", limit=50, viewer=viewer, collapse=False).messages}
        assert not shown & set(self.model.ended), "recall returned an ended fact"

    @precondition(lambda self: any(self.model.live.values()))
    @rule(data=st.data(), tenant=st.sampled_from(TENANTS), viewer=st.sampled_from([None, *AGENTS]),
          step=st.sampled_from([-1, 0, 1]))
    def as_of_reads_what_was_valid_then(self, data: st.DataObject, tenant: str, viewer: str | None,
                                        step: int) -> None:
        """An as_of recall returns exactly the tenant's rows the viewer may read that were valid at that
        instant (begun by then, not ended or corrected by then), newest first; another tenant's refs read as
        missing at any instant."""
        live = self.model.live
        instants = sorted({m.ts_us for t in TENANTS for m in live[t].values()} | set(self.model.valid_to.values()))
        at_us = data.draw(st.sampled_from(instants), label="instant") + step
        want = sorted((m for m in live[tenant].values() if self._private_ok(m, viewer or "") and m.ts_us <= at_us
                       and self.model.valid_to.get(m.ref, at_us + 1) > at_us), key=lambda m: m.order, reverse=True)
        got = self.core.recall(tenant, "", limit=50, viewer=viewer, collapse=False, as_of=iso(from_us(at_us)))
        assert [r.ref for r in got.messages] == [m.ref for m in want[:50]]
        foreign = self._refs_of_others(tenant)[:5]
        if foreign:
            assert self.core.get_contents(tenant, foreign, as_of=iso(from_us(at_us))).found == []
        valid = [m.ref for m in want[:5]]
        assert [r.ref for r in self.core.get_contents(tenant, valid, viewer=viewer,
                                                      as_of=iso(from_us(at_us))).found] == valid

    @rule(data=st.data(), tenant=st.sampled_from(TENANTS), content=contents)
    def private_memories_are_corrected_only_by_their_author(self, data: st.DataObject, tenant: str,
                                                            content: str) -> None:
        """alice's private note: bob (and the anonymous caller) find nothing to update or lock."""
        self._add_items([self._item(tenant, "s1", "alice", content, "note", None, None) | {"visibility": "agent"}],
                        batch=False)
        ref = max(self.model.live[tenant].values(), key=lambda m: m.id).ref
        for fn in (lambda: self.core.update_memory(tenant, ref, content="bob's edit", agent="bob"),
                   lambda: self.core.update_memory(tenant, ref, content="nobody's edit"),
                   lambda: self.core.lock_memory(tenant, ref, viewer="bob")):
            self._expect_error("NOT_FOUND", fn)
        foreign = self._refs_of_others(tenant)
        if foreign:
            other = data.draw(st.sampled_from(foreign), label="foreign ref")
            self._expect_error("NOT_FOUND", lambda: self.core.update_memory(tenant, other, content="x", agent="bob"))
            self._expect_error("NOT_FOUND", lambda: self.core.lock_memory(tenant, other))

    # ---- invariants ------------------------------------------------------------------------
    @invariant()
    def both_stores_hold_exactly_the_model(self) -> None:
        views = assert_stores_agree(self.core, self.model.expected_refs())
        assert set(views) <= set(TENANTS), f"rows under unknown tenants: {set(views) - set(TENANTS)}"
        for tenant in TENANTS:
            for ref, mem in self.model.live[tenant].items():
                attrs = self.core._graph.memory(tenant, mem.id)
                assert attrs is not None and attrs.tenant == tenant, f"{ref} crossed tenants"
                assert attrs.session == mem.session and attrs.ts_us == mem.ts_us
                assert attrs.locked == (ref in self.model.locked), f"{ref}: lock state"
                succ = self.model.successor.get(ref)
                want_end = None if succ is None else (
                    self.model.live[tenant][succ].ts_us if succ in self.model.live[tenant] else attrs.valid_to_us)
                if ref in self.model.ended:
                    want_end = self.model.valid_to[ref]
                    assert (attrs.end_reason, attrs.ended_by) == ("no longer true", self.model.ended[ref]), ref
                else:
                    assert attrs.end_reason is None and attrs.ended_by is None, ref
                assert (attrs.valid_to_us is not None) == (want_end is not None) and attrs.valid_to_us == want_end, ref
                prev = self.model.supersedes.get(ref)
                if prev is None:
                    assert attrs.supersedes_id is None, ref
                elif prev != "(deleted)":
                    assert attrs.supersedes_id == self.model.live[tenant][prev].id, ref
                for other in TENANTS:
                    if other != tenant:
                        assert self.core._graph.memory(other, mem.id) is None

    @invariant()
    def session_neighbours_are_the_models(self) -> None:
        """Recall's neighbour read (kept between steps while a session is unwritten, on SQLite)
        answers each memory's previous and next memory of its session, as the model orders them."""
        for tenant in TENANTS:
            live = self.model.live[tenant].values()
            ordered: dict[str, list[ModelMemory]] = {}
            for mem in sorted(live, key=lambda m: m.order):
                ordered.setdefault(mem.session, []).append(mem)
            want = {}
            for rows in ordered.values():
                for i, mem in enumerate(rows):
                    before = rows[i - 1].order if i else None
                    after = rows[i + 1].order if i + 1 < len(rows) else None
                    want[mem.id] = (before, after)
            nodes = self.core._graph.memories(tenant, [m.id for m in live]).values()
            assert self.core._graph.adjacent_many(tenant, nodes) == want, tenant


@pytest.mark.parametrize("backend", store_backends("memory", "persistent", "http", "postgres"))
def test_store_matches_a_plain_model_under_random_operations(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Adds, retries, deletes, reopens, paging and batch reads keep both stores equal to the model."""
    class Machine(StoreMachine):
        pass

    Machine.backend = backend
    Machine.root = tmp_path
    # the model stores every add it is given: write-time hygiene (an agent's repeat, "ok") has its own tests
    # (tests/memory_core/write/test_hygiene.py), and idempotent retries under it are held there too
    Machine.opener = staticmethod(  # type: ignore[assignment]
        lambda data_dir: open_core(backend, data_dir, request, hygiene={"enabled": False}))
    run_state_machine_as_test(
        Machine,
        settings=settings(
            **PROFILES[backend], deadline=None, suppress_health_check=list(HealthCheck), print_blob=True,
        ),
    )


def test_cursor_with_non_ascii_characters_reads_as_invalid_cursor(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    core = open_core("memory", tmp_path / "data", request)
    try:
        for i in range(3):
            core.add_memory("acme", "s1", "alice", f"turn {i}")
        cursor = core.query_recent_turns("acme", "s1", limit=1).next_cursor
        assert cursor is not None
        body = cursor.split(".")[0]
        for bad in (f"{body}.é", "abc.é", f"{body}.{'ü' * 24}"):
            with pytest.raises(MemoryCoreError) as info:
                core.query_recent_turns("acme", "s1", limit=1, cursor=bad)
            assert info.value.code == "INVALID_CURSOR"
    finally:
        core.close()
