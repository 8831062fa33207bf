"""A reranker (off by default): re-scores the retrieved candidates before grounding (RAG_BOT_RERANK_URL).

Any `/rerank` endpoint of the common shapes: Cohere's and Jina's (`{"model", "query", "documents"}` ->
`{"results": [{"index", "relevance_score"}]}`) and text-embeddings-inference's (`{"query", "texts"}` ->
`[{"index", "score"}]`); the request is sent in the Cohere shape, then in TEI's when the server refuses it as
malformed (HTTP 400 or 422). Papers the question names keep their places at the top; the others are put in the
reranker's order. A reranker that fails leaves the retrieval order as it was and says so once in the log: a
question is never lost to it.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import PrivateAttr

from rag_bot.nodes import scored_paper
from rag_bot.settings import Settings
from rag_bot.text import clean_markup

log = logging.getLogger(__name__)

RERANK_CANDIDATES = 40  # candidates sent per question: an area's (AREA_CANDIDATES), the most grounding weighs
DOCUMENT_CHARS = 2000  # of each abstract sent: rerankers read 512 tokens at most


class RerankError(RuntimeError):
    """The reranker could not score the candidates (the one-line reason)."""


def rerank_scores(settings: Settings, query: str, documents: list[str]) -> list[float]:
    """The reranker's score of each document for the query, in the documents' order."""
    import httpx

    headers = {"Authorization": f"Bearer {settings.openai_api_key}"} if settings.openai_api_key else {}
    url = str(settings.rerank_url)
    cohere = {"query": query, "documents": documents, "top_n": len(documents)}
    if settings.rerank_model:
        cohere["model"] = settings.rerank_model
    try:
        with httpx.Client(timeout=settings.llm_timeout) as client:
            reply = client.post(url, json=cohere, headers=headers)
            if reply.status_code in (400, 422):  # text-embeddings-inference's shape
                reply = client.post(url, json={"query": query, "texts": documents, "truncate": True},
                                    headers=headers)
    except httpx.HTTPError as exc:
        raise RerankError(f"the reranker at {url} cannot be reached ({type(exc).__name__})") from None
    if reply.status_code != 200:
        raise RerankError(f"the reranker at {url} answered HTTP {reply.status_code}")
    try:
        body: Any = reply.json()
        rows = body["results"] if isinstance(body, dict) else body
        scores = {int(r["index"]): float(r.get("relevance_score", r.get("score"))) for r in rows}
    except (ValueError, KeyError, TypeError):
        raise RerankError(f"the reranker at {url} answered in a shape this reader does not know") from None
    if set(scores) != set(range(len(documents))):
        raise RerankError(f"the reranker at {url} scored {len(scores)} of {len(documents)} documents")
    return [scores[i] for i in range(len(documents))]


class RerankPostprocessor(BaseNodePostprocessor):
    """The llama-index postprocessor that puts the retrieved papers in the reranker's order."""

    _settings: Any = PrivateAttr()
    _warned: bool = PrivateAttr(default=False)

    def __init__(self, settings: Settings, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._settings = settings

    @classmethod
    def class_name(cls) -> str:
        return "RerankPostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if not nodes or query_bundle is None:
            return nodes
        head, rest = nodes[:RERANK_CANDIDATES], nodes[RERANK_CANDIDATES:]
        named = [n for n in head if scored_paper(n).named]
        others = [n for n in head if not scored_paper(n).named]
        if len(others) < 2:
            return nodes
        texts = []
        for node in others:
            paper = scored_paper(node).paper
            texts.append(f"{clean_markup(paper.title)}. {clean_markup(paper.text)}"[:DOCUMENT_CHARS])
        try:
            scores = rerank_scores(self._settings, query_bundle.query_str, texts)
        except RerankError as exc:
            if not self._warned:
                log.warning("%s; answering in the retrieval order", exc)
                self._warned = True
            return nodes
        order = sorted(range(len(others)), key=lambda i: -scores[i])
        return named + [others[i] for i in order] + rest
