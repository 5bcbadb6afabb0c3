"""The one composition root: settings in, the parts a :class:`~memory_core.service.MemoryCore` runs on out.

:func:`open_parts` reads the settings once, takes the data directory's lock, opens the graph store
(:mod:`graph.open`: SQLite or PostgreSQL), Chroma (embedded, lazily, or a server) and the embedder,
and hands plain objects down. Nothing else in ``memory_core`` opens a store or reads configuration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

from graph.api import StoreLifecycle
from graph.errors import GraphConfigError, GraphStoreError, SchemaVersionError
from graph.open import GraphConfig, OpenedGraph, graph_backend, open_graph
from memory_core.dir_lock import DirLock, claim
from memory_core.embedding.api import Embedder
from memory_core.embedding.local import HashEmbedder, shared_fastembed, shared_minilm
from memory_core.errors import ConfigError, EmbedderMismatchError
from memory_core.sessions.summary import LiteLLMSummaryProvider, SummaryProvider
from memory_core.settings import load_settings
from memory_core.settings.schema import Settings
from memory_core.store_errors import graph_error, os_error
from memory_core.vectors.api import VectorStore
from memory_core.vectors.cache import VectorCacheBudget
from memory_core.vectors.chroma import ChromaVectorStore
from memory_core.vectors.deadline import DeadlineVectorStore
from memory_core.vectors.lazy import LazyVectorStore
from memory_core.vectors.memory import InMemoryVectorStore


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
    from memory_core.embedding.remote import LiteLLMEmbedder

    return LiteLLMEmbedder(emb.model, dimension=emb.dimension, api_base=emb.api_base, api_key_env=emb.api_key_env,
                           batch_size=emb.batch_size)


FASTEMBED_CACHE = Path("~/.cache/memory-core/fastembed")  # not fastembed's default, a temporary directory
REMOVED_EMBEDDERS = {"all-mpnet-base-v2-onnx/768": "embedding.provider 'mpnet', removed in this release"}
MOVE_TO_NEW_MODEL = (
    "To move the store to another model, run 'memory-core reembed --model M' with the settings it was built "
    "with (it builds the new index beside the old one, resumes when interrupted, and switches at the end), then "
    "set the new model in the configuration."
)
# a model this release cannot load cannot open the store for a reembed: export (graph only) and import again
MOVE_FROM_REMOVED_MODEL = (
    "Move to the configured model through a new data directory: 'memory-core tenants' lists the tenants, "
    "'memory-core export --tenant T --out T.jsonl' exports each (export reads the graph only: it opens the "
    "directory whatever the embedding settings), then 'memory-core import T.jsonl --tenant T --data-dir NEW' "
    "embeds every memory again with the configured model."
)


def check_embedder(graph: StoreLifecycle, embedder: Embedder) -> None:
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
                f"'{identity}'. {MOVE_FROM_REMOVED_MODEL}", key="embedding.provider", stored=stored)
        raise EmbedderMismatchError(
            f"This data directory holds vectors from '{stored}'; opening it with '{identity}' would mix "
            f"incompatible embeddings. Use the original embedding settings, or: {MOVE_TO_NEW_MODEL}",
            key="embedding.provider", stored=stored or "",
        )


def build_vector_store(settings: Settings, data_dir: Path, rows: Callable[[str], int] | None = None,
                       prefix: str | None = None) -> VectorStore:
    """The configured Chroma; embedded, under ``storage.vector_cache_mb`` when ``rows`` (a tenant's
    memory count, from the graph) sizes what each tenant's index takes. ``prefix``: the collections' (default
    ``storage.collection_prefix``; a re-embedded store records its own, see memory_core.operator.reembedding)."""
    st = settings.storage
    prefix = prefix or st.collection_prefix
    if st.chroma == "http":
        headers: dict[str, str] = {}
        if st.chroma_auth_header and st.chroma_auth_token_env:
            headers[st.chroma_auth_header] = os.environ.get(st.chroma_auth_token_env, "")
        return ChromaVectorStore.http(
            st.chroma_host, st.chroma_port, prefix, ssl=st.chroma_ssl, headers=headers,
            retries=st.chroma_retries,
        )
    store = ChromaVectorStore.persistent(data_dir / "chroma", prefix)
    # a Chroma server bounds its own memory; this process bounds what its embedded client keeps loaded
    return VectorCacheBudget(store, st.vector_cache_mb << 20, rows) if st.vector_cache_mb and rows else store


def open_vector_store(settings: Settings, root: Path, rows: Callable[[str], int] | None = None,
                      prefix: str | None = None) -> VectorStore:
    """Embedded Chroma opens on the first vector call (reads of the graph never import it); a
    Chroma server is reached at open, so a stopped one fails the open (STORE_UNAVAILABLE)."""
    if settings.storage.chroma == "embedded":
        return LazyVectorStore(lambda: build_vector_store(settings, root, rows, prefix))
    return build_vector_store(settings, root, rows, prefix)


def build_summary_provider(settings: Settings) -> SummaryProvider | None:
    """The litellm provider when enabled; litellm itself loads only on the first summary."""
    if not settings.model_provider.enabled:
        return None
    return LiteLLMSummaryProvider(settings.model_provider)


def is_replicated(settings: Settings) -> bool:
    """True when nothing of the store lives in the data directory: a shared graph backend (PostgreSQL)
    and a Chroma server."""
    return graph_backend(settings.storage.graph).shared and settings.storage.chroma == "http"


def graph_config(settings: Settings, root: Path, lock: DirLock | None) -> GraphConfig:
    """The graph store's part of ``settings``, as the plain values :mod:`graph.open` takes."""
    st = settings.storage
    return GraphConfig(
        backend=st.graph, root=root, cache_nodes=st.graph_cache_nodes, postgres_dsn=st.postgres_dsn or "",
        postgres_lease_s=st.postgres_lease_s, postgres_pool_size=st.postgres_pool_size,
        locked=lock is not None, write_guard=lock.verify if lock is not None else None)


@dataclass
class Parts:
    """What a MemoryCore runs on, opened and owned from here on (:meth:`close` releases them all)."""

    settings: Settings
    data_dir: Path
    graph: OpenedGraph
    vectors: VectorStore
    embedder: Embedder
    lock: DirLock | None
    summary_provider: SummaryProvider | None

    def close(self) -> None:
        """Close the graph store and release the directory's lock (the vectors close with the service)."""
        self.graph.close()
        if self.lock is not None:
            self.lock.release()


class OpenOptions(TypedDict, total=False):
    """How to open a store, beyond its data directory (see :meth:`memory_core.service.MemoryCore.open`)."""

    settings: Settings | None  # default: the config file (``config_path`` or the default one) and the environment
    config_path: str | os.PathLike[str] | None
    embedder: Embedder | None  # default: the configured one
    vector_store: VectorStore | None  # default: the configured Chroma
    in_memory_vectors: bool  # the in-memory fake instead of Chroma (tests)
    summary_provider: SummaryProvider | None  # default: the configured model provider, if enabled
    lock: DirLock | None  # the directory's lock when the caller claimed it already; the store owns it from here
    announcement: str | None  # the file where a running server announces itself (named by STORE_LOCKED)
    # False: open a directory written with another embedding model (EMBEDDER_MISMATCH otherwise), for
    # commands that read the graph only (export, tenants)
    check_embedder_model: bool


@contextmanager
def _coded_open_errors(root: Path) -> Iterator[None]:
    """A full disk, an unwritable directory or a bad backend setting at open is a coded error."""
    try:
        yield
    except SchemaVersionError as exc:
        raise ConfigError(f"The graph store in {root} was written by a newer memory-core ({exc.detail}); "
                          "upgrade memory-core to open it.", key="storage.data_dir") from exc
    except GraphStoreError as exc:
        raise graph_error(exc, f"opening the graph store in {root}") from exc
    except GraphConfigError as exc:
        raise ConfigError(exc.message, key=exc.key) from exc
    except OSError as exc:
        raise os_error(exc, f"opening the store in {root}") from exc


def open_parts(data_dir: str | os.PathLike[str] | None = None, **options: Unpack[OpenOptions]) -> Parts:
    """Open (creating if needed) the stores of ``data_dir``; see :meth:`memory_core.service.MemoryCore.open`."""
    settings = options.get("settings") or load_settings(options.get("config_path"))
    lock, vector_store, embedder = options.get("lock"), options.get("vector_store"), options.get("embedder")
    root = Path(data_dir if data_dir is not None else settings.storage.data_dir).expanduser().resolve()
    # replicas share nothing local: no directory lock (PostgreSQL and the Chroma server coordinate)
    if lock is None and not is_replicated(settings):
        lock = claim(root, announcement=options.get("announcement"))
    elif lock is None:  # still the replica's own place (the announcement for joining launches)
        with _coded_open_errors(root):
            root.mkdir(parents=True, exist_ok=True)
    opened: list[OpenedGraph] = []
    try:
        with _coded_open_errors(root):
            store = open_graph(graph_config(settings, root, lock))
            opened.append(store)
            graph = store.graph
            if vector_store is None:
                # a re-embedded store: its index is under the prefix its graph records (operator.reembedding)
                vector_store = InMemoryVectorStore() if options.get("in_memory_vectors") else open_vector_store(
                    settings, root, rows=graph.count, prefix=graph.meta("vector_prefix"))
            vectors = DeadlineVectorStore(vector_store, settings.storage.vector_deadline_s, rows=graph.count)
            provider = options.get("summary_provider") or build_summary_provider(settings)
            embedder = embedder or build_embedder(settings)
            if options.get("check_embedder_model", True):  # off only for reads of the graph alone
                check_embedder(graph, embedder)
            return Parts(settings, root, store, vectors, embedder, lock, provider)
    except BaseException:
        for o in opened:
            o.close()
        if lock is not None:
            lock.release()
        raise
