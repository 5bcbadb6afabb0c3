"""The two halves of the crash test, each run as its own process.

``python -m tests.support.crash_writer <data_dir> <ack_file>`` opens the store (embedded
Chroma and SQLite, or the ``--storage`` JSON's settings: PostgreSQL, a Chroma server; always
the deterministic embedder) and adds memories from a few threads for ever:
single adds, batch adds, retries with an idempotency key, explicit (shared) timestamps,
and now and then a delete of one of its own memories; beside them a fleet of threads adds only
single memories, which the write path's group commit writes as batches formed from concurrent
callers (its batch counts are logged as ``batches`` lines). After a call returns it appends
the outcome to the ack file and fsyncs, so every line there is a promise the store made.
The parent test SIGKILLs it at a random instant.

``python -m tests.support.crash_writer --verify <data_dir> <ack_file>`` reopens the store
in a fresh process (so recovery runs as it would after a real crash) and checks every
promise, then prints a JSON summary; it exits non-zero with the reason on any failure.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import random
import signal
import sys
import threading
import time
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.models import to_us
from memory_core.refs import memory_ref
from memory_core.settings import load_settings
from tests.support.store_checks import assert_stores_agree

TENANTS = ("acme", "globex", "initech")
SESSIONS = ("s1", "s2")
THREADS = 3
FLEET = 5  # threads adding one memory a call, as a fleet of agents does
BASE = datetime(2025, 6, 1, tzinfo=UTC)
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


def open_store(data_dir: Path, storage: dict[str, Any] | None = None) -> MemoryCore:
    """The configuration both halves use: ``storage`` (default: embedded Chroma and SQLite), the
    hash embedder, no env or config file."""
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, "storage": storage or {}})
    return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder())


class AckLog:
    """Append-only JSON lines, fsynced after each line, shared by the writer threads."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            os.write(self._fd, line)
            os.fsync(self._fd)


def read_acks(path: Path) -> list[dict[str, Any]]:
    """Complete lines only: a line the kill cut short was never a promise."""
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().split(b"\n"):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def writer_thread(core: MemoryCore, log: AckLog, worker: int, seed: int, *, singles: bool = False) -> None:
    """Adds, batch adds, retries, corrections and deletes for ever; ``singles``: one memory a call only."""
    rng = random.Random(seed)
    mine: list[dict[str, Any]] = []
    n = 0
    while True:
        n += 1
        op = rng.random()
        if op < 0.06 and mine:
            victim = mine.pop(rng.randrange(len(mine)))
            log.write({"op": "deleting", "ref": victim["ref"], "tenant": victim["tenant"]})
            removed = core.delete_memory(victim["tenant"], victim["ref"])
            log.write({"op": "deleted" if removed else "error", "ref": victim["ref"], "tenant": victim["tenant"],
                       "detail": "" if removed else "delete of an acknowledged memory returned False"})
            continue
        if op < 0.10 and mine:
            # A correction: a new version that supersedes one of its own current memories. Deletes
            # never pick a version that has been corrected or that corrects another (so every chain
            # verified after the kill is whole).
            target = mine.pop(rng.randrange(len(mine)))
            log.write({"op": "updating", "ref": target["ref"], "tenant": target["tenant"]})
            text = f"w{worker} n{n} corrected " + " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))
            upd = core.update_memory(target["tenant"], target["ref"], content=text)
            log.write({"op": "updated", "ref": upd.added.ref, "supersedes": target["ref"], "tenant": target["tenant"],
                       "session": target["session"], "content": text, "key": None,
                       "ts_us": to_us(upd.added.timestamp)})
            continue
        if op < 0.12 and mine:
            # An agent retrying a call that (from its view) timed out: same key, same tenant.
            first = rng.choice([m for m in mine if m.get("key")] or mine)
            if first.get("key"):
                res = core.add_memory(first["tenant"], first["session"], "retry", "retried content",
                                      idempotency_key=first["key"])
                if res.ref != first["ref"] or res.created:
                    log.write({"op": "error", "detail": f"retry of {first['key']} gave {res.ref}, not {first['ref']}"})
                continue
        batch = 1 if singles or rng.random() < 0.6 else rng.randint(2, 12)
        items = []
        for j in range(batch):
            tenant, session = rng.choice(TENANTS), rng.choice(SESSIONS)
            item: dict[str, Any] = {
                "tenant": tenant, "session": session, "agent": f"agent{worker}",
                "content": f"w{worker} n{n}.{j} " + " ".join(rng.choices(WORDS, k=rng.randint(1, 12))),
                "type": "turn" if rng.random() < 0.8 else "note", "role": "user",
            }
            if rng.random() < 0.3:
                item["idempotency_key"] = f"w{worker}-{seed}-{n}-{j}"
            if rng.random() < 0.3:  # shared explicit timestamps: ties in the recent-turn order
                item["timestamp"] = (BASE + timedelta(seconds=rng.randint(0, 3))).isoformat()
            items.append(item)
        results = core.add_memories(items) if batch > 1 else [core.add_memory(**items[0])]
        for item, res in zip(items, results, strict=True):
            record = {"op": "add", "ref": res.ref, "tenant": item["tenant"], "session": item["session"],
                      "content": item["content"], "key": item.get("idempotency_key"),
                      "ts_us": to_us(res.timestamp)}
            log.write(record)
            mine.append(record)


def run_writer(data_dir: Path, ack_file: Path, seed: int, storage: dict[str, Any] | None = None) -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a writer that stalls shows where (to stderr)
    core = open_store(data_dir, storage)
    log = AckLog(ack_file)
    log.write({"op": "opened", "pid": os.getpid(), "recovered": len(core.operator_parts().recovered)})
    failures: list[str] = []

    def guarded(worker: int) -> None:
        try:
            writer_thread(core, log, worker, seed * 100 + worker, singles=worker >= THREADS)
        except BaseException:
            failures.append(traceback.format_exc())
            log.write({"op": "error", "detail": traceback.format_exc()[-2000:]})

    def batch_counts() -> None:
        while core._writer.batches is not None:
            time.sleep(0.2)
            log.write({"op": "batches", **core._writer.batches.stats()})

    threads = [threading.Thread(target=guarded, args=(w,), daemon=True) for w in range(THREADS + FLEET)]
    threading.Thread(target=batch_counts, daemon=True).start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)  # the writer only ends by being killed, or by a failure


# ---- verification (a fresh process) ----------------------------------------------------------
def verify(data_dir: Path, ack_file: Path, storage: dict[str, Any] | None = None) -> dict[str, Any]:
    acks = read_acks(ack_file)
    errors = [a["detail"] for a in acks if a.get("op") == "error"]
    assert not errors, f"the writer reported errors: {errors[:3]}"
    added = {a["ref"]: a for a in acks if a.get("op") in ("add", "updated")}
    deleting = {a["ref"] for a in acks if a.get("op") == "deleting"}
    deleted = {a["ref"] for a in acks if a.get("op") == "deleted"}
    core = open_store(data_dir, storage)
    try:
        recovered = core.operator_parts().recovered
        views = assert_stores_agree(core)  # same ids everywhere, FTS complete, journal empty
        live = {t: v.graph for t, v in views.items()}
        must_exist = {ref: a for ref, a in added.items() if ref not in deleting}
        lost = [ref for ref, a in must_exist.items() if ref not in live.get(a["tenant"], set())]
        assert not lost, f"{len(lost)} acknowledged adds are missing after reopen: {sorted(lost)[:10]}"
        resurrected = [ref for ref in deleted if any(ref in refs for refs in live.values())]
        assert not resurrected, f"acknowledged deletes came back: {resurrected[:10]}"
        by_tenant: dict[str, list[str]] = {}
        for ref, a in must_exist.items():
            by_tenant.setdefault(a["tenant"], []).append(ref)
        for tenant, refs in by_tenant.items():
            for start in range(0, len(refs), 200):
                chunk = refs[start : start + 200]
                got = core.get_contents(tenant, chunk)
                assert not got.missing, f"get_contents misses acknowledged refs {got.missing[:5]}"
                for row in got.found:
                    want = must_exist[row.ref]
                    assert row.content == want["content"], f"{row.ref}: content changed"
                    assert row.session == want["session"] and to_us(row.timestamp) == want["ts_us"]
        versions = _check_versions(core, acks, live)
        keys = [a for a in must_exist.values() if a.get("key")]
        for a in keys[:50]:
            res = core.add_memory(a["tenant"], a["session"], "verifier", "replay", idempotency_key=a["key"])
            assert res.ref == a["ref"] and not res.created, f"idempotency key {a['key']} lost its ref"
        for tenant, refs in live.items():
            for mem_id in (int(r.split(":", 1)[1]) for r in refs):
                kinds = {e.kind for e in core._graph.edges_of(tenant, memory_ref(mem_id)) if e.direction == "out"}
                assert {"AUTHORED_BY", "IN_SESSION"} <= kinds, f"mem:{mem_id} lacks its edges: {kinds}"
        pages = 0
        for tenant in live:
            for session in SESSIONS:
                turns = [
                    a for a in (core._graph.memory(tenant, int(r.split(":", 1)[1])) for r in live[tenant])
                    if a is not None and a.session == session and a.type == "turn"
                ]
                want = sorted((a.key for a in turns), reverse=True)
                got_keys: list[tuple[int, int]] = []
                cursor = None
                while True:
                    page = core.query_recent_turns(tenant, session, limit=25, cursor=cursor)
                    pages += 1
                    got_keys += [(to_us(r.timestamp), r.id) for r in page.turns]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                assert got_keys == want, f"{tenant}/{session}: recent-turn paging differs from the graph"
        return {
            "acknowledged": len(added), "must_exist": len(must_exist), "deleted": len(deleted),
            "memories": sum(len(v) for v in live.values()), "recovered": len(recovered), "pages": pages,
            "recovered_actions": sorted({r["action"] for r in recovered}), "versions": versions,
        }
    finally:
        core.close()


def _check_versions(core: MemoryCore, acks: list[dict[str, Any]], live: dict[str, set[str]]) -> int:
    """Each correction is all or nothing: an acknowledged one is whole (the new version links the old,
    whose validity ends at the new one's time); one the kill interrupted left the old version current,
    or (its graph write had committed) whole too. No memory is superseded without a successor."""
    updated = {a["supersedes"]: a for a in acks if a.get("op") == "updated"}
    for a in acks:
        if a.get("op") != "updating":
            continue
        old = core._graph.memory(a["tenant"], int(a["ref"].split(":", 1)[1]))
        assert old is not None, f"{a['ref']}: the version being corrected is gone"
        if a["ref"] in updated:
            assert old.valid_to_us == updated[a["ref"]]["ts_us"], f"{a['ref']}: acknowledged correction not whole"
    whole = 0
    for tenant, refs in live.items():
        nodes = core._graph.memories(tenant, (int(r.split(":", 1)[1]) for r in refs))
        for node in nodes.values():
            if node.valid_to_us is not None:
                newer = [nodes.get(i) for i in core._graph.superseders(tenant, [node.id]).get(node.id, [])]
                succ = [n for n in newer if n is not None and n.supersedes_id == node.id]
                assert len(succ) == 1 and succ[0].ts_us == node.valid_to_us, f"mem:{node.id} superseded by nothing"
                whole += 1
            if node.supersedes_id is not None:
                prev = nodes.get(node.supersedes_id)
                assert prev is not None and prev.valid_to_us == node.ts_us, f"mem:{node.id} corrects a current row"
    return whole


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("ack_file", type=Path)
    parser.add_argument("--verify", action="store_true", help="reopen, check every acknowledged write, exit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--storage", type=json.loads, default={}, help="storage settings as JSON")
    args = parser.parse_args(argv)
    if args.verify:
        try:
            summary = verify(args.data_dir, args.ack_file, args.storage)
        except AssertionError as exc:
            print(f"VERIFY FAILED: {exc}", file=sys.stderr)
            sys.exit(2)
        print(json.dumps(summary))
        return
    run_writer(args.data_dir, args.ack_file, args.seed, args.storage)


if __name__ == "__main__":
    main()
