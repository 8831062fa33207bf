"""The embedding model the settings choose, and its name, in one place: the shipped MiniLM (`embedding`), a model
folder of the user's (`local_embedding`, RAG_BOT_EMBED_PATH) or an OpenAI-compatible server (`remote_embedding`,
RAG_BOT_EMBED_URL)."""

from __future__ import annotations

from typing import Any

from rag_bot.store.embedding import MODEL_NAME, MiniLMEmbedding
from rag_bot.store.local_embedding import FolderEmbedding, local_name
from rag_bot.store.remote_embedding import RemoteEmbedding, remote_name


def embedder_name(settings: Any) -> str:
    """The name of the model the settings choose (recorded in a store's fingerprints), without loading it."""
    if settings.embed_path:
        return local_name(settings.embed_path)
    if settings.embed_url:
        return remote_name(settings.embed_model, settings.embed_dimensions)
    return MODEL_NAME


def make_embedder(settings: Any, stored_dimensions: int | None = None) -> Any:
    """The embedding model the settings choose: a model folder (RAG_BOT_EMBED_PATH), an OpenAI-compatible server
    (RAG_BOT_EMBED_URL; `stored_dimensions`, the size of the store's vectors, is what its replies must have), else
    the shipped MiniLM."""
    if settings.embed_path:
        return FolderEmbedding(settings.embed_path, max_tokens=settings.max_tokens,
                               embed_batch_size=settings.embed_batch_size)
    if settings.embed_url:
        return RemoteEmbedding(settings, stored_dimensions=stored_dimensions)
    return MiniLMEmbedding(max_tokens=settings.max_tokens, embed_batch_size=settings.embed_batch_size)
