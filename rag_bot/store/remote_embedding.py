"""Embeddings from any OpenAI-compatible `/v1/embeddings` server: OpenAI, Ollama, vLLM, llama.cpp's server,
text-embeddings-inference (RAG_BOT_EMBED_URL, RAG_BOT_EMBED_MODEL; the key is the LLM's).

Texts go in batches through the `openai` client, which retries timeouts, 429s and 5xx with backoff and honours
Retry-After. A request waits RAG_BOT_EMBED_TIMEOUT (not the LLM's timeout: a CPU server embeds about a passage a
second), and batches are sized from the server's measured pace so that one takes at most half of it. Vectors come back L2-normalised, like the shipped model's (every similarity in
rag-bot is a dot product of unit vectors). A server that is down, refuses, times out, returns vectors of another
size or answers in another shape (an HTML page, NaN, nested or unindexed vectors) raises `EmbeddingUnavailable` with
one line saying which server (its credentials masked) and what to check; nothing is written.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from pydantic import PrivateAttr

from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.embedding import ArrayEmbedding
from rag_bot.text import mask_credentials, one_line

log = logging.getLogger(__name__)

REMOTE_BATCH = 64  # texts per request at most: well inside OpenAI's 2,048 inputs and common servers' batch limits
# The first request's texts, before the server's pace is known: 8 passages take 8 s on a CPU server embedding one
# a second (issue 37), well inside the default RAG_BOT_EMBED_TIMEOUT.
FIRST_BATCH = 8
# The share of RAG_BOT_EMBED_TIMEOUT a batch is sized to take at the measured pace: room for a server busier than
# when it was measured, and for texts longer than the average of the batch it was measured on.
REQUEST_SHARE = 0.5


class EmbeddingUnavailable(StoreError):
    """The embeddings server cannot embed: the message is the one line shown to the user."""


def remote_name(model: str, dimensions: int | None = None) -> str:
    """What identifies a served model's vectors in a store's fingerprints (with the size asked, when one is)."""
    return f"api:{model}" + (f"@{dimensions}" if dimensions else "")


class RemoteEmbedding(ArrayEmbedding):
    """Unit vectors of texts from an OpenAI-compatible embeddings endpoint."""

    max_tokens: int = 256
    _settings: Settings = PrivateAttr()
    _client: Any = PrivateAttr()  # an openai.OpenAI client
    _dimensions: int | None = PrivateAttr(default=None)
    _stored: int | None = PrivateAttr(default=None)
    _pace: float | None = PrivateAttr(default=None)  # seconds per character of the last request, once measured

    def __init__(self, settings: Settings, stored_dimensions: int | None = None, **kwargs: Any) -> None:
        import openai

        super().__init__(model_name=remote_name(settings.embed_model, settings.embed_dimensions),
                         max_tokens=settings.max_tokens,
                         embed_batch_size=REMOTE_BATCH, **kwargs)
        self._settings = settings
        self._stored = stored_dimensions
        self._client = openai.OpenAI(base_url=settings.embed_url, api_key=settings.openai_api_key or "unused",
                                     timeout=settings.embed_timeout, max_retries=settings.llm_retries)

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
        given = [prefix + t for t in texts]
        parts = []
        start = 0
        while start < len(given):
            batch = given[start:start + self._batch_size(given, start)]
            began = time.perf_counter()
            parts.append(self._request(batch))
            self._pace = (time.perf_counter() - began) / max(1, sum(map(len, batch)))
            start += len(batch)
        if not parts:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        return np.vstack(parts)

    def _batch_size(self, texts: list[str], start: int) -> int:
        """How many texts from `start` the next request takes: as many as fit REQUEST_SHARE of the timeout at the
        server's measured pace (FIRST_BATCH before it is measured), at least one, at most REMOTE_BATCH."""
        if self._pace is None:
            return FIRST_BATCH
        budget = REQUEST_SHARE * self._settings.embed_timeout / max(self._pace, 1e-9)
        size, chars = 0, 0
        for text in texts[start:start + REMOTE_BATCH]:
            chars += len(text)
            if size and chars > budget:
                break
            size += 1
        return size

    def _request(self, batch: list[str]) -> np.ndarray:
        import openai

        where = f"the embeddings server at {mask_credentials(str(self._settings.embed_url))} " \
                f"(model {self._settings.embed_model})"
        try:
            extra = {"dimensions": self._settings.embed_dimensions} if self._settings.embed_dimensions else {}
            reply = self._client.embeddings.create(model=self._settings.embed_model, input=batch, **extra)
        except openai.APITimeoutError:
            raise EmbeddingUnavailable(f"{where} did not answer within {self._settings.embed_timeout:g} s "
                                       f"(RAG_BOT_EMBED_TIMEOUT; a request of {len(batch)} texts): is it "
                                       "overloaded? a slow server needs a larger RAG_BOT_EMBED_TIMEOUT") from None
        except openai.APIConnectionError:
            raise EmbeddingUnavailable(f"{where} cannot be reached: is it running? (RAG_BOT_EMBED_URL)") from None
        except openai.APIStatusError as exc:
            raise EmbeddingUnavailable(f"{where} refused the request: HTTP {exc.status_code} "
                                       f"{one_line(exc.message, 160)}") from None
        except (ValueError, TypeError, AttributeError) as exc:  # the client's decoding (base64, no data, a page)
            raise EmbeddingUnavailable(f"{where} answered in a shape this reader does not know "
                                       f"({one_line(exc, 80)})") from None
        vectors = _vectors(reply, len(batch), where)
        size = vectors.shape[1]
        asked = self._settings.embed_dimensions
        if asked and size != asked:
            raise EmbeddingUnavailable(f"{where} returned {size}-dimensional vectors for RAG_BOT_EMBED_DIMENSIONS="
                                       f"{asked}: does the model shorten its vectors on request?")
        if self._stored and size != self._stored:
            raise EmbeddingUnavailable(f"{where} returned {size}-dimensional vectors, but the store's are "
                                       f"{self._stored}-dimensional: is another model behind the same URL? "
                                       "(RAG_BOT_EMBED_URL, RAG_BOT_EMBED_MODEL); nothing was written")
        if self._dimensions is None:
            self._dimensions = size
        elif size != self._dimensions:
            raise EmbeddingUnavailable(f"{where} returned {size}-dimensional vectors after {self._dimensions}-"
                                       "dimensional ones: is another model behind the same URL?")
        return vectors

    def _embed_query(self, query: str) -> np.ndarray:
        return self.embed([query], prefix=self._settings.embed_query_prefix)[0]


def _vectors(reply: object, count: int, where: str) -> np.ndarray:
    """The reply's unit vectors as a (count, size) float32 array in the texts' order, or one line saying what is
    wrong with it (an HTML page, a list of another length, a vector that is nested, empty, NaN or all zeros)."""
    data = getattr(reply, "data", None)
    if not isinstance(data, list) or not data:
        shown = one_line(reply, 60) if isinstance(reply, str) else type(reply).__name__
        raise EmbeddingUnavailable(f"{where} answered without a list of vectors (got {shown!r}): is RAG_BOT_EMBED_URL "
                                   "the API's base URL (ending in /v1)?")
    if len(data) != count:
        raise EmbeddingUnavailable(f"{where} returned {len(data)} vectors for {count} texts")
    indexes = [getattr(d, "index", None) for d in data]
    if sorted(i for i in indexes if type(i) is int) != list(range(count)):
        raise EmbeddingUnavailable(f"{where} returned vectors whose `index` fields are not 0 to {count - 1} "
                                   f"(got {one_line(indexes, 60)})")
    given = [getattr(d, "embedding", None) for d in sorted(data, key=lambda d: d.index)]
    rows: list[list[object]] = [r for r in given if isinstance(r, list) and r and all(type(x) in (int, float) for x in r)]
    if len(rows) != len(given):
        raise EmbeddingUnavailable(f"{where} returned an `embedding` that is not a flat list of numbers")
    sizes = sorted({len(r) for r in rows})
    if len(sizes) != 1:
        raise EmbeddingUnavailable(f"{where} returned vectors of sizes {sizes}, not one size")
    vectors = np.asarray(rows, dtype=np.float64)
    scale = np.abs(vectors).max(axis=1, keepdims=True)  # first, so that a norm of huge components cannot overflow
    if not np.isfinite(vectors).all() or (scale == 0).any():
        raise EmbeddingUnavailable(f"{where} returned a vector that is all zeros, infinite or NaN: the model is "
                                   "broken or overflowed")
    vectors /= scale
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
