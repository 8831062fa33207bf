"""The reranker stage (rag_bot/retrieval/rerank.py) against a STAND-IN rerank server: a real HTTP server on loopback speaking
the Cohere/Jina `/v1/rerank` shape or text-embeddings-inference's `/rerank`, scoring each document by its cosine
similarity to the query under the shipped MiniLM (a real score, so the expected order can be computed here)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from rag_bot.engine import Engine
from rag_bot.nodes import scored_paper
from rag_bot.retrieval.rerank import DOCUMENT_CHARS
from rag_bot.settings import Settings
from rag_bot.store.embedding import MiniLMEmbedding
from rag_bot.text import clean_markup
from tests.conftest import json_stand_in


class Scorer:
    def __init__(self) -> None:
        self.model = MiniLMEmbedding()
        self.shape = "cohere"  # or "tei", or "fail"
        self.bodies: list[dict] = []

    def scores(self, query: str, documents: list[str]) -> np.ndarray:
        return self.model.embed(documents) @ self.model.embed([query])[0]


@contextmanager
def rerank_server(scorer: Scorer) -> Iterator[str]:
    def respond(body: dict) -> tuple[int, object]:
        scorer.bodies.append(body)
        if scorer.shape == "fail":
            return 503, {"error": "overloaded"}
        if scorer.shape == "tei":
            if "texts" not in body:
                return 422, {"error": "missing field `texts`"}
            scores = scorer.scores(body["query"], body["texts"])
            return 200, [{"index": i, "score": float(s)} for i, s in enumerate(scores)]
        scores = scorer.scores(body["query"], body["documents"])
        return 200, {"results": [{"index": int(i), "relevance_score": float(scores[i])} for i in np.argsort(-scores)]}

    with json_stand_in(respond) as base:
        yield f"{base}/v1/rerank"


@pytest.fixture(scope="module")
def scorer_url() -> Iterator[tuple[Scorer, str]]:
    scorer = Scorer()
    with rerank_server(scorer) as url:
        yield scorer, url


QUESTION = "Which papers make large language model inference cheaper?"


@pytest.mark.parametrize("shape", ["cohere", "tei"])
def test_the_candidates_take_the_rerankers_order_before_grounding(seed_storage, scorer_url, shape):
    scorer, url = scorer_url
    scorer.shape = shape
    plain = Engine(Settings(storage=seed_storage))
    reranked = Engine(Settings(storage=seed_storage, rerank_url=url, rerank_model="stand-in"))
    query = plain.query(QUESTION)
    nodes = plain.retriever.retrieve(query)
    after = reranked.reranker.postprocess_nodes(nodes, query_bundle=query)
    papers = [scored_paper(n).paper for n in after]
    texts = [f"{clean_markup(p.title)}. {clean_markup(p.text)}"[:DOCUMENT_CHARS] for p in papers]  # as sent
    scores = scorer.scores(QUESTION, texts)
    assert sorted(p.doc_id for p in papers) == sorted(scored_paper(n).paper.doc_id for n in nodes)
    assert np.all(np.diff(scores) <= 1e-5), "the reranker's order"
    assert [p.doc_id for p in papers] != [scored_paper(n).paper.doc_id for n in nodes], "it changed something"
    answer = reranked.ask(QUESTION)
    assert answer.grounded and answer.citations
    assert scorer.bodies[-1]["query"] == QUESTION


def test_papers_the_question_names_stay_first(seed_storage, scorer_url):
    scorer, url = scorer_url
    scorer.shape = "cohere"
    reranked = Engine(Settings(storage=seed_storage, rerank_url=url))
    question = "How does CorrSteer compare with work on LLM serving?"
    query = reranked.query(question)
    after = [scored_paper(n) for n in reranked.reranker.postprocess_nodes(reranked.retriever.retrieve(query),
                                                                         query_bundle=query)]
    assert after[0].named and "CorrSteer" in after[0].paper.title
    assert "model" not in scorer.bodies[-1]  # no model asked when none is set


def test_a_failing_reranker_keeps_the_retrieval_order_and_says_so_once(seed_storage, scorer_url, caplog):
    scorer, url = scorer_url
    scorer.shape = "fail"
    try:
        plain = Engine(Settings(storage=seed_storage))
        reranked = Engine(Settings(storage=seed_storage, rerank_url=url))
        with caplog.at_level(logging.WARNING, logger="rag_bot.retrieval.rerank"):
            first = reranked.ask(QUESTION)
            reranked.ask(QUESTION + " ")
        assert first.answer == plain.ask(QUESTION).answer
        warnings = [r.getMessage() for r in caplog.records if r.name == "rag_bot.retrieval.rerank"]
        assert len(warnings) == 1 and "HTTP 503" in warnings[0] and "retrieval order" in warnings[0]
    finally:
        scorer.shape = "cohere"


def test_with_an_llm_the_reranker_comes_first_and_the_judge_last(scorer_url, llm_engine, stub):
    """One decision in three steps: the reranker orders the candidates, grounding decides from them (the order is
    one of its signals), and the LLM's relevance judge reviews what grounding chose."""
    from rag_bot.retrieval.ground import GroundingPostprocessor
    from rag_bot.retrieval.rerank import RerankPostprocessor
    from rag_bot.writing.judge import RelevanceJudge
    from tests.openai_stub import Reply, user_prompt

    scorer, url = scorer_url
    scorer.shape = "cohere"
    calls: list[str] = []

    def reply(body: dict) -> Reply:
        calls.append("judge" if '{"relevant":' in user_prompt(body) else "answer")
        return Reply(text='{"relevant": [1]}' if calls[-1] == "judge" else "The first source answers it [1].")

    stub.default = reply
    engine = llm_engine(llm_retries=0, rerank_url=url)
    stages = [type(p) for p in engine.query_engine._node_postprocessors]
    assert stages == [RerankPostprocessor, GroundingPostprocessor, RelevanceJudge]
    before = len(scorer.bodies)
    answer = engine.ask(QUESTION)
    assert answer.grounded and len(scorer.bodies) == before + 1 and calls[:1] == ["judge"]
