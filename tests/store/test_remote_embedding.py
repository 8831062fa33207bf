"""Embeddings through an OpenAI-compatible `/v1/embeddings` server (rag_bot/store/remote_embedding.py).

The server here is a STAND-IN for OpenAI, Ollama, vLLM or text-embeddings-inference: a real HTTP server on
loopback speaking that API, computing real vectors with the shipped MiniLM, so retrieval through it can be held
against the built-in path. Modes make it fail, stall, or change the size of its vectors.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.evaluation.evaluate import DEFAULT_SET, load_questions
from rag_bot.settings import Settings
from tests.conftest import SEEDS, json_stand_in, run_cli, run_main


class StandIn:
    """State of the stand-in server: its mode and the texts it was asked to embed."""

    def __init__(self) -> None:
        from rag_bot.store.embedding import MiniLMEmbedding

        self.model = MiniLMEmbedding()
        self.mode = "ok"
        self.inputs: list[str] = []
        self.calls = 0
        self.fail_after: int | None = None  # requests answered before it starts failing


@contextmanager
def embeddings_server(state: StandIn) -> Iterator[str]:
    def respond(body: dict) -> tuple[int, dict]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        state.calls += 1
        state.inputs += texts
        if state.mode == "fail" or (state.fail_after is not None and state.calls > state.fail_after):
            return 500, {"error": {"message": "the model crashed", "type": "server_error"}}
        if state.mode == "slow":
            time.sleep(3)
        vectors = state.model.embed([t.removeprefix("query: ").removeprefix("passage: ") for t in texts])
        if body.get("dimensions"):  # OpenAI's shortened vectors: the first d components (renormalised by the client)
            vectors = vectors[:, :body["dimensions"]]
        if state.mode == "shrink" and state.calls > 1:
            vectors = vectors[:, :100]
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        return 200, {"object": "list", "data": data, "model": body["model"],
                     "usage": {"prompt_tokens": 0, "total_tokens": 0}}

    with json_stand_in(respond) as base:
        yield f"{base}/v1"


@pytest.fixture(scope="module")
def stand_in() -> Iterator[tuple[StandIn, str]]:
    state = StandIn()
    with embeddings_server(state) as url:
        yield state, url


def remote(storage: Path, url: str, **extra: object) -> Settings:
    return Settings(storage=storage, embed_url=url, embed_model="minilm-stand-in", llm_retries=0, **extra)


@pytest.fixture(scope="module")
def remote_store(stand_in, tmp_path_factory) -> Path:
    state, url = stand_in
    storage = tmp_path_factory.mktemp("remote-store")
    Engine(remote(storage, url)).ingest([SEEDS])  # sentences too (auto): on demand, the dev set's answers took longer
    return storage


def test_retrieval_through_the_server_ranks_the_dev_set_as_the_built_in_model(stand_in, remote_store, engine):
    state, url = stand_in
    through = Engine(remote(remote_store, url))
    questions = load_questions(DEFAULT_SET)
    for q in questions:
        built_in = [p.paper.doc_id for p in engine.retriever.retrieve_papers(q.question)[:10]]
        served = [p.paper.doc_id for p in through.retriever.retrieve_papers(q.question)[:10]]
        assert served == built_in, q.question
    answer = through.ask("What does CorrSteer gain on HarmBench?")
    assert answer.answer == engine.ask("What does CorrSteer gain on HarmBench?").answer
    # The dev set's figures, end to end (grounding, refusals, facts, citations), are the built-in path's.
    from rag_bot.evaluation.evaluate import evaluate

    figures = ("R@1", "R@5", "MRR@10", "summary/compare recall", "refusal accuracy", "false refusals",
               "fact accuracy", "citation integrity")
    served, built = evaluate(through, questions), evaluate(engine, questions)
    assert {k: served[k] for k in figures} == {k: built[k] for k in figures}
    assert through.stats()["embedding"].startswith("api:minilm-stand-in/")


def test_query_and_document_prefixes_reach_the_server(stand_in, few_papers, tmp_path):
    state, url = stand_in
    settings = remote(tmp_path, url, embed_query_prefix="query: ", embed_document_prefix="passage: ",
                      sentence_vectors="on-demand")
    engine = Engine(settings)
    engine.ingest([few_papers])
    state.inputs.clear()
    engine.retriever.retrieve_papers("sparse autoencoder steering")
    assert "query: sparse autoencoder steering" in state.inputs
    assert state.inputs and all(t.startswith(("query: ", "passage: ")) for t in state.inputs)


@pytest.mark.parametrize(("mode", "message"), [
    ("fail", "refused the request: HTTP 500"),
    ("slow", "did not answer within 0.5 s"),
])
def test_a_failing_server_is_one_clear_line_and_the_store_keeps_its_papers(stand_in, remote_store, tmp_path,
                                                                          mode, message):
    import shutil

    state, url = stand_in
    storage = tmp_path / "store"
    shutil.copytree(remote_store, storage)
    before = Engine(remote(storage, url)).index.count()
    state.mode = mode
    try:
        with pytest.raises(StoreError, match=message) as caught:
            Engine(remote(storage, url, embed_timeout=0.5)).ask("a question nobody asked before about sheep")
        assert "\n" not in str(caught.value) and url in str(caught.value)
        with pytest.raises(StoreError, match=message):
            Engine(remote(storage, url, embed_timeout=0.5)).index.embedder.embed(["a new abstract"])
    finally:
        state.mode = "ok"
    assert Engine(remote(storage, url)).index.count() == before


def test_a_server_down_or_changing_its_vector_size_is_named(stand_in, tmp_path):
    state, url = stand_in
    with pytest.raises(StoreError, match="cannot be reached"):
        Engine(remote(tmp_path / "a", "http://127.0.0.1:9/v1")).ingest([SEEDS])
    state.mode, state.calls = "shrink", 0
    try:
        with pytest.raises(StoreError, match="returned 100-dimensional vectors after 384-dimensional ones"):
            Engine(remote(tmp_path / "b", url, embed_batch_size=1)).index.embedder.embed(["x"] * 200)
    finally:
        state.mode = "ok"


def test_a_store_embedded_by_one_model_refuses_another(stand_in, remote_store, seed_storage, tmp_path):
    """Switching models never mixes vectors: a question or an ingest with another model is refused, with the
    settings that fix it, and the store is left as it was."""
    state, url = stand_in
    with pytest.raises(StoreError, match="was embedded with all-MiniLM-L6-v2-onnx-int8, but the settings choose "
                                         "api:minilm-stand-in") as caught:
        Engine(remote(seed_storage, url)).ask("What does CorrSteer gain on HarmBench?")
    assert "RAG_BOT_COLLECTION" in str(caught.value) and "RAG_BOT_EMBED_URL" in str(caught.value)
    with pytest.raises(StoreError, match="was embedded with api:minilm-stand-in"):
        Engine(Settings(storage=remote_store)).ingest([SEEDS])
    assert Engine(remote(remote_store, url)).index.count() == 38


def test_a_shorter_vector_size_is_asked_and_recorded(stand_in, few_papers, tmp_path):
    state, url = stand_in
    engine = Engine(remote(tmp_path, url, embed_dimensions=128, sentence_vectors="on-demand"))
    engine.ingest([few_papers])
    assert engine.index.dimensions() == 128 and engine.stats()["embedding"].startswith("api:minilm-stand-in@128/")
    assert engine.ask("How is attention made sparse?").grounded
    # The same model at its full size is another model for the store.
    with pytest.raises(StoreError, match="was embedded with api:minilm-stand-in@128"):
        Engine(remote(tmp_path, url)).ask("How is attention made sparse?")


def _data(vectors: list, **change: object) -> dict:
    """An OpenAI-shaped embeddings reply of these vectors, the first item's fields changed (None: removed)."""
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    data[0] = {k: v for k, v in (data[0] | change).items() if v is not None}
    return {"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 0, "total_tokens": 0}}


# Replies out of shape, as a misconfigured proxy or a broken server sends them; each with what the line says.
ODD_REPLIES = {
    "html page": (lambda v: b"<html><body>Welcome to nginx!</body></html>", "answered in a shape this reader"),
    "NaN values": (lambda v: _data(v, embedding=[float("nan")] * len(v[0])), "infinite or NaN"),
    "nested vectors": (lambda v: _data([[row] for row in v]), "not a flat list of numbers"),
    "missing index": (lambda v: _data(v, index=None), "`index` fields are not 0 to"),
    "wrong count": (lambda v: _data(v[:-1] or v + v), r"returned \d+ vectors for \d+ texts"),
    "wrong dimension": (lambda v: _data([row[:100] for row in v]), "100-dimensional vectors, but the store.s are 384"),
}


@pytest.mark.parametrize("reply", sorted(ODD_REPLIES))
def test_an_embeddings_server_answering_out_of_shape_is_one_line_and_nothing_is_written(
        stand_in, remote_store, few_papers, tmp_path, reply):
    import shutil

    state, good = stand_in
    shape, message = ODD_REPLIES[reply]

    def respond(body: dict) -> tuple[int, object]:
        return 200, shape(state.model.embed(body["input"]).tolist())

    storage = tmp_path / "store"
    shutil.copytree(remote_store, storage)
    with json_stand_in(respond) as base:
        url = base.replace("http://", "http://embedder:s3cret@") + "/v1"
        for use in (lambda e: e.ingest([few_papers]), lambda e: e.ask("a question nobody asked before about sheep")):
            with pytest.raises(StoreError, match=message) as caught:
                use(Engine(remote(storage, url)))
            line = str(caught.value)
            assert "\n" not in line and "the embeddings server at http://***@127.0.0.1" in line and "s3cret" not in line
    assert Engine(remote(storage, good)).index.count() == 38


def test_the_embeddings_servers_credentials_never_reach_the_screen(stand_in, remote_store, few_papers, tmp_path,
                                                                  monkeypatch, capsys):
    """`rag-bot stats`, `doctor`, and an ingest against a server that is down or answers an HTML page: the password
    in RAG_BOT_EMBED_URL is masked everywhere, and each failure is one line (the last run through the real console
    script: nothing else reaches the terminal)."""
    state, good = stand_in
    secret = {"RAG_BOT_EMBED_MODEL": "minilm-stand-in", "RAG_BOT_LLM_RETRIES": "0"}
    for command in (["stats"], ["doctor"]):
        code, out, err = run_main(monkeypatch, capsys, remote_store, *command,
                                  RAG_BOT_EMBED_URL=good.replace("http://", "http://u:s3cret@"), **secret)
        assert code == 0 and "s3cret" not in out + err
    code, out, err = run_main(monkeypatch, capsys, tmp_path / "store", "ingest", str(few_papers),
                              RAG_BOT_EMBED_URL="http://u:s3cret@127.0.0.1:9/v1", **secret)
    assert code == 1 and "the embeddings server at http://***@127.0.0.1:9/v1" in err
    assert "s3cret" not in out + err and "unexpected" not in err
    with json_stand_in(lambda body: (200, b"<html>Welcome to nginx!</html>")) as base:
        page = run_cli(tmp_path / "store", "ingest", str(few_papers),
                       RAG_BOT_EMBED_URL=base.replace("http://", "http://u:s3cret@") + "/v1", **secret)
    assert page.returncode == 1 and "answered in a shape this reader does not know" in page.stderr
    assert "s3cret" not in page.stdout + page.stderr and "unexpected" not in page.stderr
    assert Engine(remote(tmp_path / "store", good)).index.count() == 0
