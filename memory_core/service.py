"""MemoryCore: the one service API behind the MCP server, the CLI and library callers.

It is also the composition root for the stores: ``MemoryCore.open`` reads settings once,
takes the data directory's lock, opens Chroma, the graph store and the embedder, runs
crash recovery, and hands plain objects down.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graph.db import GraphDB
from graph.store import GraphStore
from memory_core import validation as v
from memory_core.config import Settings, load_settings
from memory_core.embedding import Embedder, HashEmbedder, shared_minilm
from memory_core.episodes import Episode, EpisodeService, Recovery
from memory_core.errors import ConfigError, InvalidInputError, StoreError, StoreLockedError
from memory_core.models import AddResult, CheckResult, Contents, RecallResult, RecentTurnsPage
from memory_core.reads import Reader
from memory_core.recall.engine import Recaller
from memory_core.recall.filters import normalize
from memory_core.recall.lexical import LexicalIndex
from memory_core.refs import MEMORY, CursorCodec, parse_ref
from memory_core.summary import LiteLLMSummaryProvider, ModelProviderSettings, SummaryProvider
from memory_core.vector_store import ChromaVectorStore, InMemoryVectorStore, VectorStore
from memory_core.write_path import WritePath

LOCK_FILE = "memory-core.lock"
HANDOFF = "handoff"


def build_embedder(settings: Settings) -> Embedder:
    emb = settings.embedding
    if emb.provider == "hash":
        return HashEmbedder(emb.dimension)
    if emb.provider == "minilm":
        return shared_minilm()
    if not emb.model:
        raise ConfigError("embedding.provider 'litellm' needs embedding.model (e.g. 'openai/text-embedding-3-small').",
                          key="embedding.model")
    from memory_core.remote_embedding import LiteLLMEmbedder

    return LiteLLMEmbedder(emb.model, dimension=emb.dimension, api_base=emb.api_base, api_key_env=emb.api_key_env,
                           batch_size=emb.batch_size)


def check_embedder(db: GraphDB, embedder: Embedder) -> None:
    """A data directory keeps the embedder it was built with: vectors of two models don't mix."""
    identity = f"{embedder.name}/{embedder.dimension}"
    stored = db.meta("embedder")
    if stored is None:  # first open (or a store from before this check): record it
        with db.transaction() as cur:
            cur.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('embedder', ?)", (identity,))
        stored = db.meta("embedder")
    if stored != identity:
        raise ConfigError(
            f"This data directory holds vectors from '{stored}'; opening it with '{identity}' would mix "
            "incompatible embeddings. Use the original embedding settings or a new data directory.",
            key="embedding.provider",
        )


def build_vector_store(settings: Settings, data_dir: Path) -> VectorStore:
    st = settings.storage
    if st.chroma == "http":
        headers: dict[str, str] = {}
        if st.chroma_auth_header and st.chroma_auth_token_env:
            headers[st.chroma_auth_header] = os.environ.get(st.chroma_auth_token_env, "")
        return ChromaVectorStore.http(
            st.chroma_host, st.chroma_port, st.collection_prefix, ssl=st.chroma_ssl, headers=headers,
            retries=st.chroma_retries,
        )
    return ChromaVectorStore.persistent(data_dir / "chroma", st.collection_prefix)


def build_summary_provider(settings: Settings) -> SummaryProvider | None:
    """The litellm provider when enabled; litellm itself loads only on the first summary."""
    if not settings.model_provider.enabled:
        return None
    return LiteLLMSummaryProvider(ModelProviderSettings(**settings.model_provider.model_dump()))


class _DirLock:
    """An exclusive lock on the data directory: a second process is refused at open."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fh = self.path.open("a+")
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._fh.close()
            raise StoreLockedError(
                f"The data directory {data_dir} is in use by another process. Run one "
                "`memory-core serve --http` and point every agent at it instead of opening the "
                "directory twice.",
                data_dir=str(data_dir),
            ) from exc
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(str(os.getpid()))
        self._fh.flush()

    def release(self) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()


class MemoryCore:
    """Long-term memory for agents: AGENT_MEMORY nodes in a graph, records in Chroma."""

    def __init__(
        self,
        settings: Settings,
        data_dir: Path,
        db: GraphDB,
        graph: GraphStore,
        vectors: VectorStore,
        embedder: Embedder,
        lock: _DirLock | None,
        summary_provider: SummaryProvider | None = None,
    ) -> None:
        self.settings = settings
        self.data_dir = data_dir
        self.db = db
        self.graph = graph
        self.vectors = vectors
        self.embedder = embedder
        self._lock = lock
        secret = db.meta("cursor_secret") or ""
        self.reader = Reader(graph, CursorCodec(bytes.fromhex(secret)))
        self.writer = WritePath(db, graph, vectors, embedder, settings.limits)
        self.recaller = Recaller(graph, self.reader, LexicalIndex(db), vectors, embedder, settings)
        self.episodes = EpisodeService(graph, self.reader, self.writer, vectors, embedder, settings, summary_provider)
        self.recovered = self.writer.recover()
        self._closed = False

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        config_path: str | os.PathLike[str] | None = None,
        embedder: Embedder | None = None,
        vector_store: VectorStore | None = None,
        in_memory_vectors: bool = False,
        summary_provider: SummaryProvider | None = None,
    ) -> MemoryCore:
        """Open (creating if needed) a store. ``settings`` default to config file + env."""
        settings = settings or load_settings(config_path)
        root = Path(data_dir if data_dir is not None else settings.storage.data_dir).expanduser().resolve()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"Cannot create the data directory {root}: {exc.strerror}.") from exc
        lock = _DirLock(root)
        db: GraphDB | None = None
        try:
            db = GraphDB(root / "graph.sqlite3")
            graph = GraphStore(db)
            if vector_store is None:
                vector_store = InMemoryVectorStore() if in_memory_vectors else build_vector_store(settings, root)
            provider = summary_provider or build_summary_provider(settings)
            embedder = embedder or build_embedder(settings)
            check_embedder(db, embedder)
            return cls(settings, root, db, graph, vector_store, embedder, lock, provider)
        except BaseException:
            if db is not None:
                db.close()
            lock.release()
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.episodes.close()
        self.recaller.close()
        self.vectors.close()
        self.db.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> MemoryCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writes ----------------------------------------------------------------------------
    def add_memory(self, tenant: str, session: str, agent: str, content: str, **fields: Any) -> AddResult:
        """Store one memory in Chroma and the graph; see :mod:`memory_core.write_path`.

        ``type="handoff"`` is exactly :meth:`create_handoff` (salience 0.95, SUPERSEDES the
        session's previous handoff), so every boundary writes the same graph for the same input;
        ``type="episode"`` is refused (episodes are written by :meth:`summarize_session`).
        """
        if fields.get("type") == HANDOFF:
            return self.create_handoff(tenant, session, agent, content, **{k: fields[k] for k in fields if k != "type"})
        item = {"tenant": tenant, "session": session, "agent": agent, "content": content, **fields}
        return self.writer.add_many([item])[0]

    def add_memories(self, items: Sequence[dict[str, Any]]) -> list[AddResult]:
        """Batch add (imports, benchmarks): validated up front, written all-or-nothing."""
        if not isinstance(items, Sequence) or not all(isinstance(i, dict) for i in items):
            raise InvalidInputError("add_memories takes a list of objects.")
        return self.writer.add_many(list(items))

    def delete_memory(self, tenant: str, ref: str) -> bool:
        """Remove a memory from both stores; False when it does not exist in this tenant."""
        tenant = v.tenant(tenant)
        parsed = parse_ref(ref)
        if parsed.kind != MEMORY:
            return False
        return self.writer.delete(tenant, parsed.id)

    # ---- reads -----------------------------------------------------------------------------
    def query_recent_turns(
        self, tenant: str, session: str, limit: int = 20, cursor: str | None = None, *, viewer: str | None = None
    ) -> RecentTurnsPage:
        """A session's turns newest first, paged by an opaque cursor over (timestamp, id)."""
        tenant = v.tenant(tenant)
        session = v.name(session, "session")  # type: ignore[assignment]
        with self.db.lock:
            return self.reader.recent_turns(tenant, session, limit, cursor, viewer)

    def get_contents(self, tenant: str, refs: Sequence[object], *, viewer: str | None = None) -> Contents:
        """Full rows for refs; foreign, deleted or malformed refs are listed in ``missing``."""
        tenant = v.tenant(tenant)
        if isinstance(refs, str) or not isinstance(refs, Sequence):
            raise InvalidInputError("'refs' must be a list of refs.", field="refs")
        if len(refs) > self.settings.recall.scan_window:
            raise InvalidInputError(f"At most {self.settings.recall.scan_window} refs per call.", field="refs")
        with self.db.lock:
            return self.reader.get_contents(tenant, refs, viewer)

    def check_memory(self, tenant: str, ref: str, *, viewer: str | None = None) -> CheckResult:
        """One memory with full content and its graph neighbours (author, session, adjacent)."""
        tenant = v.tenant(tenant)
        with self.db.lock:
            return self.reader.check(tenant, ref, viewer)

    # ---- recall ----------------------------------------------------------------------------
    def recall(self, tenant: str, query: str, **options: Any) -> RecallResult:
        """Hybrid recall (vector + BM25 + keyword + graph); see :mod:`memory_core.recall.engine`.

        Options: viewer, limit (≤ scan window), type, session, agent, channel, source_id,
        project_id (omitted = all, '' = global pool, 'X' = X ∪ global, '@auto'), exclude_contents,
        deep (no time decay), preset. An empty query returns the most recent memories.
        """
        return self.recaller.recall(tenant, query, **options)

    def recall_with_context(
        self, tenant: str, query: str, context: Sequence[dict[str, Any]], **options: Any
    ) -> RecallResult:
        """Recall sharpened by the recent conversation; never returns what the context already holds."""
        if isinstance(context, str) or not isinstance(context, Sequence):
            raise InvalidInputError("'context' must be a list of {role, content} objects.", field="context")
        texts: list[str] = []
        for entry in context:
            if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
                raise InvalidInputError("Each context entry needs a string 'content'.", field="context")
            texts.append(entry["content"])
        exclude = [*(options.pop("exclude_contents", None) or []), *(t for t in texts if normalize(t))]
        recent = " ".join(texts[-4:])[-2000:]
        return self.recaller.recall(tenant, query, exclude_contents=exclude, context_text=recent or None, **options)

    # ---- handoffs, summaries, recovery -----------------------------------------------------
    def create_handoff(self, tenant: str, session: str, agent: str, content: str, **fields: Any) -> AddResult:
        """A handoff (salience 0.95) that SUPERSEDES the session's previous handoff."""
        return self.episodes.create_handoff(tenant, session, agent, content, **fields)

    def summarize_session(self, tenant: str, session: str) -> Episode:
        """The session's miniSummary as an EPISODE (``ep:`` ref); model or extractive fallback."""
        return self.episodes.summarize_session(tenant, session)

    def recover_context(
        self, tenant: str, session: str, *, viewer: str | None = None, turns: int | None = None,
        budget_chars: int | None = None,
    ) -> Recovery:
        """After a compaction: latest handoff, session summary, newest turns and a cursor."""
        return self.episodes.recover_context(tenant, session, viewer, turns, budget_chars)
