"""The parts a MemoryCore is opened with, built from settings: the embedder (and the check that a
data directory keeps the one it was built with), the vector store and the summary provider."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from graph.api import GraphStore
from memory_core.config import Settings
from memory_core.embedding import Embedder, HashEmbedder, shared_fastembed, shared_minilm
from memory_core.errors import ConfigError, EmbedderMismatchError
from memory_core.lazy_vectors import LazyVectorStore
from memory_core.summary import LiteLLMSummaryProvider, SummaryProvider
from memory_core.vector_cache import VectorCacheBudget
from memory_core.vector_store import ChromaVectorStore, VectorStore


def build_embedder(settings: Settings) -> Embedder:
    emb = settings.embedding
    if emb.provider == "hash":
        return HashEmbedder(emb.dimension)
    if emb.provider == "minilm":
        return shared_minilm(emb.threads)
    if emb.provider == "fastembed":
        if not emb.model:
            raise ConfigError("embedding.provider 'fastembed' needs embedding.model (e.g. 'BAAI/bge-small-en-v1.5').",
                              key="embedding.model")
        cache_dir = emb.cache_dir or os.environ.get("FASTEMBED_CACHE_PATH") or str(FASTEMBED_CACHE)
        return shared_fastembed(emb.model, model_path=emb.model_path and str(Path(emb.model_path).expanduser()),
                                cache_dir=str(Path(cache_dir).expanduser()), batch_size=emb.batch_size,
                                threads=emb.threads)
    if not emb.model:
        raise ConfigError("embedding.provider 'litellm' needs embedding.model (e.g. 'openai/text-embedding-3-small').",
                          key="embedding.model")
    from memory_core.remote_embedding import LiteLLMEmbedder

    return LiteLLMEmbedder(emb.model, dimension=emb.dimension, api_base=emb.api_base, api_key_env=emb.api_key_env,
                           batch_size=emb.batch_size)


FASTEMBED_CACHE = Path("~/.cache/memory-core/fastembed")  # not fastembed's default, a temporary directory
REMOVED_EMBEDDERS = {"all-mpnet-base-v2-onnx/768": "embedding.provider 'mpnet', removed in this release"}
MOVE_TO_NEW_MODEL = (
    "There is no command that re-embeds a directory in place; move to the configured model through a new data "
    "directory: 'memory-core tenants' lists the tenants, 'memory-core export --tenant T --out T.jsonl' exports "
    "each (export reads the graph only: it opens the directory whatever the embedding settings), then "
    "'memory-core import T.jsonl --tenant T --data-dir NEW' embeds every memory again with the configured model."
)


def check_embedder(graph: GraphStore, embedder: Embedder) -> None:
    """A data directory keeps the embedder it was built with: vectors of two models don't mix."""
    identity = f"{embedder.name}/{embedder.dimension}"
    stored = graph.meta("embedder")
    if stored is None:  # first open (or a store from before this check): record it
        with graph.transaction() as tx:
            tx.set_meta("embedder", identity, overwrite=False)
        stored = graph.meta("embedder")
    if stored != identity:
        removed = REMOVED_EMBEDDERS.get(stored or "")
        if removed:
            raise EmbedderMismatchError(
                f"This data directory holds vectors from '{stored}' ({removed}); they cannot be queried with "
                f"'{identity}'. {MOVE_TO_NEW_MODEL}", key="embedding.provider", stored=stored)
        raise EmbedderMismatchError(
            f"This data directory holds vectors from '{stored}'; opening it with '{identity}' would mix "
            f"incompatible embeddings. Use the original embedding settings, or: {MOVE_TO_NEW_MODEL}",
            key="embedding.provider", stored=stored or "",
        )


def build_vector_store(settings: Settings, data_dir: Path, rows: Callable[[str], int] | None = None) -> VectorStore:
    """The configured Chroma; embedded, under ``storage.vector_cache_mb`` when ``rows`` (a tenant's
    memory count, from the graph) sizes what each tenant's index takes."""
    st = settings.storage
    if st.chroma == "http":
        headers: dict[str, str] = {}
        if st.chroma_auth_header and st.chroma_auth_token_env:
            headers[st.chroma_auth_header] = os.environ.get(st.chroma_auth_token_env, "")
        return ChromaVectorStore.http(
            st.chroma_host, st.chroma_port, st.collection_prefix, ssl=st.chroma_ssl, headers=headers,
            retries=st.chroma_retries,
        )
    store = ChromaVectorStore.persistent(data_dir / "chroma", st.collection_prefix)
    # a Chroma server bounds its own memory; this process bounds what its embedded client keeps loaded
    return VectorCacheBudget(store, st.vector_cache_mb << 20, rows) if st.vector_cache_mb and rows else store


def open_vector_store(settings: Settings, root: Path, rows: Callable[[str], int] | None = None) -> VectorStore:
    """Embedded Chroma opens on the first vector call (reads of the graph never import it); a
    Chroma server is reached at open, so a stopped one fails the open (STORE_UNAVAILABLE)."""
    if settings.storage.chroma == "embedded":
        return LazyVectorStore(lambda: build_vector_store(settings, root, rows))
    return build_vector_store(settings, root, rows)


def build_summary_provider(settings: Settings) -> SummaryProvider | None:
    """The litellm provider when enabled; litellm itself loads only on the first summary."""
    if not settings.model_provider.enabled:
        return None
    return LiteLLMSummaryProvider(settings.model_provider)
