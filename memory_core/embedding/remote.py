"""Embeddings from a model provider through litellm (OpenAI, Ollama, any OpenAI-compatible server).

The offline MiniLM model stays the default; this embedder is chosen with
``embedding.provider = "litellm"``. Embedding happens before anything is written, so a
provider that is down makes an add fail with ``EMBEDDING_UNAVAILABLE`` and leaves nothing
behind. Transient failures (timeouts, connection errors, 408/429/5xx) are retried.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from memory_core.errors import EmbeddingError
from memory_core.sessions.summary.errors import SummaryProviderError, classify_exception
from memory_core.sessions.summary.provider import load_litellm

_DUMMY_API_KEY = "sk-no-key-required"  # local servers take any key; the OpenAI client needs one


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
        self._model = model
        self._api_base = api_base
        self._api_key_env = api_key_env
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._retries = retries

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(self._embed_batch(list(texts[start : start + self._batch_size])))
        return out

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        litellm = load_litellm()
        key = os.environ.get(self._api_key_env, "") if self._api_key_env else ""

        def call() -> Any:
            try:
                return litellm.embedding(
                    model=self._model, input=batch, api_base=self._api_base, api_key=key or _DUMMY_API_KEY,
                    timeout=self._timeout_s, num_retries=0,
                )
            except Exception as exc:  # every provider failure is classified; none escapes uncoded
                raise classify_exception(exc, timeout_s=self._timeout_s) from exc

        attempt = retry(
            retry=retry_if_exception(lambda e: isinstance(e, SummaryProviderError) and e.transient),
            stop=stop_after_attempt(self._retries + 1),
            wait=wait_exponential_jitter(multiplier=0.1, max=2.0, jitter=0.1),
            reraise=True,
        )(call)
        try:
            response = attempt()
        except SummaryProviderError as exc:
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
