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
from tests.conftest import json_stand_in, run_cli


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
    from rag_bot.grounding.judge import RelevanceJudge
    from rag_bot.retrieval.rerank import RerankPostprocessor
    from tests.openai_stub import Reply, user_prompt

    scorer, url = scorer_url
    scorer.shape = "cohere"
    calls: list[str] = []

    def reply(body: dict) -> Reply:
        calls.append("judge" if '{"relevant":' in user_prompt(body) else "answer")
        return Reply(text='{"relevant": [1]}' if calls[-1] == "judge" else "The first source answers it [1].")

    stub.default = reply
    engine = llm_engine(llm_retries=0, rerank_url=url)
    assert [type(p) for p in engine.query_engine._node_postprocessors] == [RerankPostprocessor]
    assert isinstance(engine.judge, RelevanceJudge)
    before = len(scorer.bodies)
    confident = "Summarize the work on reinforcement learning for reasoning"  # the judge reviews confident answers
    answer = engine.ask(confident)
    assert answer.certainty == "confident" and len(scorer.bodies) == before + 1 and calls[:1] == ["judge"]


def _rows(count: int, **change: object) -> list[dict]:
    """A Cohere-shaped reply's rows for `count` documents, with the first row's fields changed (None: removed)."""
    rows: list[dict] = [{"index": i, "relevance_score": 1.0 - i / 100} for i in range(count)]
    rows[0] = {k: v for k, v in (rows[0] | change).items() if v is not None}
    return rows


# Replies out of shape, as a broken or hostile reranker sends them: each must leave the retrieval order.
BAD_REPLIES = {
    "html page": lambda n: b"<html><body>502 Bad Gateway</body></html>",
    "huge index": lambda n: {"results": _rows(n, index=10**30)},
    "infinite index": lambda n: b'{"results": [{"index": 1e400, "relevance_score": 1}]}',
    "negative index": lambda n: {"results": _rows(n, index=-1)},
    "missing index": lambda n: {"results": _rows(n, index=None)},
    "index as text": lambda n: {"results": _rows(n, index="0")},
    "score as text": lambda n: {"results": _rows(n, relevance_score="high")},
    "score NaN": lambda n: {"results": _rows(n, relevance_score=float("nan"))},
    "rows not objects": lambda n: {"results": [[i, 0.5] for i in range(n)]},
    "results not a list": lambda n: {"results": {"index": 0}},
    "nested past the parser": lambda n: b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("reply", sorted(BAD_REPLIES))
def test_a_reranker_answering_out_of_shape_never_fails_the_question(seed_storage, reply, caplog):
    """The question is answered in the retrieval order, and the log says once what the reranker did wrong, naming
    it with its credentials masked."""
    def respond(body: dict) -> tuple[int, object]:
        return 200, BAD_REPLIES[reply](len(body.get("documents") or body.get("texts") or []))

    plain = Engine(Settings(storage=seed_storage))
    with json_stand_in(respond) as base:
        url = base.replace("http://", "http://ranker:s3cret@") + "/v1/rerank"
        with caplog.at_level(logging.WARNING, logger="rag_bot.retrieval.rerank"):
            answer = Engine(Settings(storage=seed_storage, rerank_url=url)).ask(QUESTION)
    assert answer.answer == plain.ask(QUESTION).answer
    warnings = [r.getMessage() for r in caplog.records if r.name == "rag_bot.retrieval.rerank"]
    assert len(warnings) == 1 and "retrieval order" in warnings[0]
    assert "http://***@127.0.0.1" in warnings[0] and "s3cret" not in warnings[0]


def test_the_rerankers_credentials_never_reach_the_screen(seed_storage, tmp_path):
    """A reranker that cannot be reached is named in the warning of a real `rag-bot ask`, its password masked."""
    done = run_cli(seed_storage, "ask", QUESTION, RAG_BOT_RERANK_URL="http://ranker:s3cret@127.0.0.1:9/v1/rerank")
    assert done.returncode == 0 and "Sources:" in done.stdout
    assert "the reranker at http://***@127.0.0.1:9/v1/rerank cannot be reached" in done.stderr
    assert "s3cret" not in done.stdout + done.stderr
