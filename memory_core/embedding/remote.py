"""Embeddings from a model provider through litellm (OpenAI, Ollama, any OpenAI-compatible server).

The offline MiniLM model stays the default; this embedder is chosen with
``embedding.provider = "litellm"``. Embedding happens before anything is written, so a
provider that is down makes an add fail with ``EMBEDDING_UNAVAILABLE`` and leaves nothing
behind. Transient failures (timeouts, connection errors, 408/429/5xx) are retried.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_core.errors import EmbeddingError
from memory_core.provider.client import Endpoint, ModelClient
from memory_core.provider.errors import ProviderError


class LiteLLMEmbedder:
    """Vectors from ``litellm.embedding``, L2-normalised, in batches; dimension checked on every reply."""

    def __init__(
        self,
        model: str,
        *,
        dimension: int,
        api_base: str | None = None,
        api_key_env: str | None = None,
        batch_size: int = 32,
        timeout_s: float = 30.0,
        retries: int = 2,
    ) -> None:
        self.name = f"litellm:{model}"
        self.dimension = dimension
        self._batch_size = batch_size
        # every attempt may take its whole timeout: the budget only bounds the back-offs between them
        self._client = ModelClient(Endpoint(model, api_base, api_key_env, timeout_s=timeout_s,
                                            total_timeout_s=timeout_s * (retries + 1) + 2.0 * retries,
                                            max_retries=retries), backoff_max_s=2.0)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(self._embed_batch(list(texts[start : start + self._batch_size])))
        return out

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        try:
            response = self._client.embed(batch)
        except ProviderError as exc:
            raise EmbeddingError(
                f"The embedding provider failed ({exc.reason}); nothing was written.", reason=exc.reason
            ) from exc
        return self._vectors(response, len(batch))

    def _vectors(self, response: Any, expected: int) -> list[list[float]]:
        import numpy as np  # loads on first use: importing memory_core stays cheap

        data: Any = getattr(response, "data", None) or (response.get("data") if isinstance(response, dict) else None)
        try:
            items = sorted(data, key=lambda d: d["index"])
            matrix = np.asarray([d["embedding"] for d in items], dtype=np.float64)
        except (TypeError, KeyError, ValueError) as exc:
            raise EmbeddingError("The embedding provider returned a malformed response.") from exc
        if matrix.shape != (expected, self.dimension):
            raise EmbeddingError(
                f"The embedding provider returned vectors of shape {matrix.shape}; expected "
                f"({expected}, {self.dimension}) (check embedding.dimension)."
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.clip(norms, 1e-12, None)).tolist()
