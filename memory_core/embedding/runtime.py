"""What the local models (the embedder, the reranker) need around fastembed.

fastembed (ONNX Runtime, no torch) reads a model's files, its tokenizer and its configuration
(truncation, padding, special tokens), runs it and pools its output, for every model in its
catalogue, downloading them from the model hub on first use; ``specific_model_path`` loads a local
folder instead. Three things are ours:

- :func:`model_folder`: the models that ship inside packages (the default embedder, the reranker)
  are not laid out as fastembed reads a folder: their files sit in package folders, without a
  ``tokenizer_config.json``. The folder is assembled in a private temporary directory (links to
  the sha256-verified files and that small config) for the load, and removed after it.
- :func:`stop_spinning`: fastembed exposes no ONNX Runtime session option but the memory arena.
  Its pool threads spin ~45 ms after every run by default, a core burnt per 5 ms query embedding
  (tests/memory_core/embedding/test_embedding.py measures it), so the session fastembed built is rebuilt once from the
  same file with ``session.force_spinning_stop`` (and its other options unchanged).
- :func:`import_fastembed`: fastembed imports onnxruntime, tokenizers and numpy; a server warms the
  model on a background thread, so the import goes under :mod:`memory_core.heavy_imports`' lock.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from memory_core.heavy_imports import importing, onnx_runtime

# What fastembed raises when a model cannot be had: not in its catalogue or the hub unreachable
# (ValueError), files missing or unreadable (OSError, huggingface_hub's errors derive from it),
# a file ONNX Runtime refuses (its Fail/InvalidGraph derive from RuntimeError).
LOAD_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, RuntimeError)


def import_fastembed() -> ModuleType:
    """``fastembed``, imported under the heavy-import lock (with onnxruntime and tokenizers first)."""
    onnx_runtime()
    with importing():
        import fastembed
    return fastembed


@contextlib.contextmanager
def model_folder(files: Mapping[str, Path], tokenizer_config: Mapping[str, Any]) -> Iterator[Path]:
    """A folder fastembed can load with ``specific_model_path``: ``files`` (name in the folder ->
    verified file) linked in, and ``tokenizer_config.json`` written; removed when the block ends
    (a loaded session and tokenizer keep nothing open in it)."""
    folder = Path(tempfile.mkdtemp(prefix="memory-core-model-"))  # mode 0700: no one else writes in it
    try:
        for name, path in files.items():
            (folder / name).symlink_to(path.resolve())
        (folder / "tokenizer_config.json").write_text(json.dumps(dict(tokenizer_config)), encoding="utf-8")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def stop_spinning(model: Any) -> None:
    """Rebuild the ONNX Runtime session of a loaded fastembed model (``TextEmbedding``,
    ``TextCrossEncoder``) with ``session.force_spinning_stop``: its pool threads spin between a
    run's operators (their hand-offs stay fast) but not after it. Everything else about the
    session (threads, optimisation level, providers) is what fastembed chose."""
    ort, _tokenizer = onnx_runtime()
    inner = model.model  # the model class fastembed picked for the name (OnnxTextEmbedding, …)
    session = inner.model  # its onnxruntime.InferenceSession
    options = session.get_session_options()
    options.add_session_config_entry("session.force_spinning_stop", "1")
    options.log_severity_level = 3
    inner.model = ort.InferenceSession(session._model_path, options, providers=session.get_providers())


def session_of(model: Any) -> Any:
    """The ONNX Runtime session a loaded fastembed model runs (for tests and benchmarks)."""
    return model.model.model
