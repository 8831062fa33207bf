"""The embedding model the settings choose, and its name, in one place: the shipped MiniLM (`embedding`), a model
folder of the user's (`local_embedding`, RAG_BOT_EMBED_PATH) or an OpenAI-compatible server (`remote_embedding`,
RAG_BOT_EMBED_URL)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from rag_bot.interfaces import Embedder
from rag_bot.settings import Settings
from rag_bot.store.embedding import MODEL_NAME, MiniLMEmbedding
from rag_bot.store.local_embedding import FolderEmbedding, local_name
from rag_bot.store.remote_embedding import RemoteEmbedding, remote_name
from rag_bot.text import mask_credentials

# A served model's URL (credentials masked) is recorded beside its name, so that a command run without
# RAG_BOT_EMBED_URL can say which server made the vectors and how to choose it again (issue 37).
EMBEDDER_URL = "rag_bot_embedder_url"


def served_record(settings: Settings) -> dict[str, str]:
    """The embeddings server's URL, credentials masked, for the metadata a write records (none for a model run here)."""
    return {EMBEDDER_URL: mask_credentials(str(settings.embed_url))} if settings.embed_url else {}


@dataclass(frozen=True)
class RecordedModel:
    """The model a collection records as the maker of its vectors: its name, and where it was (a served model's URL,
    a model folder's path) when the store recorded that."""

    name: str
    url: str = ""
    folder: str = ""

    def where(self) -> str:
        """Where the model was, as recorded ("served at http://...", "the folder /models/f"); "" when unrecorded."""
        if self.name.startswith("api:") and self.url:
            return f"served at {self.url}"
        if self.name.startswith("local:") and self.folder:
            return f"the folder {self.folder}"
        return ""

    def __str__(self) -> str:
        return self.name + (f" ({self.where()})" if self.where() else "")

    def settings(self) -> str:
        """What to set (or unset) to choose this model again, the values ready to paste (masked credentials said)."""
        if self.name.startswith("api:"):
            model, dimensions = self.name[4:], ""
            sized = re.fullmatch(r"(.+)@(\d+)", model)
            if sized:
                model, dimensions = sized.group(1), f" RAG_BOT_EMBED_DIMENSIONS={sized.group(2)}"
            url = shlex.quote(self.url) if self.url else "<the URL of the server that serves it>"
            masked = " (its credentials masked: put them back)" if "***@" in self.url else ""
            return f"set RAG_BOT_EMBED_URL={url} RAG_BOT_EMBED_MODEL={shlex.quote(model)}{dimensions}{masked}"
        if self.name.startswith("local:"):
            return "set RAG_BOT_EMBED_PATH=" + (shlex.quote(self.folder) if self.folder else
                                            f"<the model folder named {self.name[6:]}>")
        return "unset RAG_BOT_EMBED_URL and RAG_BOT_EMBED_PATH (the shipped model)"


def embedder_name(settings: Settings) -> str:
    """The name of the model the settings choose (recorded in a store's fingerprints), without loading it."""
    if settings.embed_path:
        return local_name(settings.embed_path)
    if settings.embed_url:
        return remote_name(settings.embed_model, settings.embed_dimensions)
    return MODEL_NAME


def make_embedder(settings: Settings, stored_dimensions: int | None = None) -> Embedder:
    """The embedding model the settings choose: a model folder (RAG_BOT_EMBED_PATH), an OpenAI-compatible server
    (RAG_BOT_EMBED_URL; `stored_dimensions`, the size of the store's vectors, is what its replies must have), else
    the shipped MiniLM."""
    if settings.embed_path:
        return FolderEmbedding(settings.embed_path, max_tokens=settings.max_tokens,
                               embed_batch_size=settings.embed_batch_size)
    if settings.embed_url:
        return RemoteEmbedding(settings, stored_dimensions=stored_dimensions)
    return MiniLMEmbedding(max_tokens=settings.max_tokens, embed_batch_size=settings.embed_batch_size)
