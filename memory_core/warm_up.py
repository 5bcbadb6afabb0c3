"""A server's background warm-up: the embedding model and Chroma load while it answers its first requests.

The first ``add_memory`` needs both, so they load side by side rather than one after the other:
one thread imports the model's packages (under the import lock, see :mod:`memory_core.heavy_imports`)
and then builds its ONNX session, which runs in onnxruntime's C++ without the GIL; meanwhile each
step of ``also`` (opening Chroma: mostly importing chromadb) runs on a thread of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from memory_core.embedding.api import Embedder
from memory_core.errors import MemoryCoreError


def warm_up_in_background(embedder: Embedder, *also: Callable[[], object]) -> list[threading.Thread]:
    """Load a local embedding model and run each of ``also``, side by side on daemon threads.

    A server calls this as soon as it is up, so the first add_memory or recall does not wait
    for onnxruntime, the model or Chroma. Remote embedders are not called (a warm-up would cost a
    request). A failure here is not reported: the first real call meets it again, coded.
    Joining the returned thread waits for every step.

    numpy is imported here, before any thread starts, and the model's packages are imported
    before ``also`` starts: threads importing numpy-based packages at once can meet numpy
    half-initialised (ImportError from its import cycle).
    """
    import numpy  # noqa: F401 - fully initialised before any other thread can import it

    prepare = getattr(embedder, "import_runtime", None)
    warm = getattr(embedder, "warm_up", None)

    def run() -> None:
        if callable(prepare):
            _quietly(prepare)
        beside = [threading.Thread(target=_quietly, args=(step,), name="memory-core-warm-up", daemon=True)
                  for step in also]
        for thread in beside:
            thread.start()
        if callable(warm):
            _quietly(warm)
        for thread in beside:
            thread.join()

    thread = threading.Thread(target=run, name="memory-core-warm-up", daemon=True)
    thread.start()
    return [thread]


def _quietly(step: Callable[[], object]) -> None:
    try:
        step()
    except MemoryCoreError:  # e.g. EMBEDDING_UNAVAILABLE: the first call raises it to its caller
        return
