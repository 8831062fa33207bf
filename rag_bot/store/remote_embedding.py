"""Embeddings from any OpenAI-compatible `/v1/embeddings` server: OpenAI, Ollama, vLLM, llama.cpp's server,
text-embeddings-inference (RAG_BOT_EMBED_URL, RAG_BOT_EMBED_MODEL; the key is the LLM's).

Texts go in batches of `REMOTE_BATCH` through the `openai` client, which retries timeouts, 429s and 5xx with
backoff and honours Retry-After. Vectors come back L2-normalised, like the shipped model's (every similarity in
rag-bot is a dot product of unit vectors). A server that is down, refuses, times out or returns vectors of
another size raises `EmbeddingUnavailable` with one line saying which and what to check.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from pydantic import PrivateAttr

from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.embedding import ArrayEmbedding

log = logging.getLogger(__name__)

REMOTE_BATCH = 64  # texts per request: well inside OpenAI's 2,048 inputs and common servers' batch limits


class EmbeddingUnavailable(StoreError):
    """The embeddings server cannot embed: the message is the one line shown to the user."""


def remote_name(model: str, dimensions: int | None = None) -> str:
    """What identifies a served model's vectors in a store's fingerprints (with the size asked, when one is)."""
    return f"api:{model}" + (f"@{dimensions}" if dimensions else "")


class RemoteEmbedding(ArrayEmbedding):
    """Unit vectors of texts from an OpenAI-compatible embeddings endpoint."""

    max_tokens: int = 256
    _settings: Any = PrivateAttr()
    _client: Any = PrivateAttr()
    _dimensions: int | None = PrivateAttr(default=None)

    def __init__(self, settings: Settings, **kwargs: Any) -> None:
        import openai

        super().__init__(model_name=remote_name(settings.embed_model, settings.embed_dimensions),
                         max_tokens=settings.max_tokens,
                         embed_batch_size=REMOTE_BATCH, **kwargs)
        self._settings = settings
        self._client = openai.OpenAI(base_url=settings.embed_url, api_key=settings.openai_api_key or "unused",
                                     timeout=settings.llm_timeout, max_retries=settings.llm_retries)

    @classmethod
    def class_name(cls) -> str:
        return "RemoteEmbedding"

    @property
    def name(self) -> str:
        """The model's name as stores record it."""
        return str(self.model_name)

    @property
    def dimensions(self) -> int:
        """The size of the model's vectors (asked of the server once)."""
        if self._dimensions is None:
            self.embed(["dimensions"])
        assert self._dimensions is not None
        return self._dimensions

    def embed(self, texts: list[str], prefix: str | None = None) -> np.ndarray:
        """Unit vectors of the texts, (n, dimensions); documents get the document prefix unless told otherwise."""
        prefix = self._settings.embed_document_prefix if prefix is None else prefix
        parts = [self._request([prefix + t for t in texts[i:i + REMOTE_BATCH]])
                 for i in range(0, len(texts), REMOTE_BATCH)]
        if not parts:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        return np.vstack(parts)

    def _request(self, batch: list[str]) -> np.ndarray:
        import openai

        where = f"the embeddings server at {self._settings.embed_url} (model {self._settings.embed_model})"
        try:
            extra = {"dimensions": self._settings.embed_dimensions} if self._settings.embed_dimensions else {}
            reply = self._client.embeddings.create(model=self._settings.embed_model, input=batch, **extra)
        except openai.APITimeoutError:
            raise EmbeddingUnavailable(f"{where} did not answer within {self._settings.llm_timeout:g} s "
                                       "(RAG_BOT_LLM_TIMEOUT)") from None
        except openai.APIConnectionError:
            raise EmbeddingUnavailable(f"{where} cannot be reached: is it running? (RAG_BOT_EMBED_URL)") from None
        except openai.APIStatusError as exc:
            raise EmbeddingUnavailable(f"{where} refused the request: HTTP {exc.status_code} "
                                       f"{_short(exc.message)}") from None
        data = sorted(getattr(reply, "data", None) or [], key=lambda d: d.index)
        if len(data) != len(batch):
            raise EmbeddingUnavailable(f"{where} returned {len(data)} vectors for {len(batch)} texts")
        sizes = {len(d.embedding) for d in data}
        if len(sizes) != 1 or 0 in sizes:
            raise EmbeddingUnavailable(f"{where} returned vectors of sizes {sorted(sizes)}, not one size")
        size = sizes.pop()
        asked = self._settings.embed_dimensions
        if asked and size != asked:
            raise EmbeddingUnavailable(f"{where} returned {size}-dimensional vectors for RAG_BOT_EMBED_DIMENSIONS="
                                       f"{asked}: does the model shorten its vectors on request?")
        if self._dimensions is None:
            self._dimensions = size
        elif size != self._dimensions:
            raise EmbeddingUnavailable(f"{where} returned {size}-dimensional vectors after {self._dimensions}-"
                                       "dimensional ones: is another model behind the same URL?")
        vectors = np.asarray([d.embedding for d in data], dtype=np.float32)
        return vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)

    def _embed_query(self, query: str) -> np.ndarray:
        return self.embed([query], prefix=self._settings.embed_query_prefix)[0]


def _short(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit] + "…"
