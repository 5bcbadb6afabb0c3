"""Fill a small disk under a live store, for tests/reliability/test_disk_full.py (run as its own process,
so that a hang that holds the GIL fails the test by its timeout instead of freezing pytest).

``python -m tests.support.disk_full vectors <disk>``: embedded Chroma alone. Fill the disk,
upsert until Chroma fails, keep calling it while full (the calls that used to block forever),
free the space, upsert again.

``python -m tests.support.disk_full core <disk>``: the whole service. Fill the disk, add
until adds fail and go on adding; reads must answer meanwhile; free the space; adds must
work again without a restart. Acknowledged refs are written to ``<disk>/../acks.json``
(outside the full disk) for the parent to check after reopening.

Each prints one JSON line with what happened.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from memory_core import MemoryCore, MemoryCoreError
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from memory_core.vectors.chroma import ChromaVectorStore

KEEP_FREE = 3_000_000  # bytes left free by the filler: enough for a few writes, then none


def fill(disk: Path) -> Path:
    st = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("wb") as fh:
        fh.write(b"x" * max(0, st.f_bavail * st.f_frsize - KEEP_FREE))
    return filler


def vectors(disk: Path) -> dict[str, Any]:
    store = ChromaVectorStore.persistent(disk / "chroma")
    filler = fill(disk)
    rng = np.random.default_rng(7)
    written, errors = 0, []
    for i in range(2000):
        try:
            store.upsert("acme", [f"mem:{i}"], rng.random((1, 64)).tolist(), ["word " * 400],
                         [{"tenant": "acme", "kind": "memory"}])
            written += 1
        except MemoryCoreError as exc:
            errors.append(exc.code)
            if len(errors) >= 8:  # calls into a Chroma that failed compaction used to hang from the 3rd on
                break
    filler.unlink()
    store.upsert("acme", ["mem:after"], rng.random((1, 64)).tolist(), ["after the disk was freed"],
                 [{"tenant": "acme", "kind": "memory"}])
    found = store.documents("acme", ["mem:after"])
    return {"written": written, "errors": errors, "resets": store.resets,
            "after": found.get("mem:after", ("", {}))[0]}


def core(disk: Path) -> dict[str, Any]:
    settings = load_settings(environ={}, overrides={"storage": {"vector_deadline_s": 20},
                                                    "embedding": {"provider": "hash"}})
    store = MemoryCore.open(disk / "data", settings=settings, embedder=HashEmbedder())
    filler = fill(disk)
    acked: list[str] = []
    codes: dict[str, int] = {}
    for i in range(300):
        items = [{"tenant": "acme", "session": "s1", "agent": "a", "content": f"row {i}.{j} " + "word " * 300}
                 for j in range(1 + i % 3)]
        try:
            acked += [r.ref for r in store.add_memories(items)]
        except MemoryCoreError as exc:
            codes[exc.code] = codes.get(exc.code, 0) + 1
    reads = {"recent": len(store.query_recent_turns("acme", "s1", limit=5).turns),
             "recall": len(store.recall("acme", "row word", limit=3).messages),
             "contents": len(store.get_contents("acme", acked[:5]).found)}
    filler.unlink()
    after = store.add_memory("acme", "s1", "a", "after the disk was freed").ref
    acked.append(after)
    (disk.parent / "acks.json").write_text(json.dumps(acked))
    store.close()
    return {"acked": len(acked), "codes": codes, "reads": reads, "after": after}


def main() -> None:
    mode, disk = sys.argv[1], Path(sys.argv[2])
    print(json.dumps(vectors(disk) if mode == "vectors" else core(disk)), flush=True)


if __name__ == "__main__":
    main()
