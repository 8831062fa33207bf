"""The swappable parts as their callers see them: the embedder, the reranker, the writer and the engine.

Typing only (`Protocol`s, checked by mypy): a part is whatever has these members, as ScholarQA's `AbstractRetriever`
and `AbstractReranker` are; nothing here is checked at run time. Only shared types appear, so any stage may name
these without importing a later one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    from llama_index.core.base.response.schema import StreamingResponse
    from llama_index.core.schema import NodeWithScore, QueryBundle

    from rag_bot.settings import Settings
    from rag_bot.types import Answer, Filters, Mode, Paper, ScoredPaper, Turn


class Embedder(Protocol):
    """What the store, retrieval and grounding call on an embedding model (rag_bot/store/embedding.py and the
    folder and remote models built on it)."""

    max_tokens: int

    @property
    def name(self) -> str:
        """The model's name as stores record it."""
        ...

    @property
    def dimensions(self) -> int:
        """The size of its vectors."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text, as rows of an (n, d) array."""
        ...

    def get_query_embedding(self, query: str) -> list[float]:
        """A question's vector (kept: every stage embeds the same question)."""
        ...


class Reranker(Protocol):
    """A reranker's scores (rag_bot/retrieval/rerank.py `rerank_scores` against RAG_BOT_RERANK_URL)."""

    def __call__(self, query: str, documents: list[str]) -> list[float]:
        """The score of each document for the query, in the documents' order."""
        ...


class Writer(Protocol):
    """What the engine calls on a writer (the offline composer and the LLM composer, rag_bot/writing/)."""

    @property
    def name(self) -> str:
        """"offline", or the model that writes."""
        ...

    def rewrite_question(self, question: str, history: Sequence[tuple[str, str]]) -> str | None:
        """A follow-up rewritten into a standalone question, or None when the writer cannot."""
        ...

    def synthesize(self, query: QueryBundle | str, nodes: list[NodeWithScore],
                   additional_source_nodes: Sequence[NodeWithScore] | None = None,
                   **response_kwargs: object) -> StreamingResponse:
        """The answer to a `PaperQuery` from its ranked nodes and grounding's decision (`grounding=`, a
        `Grounding`, handed in by the engine): text deltas, then the checked `Answer` in the response's metadata."""
        ...


class PaperSearch(Protocol):
    """Retrieval as a surface calls it (rag_bot/retrieval/retrieve.py `PaperRetriever`)."""

    def retrieve_papers(self, question: str, top_k: int | None = None,
                        filters: Filters | None = None) -> list[ScoredPaper]:
        """Papers for a question, best first."""
        ...


class EngineView(Protocol):
    """The engine as the answering surfaces (HTTP API, MCP, chat) see it: `rag_bot.engine.Engine`, or the chat's
    `PendingEngine` standing in for it while it loads."""

    settings: Settings

    @property
    def papers(self) -> Mapping[str, Paper]:
        """The collection, by doc_id."""
        ...

    @property
    def retriever(self) -> PaperSearch:
        """The paper retriever."""
        ...

    @property
    def writer_name(self) -> str:
        """Who writes the answers: "offline" or the model's name."""
        ...

    def require_index(self) -> None:
        """Raise `NoIndexError` with the fix when nothing is indexed."""
        ...

    def ask(self, question: str, mode: Mode | None = None, history: Sequence[Turn] | None = None,
            max_papers: int | None = None, filters: Filters | None = None) -> Answer:
        """A cited answer (or a plain refusal)."""
        ...

    def stream(self, question: str, mode: Mode | None = None, history: Sequence[Turn] | None = None,
               max_papers: int | None = None, filters: Filters | None = None) -> Iterator[str | Answer]:
        """Text deltas of the answer, then the final `Answer`."""
        ...
