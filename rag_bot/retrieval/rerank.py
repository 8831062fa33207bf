"""A reranker (off by default): re-scores the retrieved candidates before grounding (RAG_BOT_RERANK_URL).

Any `/rerank` endpoint of the common shapes: Cohere's and Jina's (`{"model", "query", "documents"}` ->
`{"results": [{"index", "relevance_score"}]}`) and text-embeddings-inference's (`{"query", "texts"}` ->
`[{"index", "score"}]`); the request is sent in the Cohere shape, then in TEI's when the server refuses it as
malformed (HTTP 400 or 422). Papers the question names keep their places at the top; the others are put in the
reranker's order. A reranker that fails, or answers out of shape (an HTML page, indexes missing, repeated or out of
range, scores that are not numbers), leaves the retrieval order as it was and says so once in the log, naming the
server with its credentials masked: a question is never lost to it.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import PrivateAttr

from rag_bot.interfaces import Reranker
from rag_bot.nodes import scored_paper
from rag_bot.settings import Settings
from rag_bot.text import clean_markup, mask_credentials

log = logging.getLogger(__name__)

DOCUMENT_CHARS = 2000  # of each abstract sent: rerankers read 512 tokens at most


class RerankError(RuntimeError):
    """The reranker could not score the candidates (the one-line reason)."""


def rerank_scores(settings: Settings, query: str, documents: list[str]) -> list[float]:
    """The reranker's score of each document for the query, in the documents' order."""
    import httpx

    headers = {"Authorization": f"Bearer {settings.openai_api_key}"} if settings.openai_api_key else {}
    url = str(settings.rerank_url)
    shown = mask_credentials(url)  # every message names the server, never its user:password
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
        raise RerankError(f"the reranker at {shown} cannot be reached ({type(exc).__name__})") from None
    if reply.status_code != 200:
        raise RerankError(f"the reranker at {shown} answered HTTP {reply.status_code}")
    try:
        body: object = reply.json()
    except (ValueError, RecursionError):  # an HTML page, or JSON nested past the parser's depth
        raise RerankError(f"the reranker at {shown} answered with no JSON (an HTML page?)") from None
    return _scores(body, len(documents), f"the reranker at {shown}")


def _scores(body: object, count: int, where: str) -> list[float]:
    """The scores of a reply's rows (`index` and `relevance_score` or `score` each) in the documents' order, or the
    one line saying what is wrong with them."""
    rows = body.get("results") if isinstance(body, dict) else body
    if not isinstance(rows, list):
        raise RerankError(f"{where} answered in a shape this reader does not know (no list of results)")
    scores: dict[int, float] = {}
    for row in rows:
        index = row.get("index") if isinstance(row, dict) else None
        score = row.get("relevance_score", row.get("score")) if isinstance(row, dict) else None
        if type(index) is not int or not 0 <= index < count or index in scores:
            raise RerankError(f"{where} scored a document {_shown(index)}: there are {count}, numbered from 0")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
            raise RerankError(f"{where} gave document {index} the score {_shown(score)}, not a number")
        scores[index] = float(score)
    if len(scores) != count:
        raise RerankError(f"{where} scored {len(scores)} of {count} documents")
    return [scores[i] for i in range(count)]


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


class RerankPostprocessor(BaseNodePostprocessor):
    """The llama-index postprocessor that puts the retrieved papers in the reranker's order."""

    _settings: Settings = PrivateAttr()
    _reranker: Reranker = PrivateAttr()
    _warned: bool = PrivateAttr(default=False)

    def __init__(self, settings: Settings, reranker: Reranker | None = None, **kwargs: Any) -> None:
        """`reranker` scores the candidates; by default the server at RAG_BOT_RERANK_URL (`rerank_scores`)."""
        super().__init__(**kwargs)
        self._settings = settings
        self._reranker = reranker or (lambda query, documents: rerank_scores(settings, query, documents))

    @classmethod
    def class_name(cls) -> str:
        return "RerankPostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if not nodes or query_bundle is None:
            return nodes
        # Candidates sent per question: the most grounding weighs (an area's, RAG_BOT_AREA_CANDIDATES).
        most = max(self._settings.ask_candidates, self._settings.area_candidates)
        head, rest = nodes[:most], nodes[most:]
        named = [n for n in head if scored_paper(n).named]
        others = [n for n in head if not scored_paper(n).named]
        if len(others) < 2:
            return nodes
        texts = []
        for node in others:
            paper = scored_paper(node).paper
            texts.append(f"{clean_markup(paper.title)}. {clean_markup(paper.text)}"[:DOCUMENT_CHARS])
        try:
            scores = self._reranker(query_bundle.query_str, texts)
        except Exception as exc:  # the promise is that no question is lost to a reranker, whatever it answers
            if not self._warned:
                why = exc if isinstance(exc, RerankError) else f"the reranker at " \
                    f"{mask_credentials(str(self._settings.rerank_url))} failed ({type(exc).__name__})"
                log.warning("%s; answering in the retrieval order", why)
                self._warned = True
            return nodes
        order = sorted(range(len(others)), key=lambda i: -scores[i])
        return named + [others[i] for i in order] + rest
