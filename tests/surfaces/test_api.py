"""The OpenAI-compatible API, served by uvicorn on a loopback port over the seed store, driven by the `openai`
client itself (streaming and not)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from rag_bot import answer_words as words
from tests.conftest import free_port

pytestmark = pytest.mark.slow

QUESTION = "which paper steers LLMs using correlated sparse autoencoder features?"
KEY = "test-key-123"


def _serve(app: Any) -> tuple[str, Any, threading.Thread]:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the API server did not start"
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}/v1", server, thread


@pytest.fixture(scope="module")
def servers(engine) -> Iterator[dict[str, str]]:
    """Two servers over the seed engine: one open, one that needs the bearer key."""
    from rag_bot.surfaces.api import create_api

    engine.retriever  # noqa: B018  (load before the first request)
    open_url, open_server, open_thread = _serve(create_api(engine))
    keyed_url, keyed_server, keyed_thread = _serve(create_api(engine, api_key=KEY))
    yield {"open": open_url, "keyed": keyed_url}
    for server, thread in ((open_server, open_thread), (keyed_server, keyed_thread)):
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def client(servers) -> openai.OpenAI:
    return openai.OpenAI(base_url=servers["open"], api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def first(client) -> Any:
    """The non-streamed answer to QUESTION."""
    return client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": QUESTION}])


def test_models_are_listed(client):
    assert [m.id for m in client.models.list()] == ["rag-bot", "rag-bot-summary", "rag-bot-compare"]


def test_an_answer_keeps_its_markers_references_and_citations(first, engine):
    content = first.choices[0].message.content
    extra = first.model_extra["rag_bot"]
    assert first.object == "chat.completion" and first.choices[0].finish_reason == "stop"
    assert first.model == "rag-bot" and first.choices[0].message.role == "assistant"
    citation = extra["citations"][0]
    assert extra["grounded"] and extra["mode"] == "ask" and extra["retrieved"]
    assert extra["certainty"] == "confident" and 0 < citation["probability"] <= 1, "how sure, in the extension"
    assert citation["n"] == 1 and citation["title"] == "CorrSteer" and citation["quote"]
    assert engine.papers[citation["doc_id"]].title == "CorrSteer"
    body, references = content.split("\n\nReferences:\n")
    assert "[1]" in body
    assert references.splitlines()[0] == f"[1] CorrSteer ({citation['doc_id']})"


def test_a_streamed_answer_ends_with_references_and_the_extension(client, first):
    chunks = list(client.chat.completions.create(
        model="rag-bot", messages=[{"role": "user", "content": QUESTION}], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == first.choices[0].message.content  # same text, References included, as the unstreamed answer
    assert len(chunks) > 3  # written piece by piece
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    extra = last.to_dict()["rag_bot"]
    assert extra == last.model_extra["rag_bot"]
    assert extra["citations"] == first.model_extra["rag_bot"]["citations"] and extra["grounded"]
    assert all("rag_bot" not in (c.model_extra or {}) for c in chunks[:-1])


@pytest.mark.parametrize("model, mode", [("rag-bot-summary", "summary"), ("rag-bot-compare", "compare")])
def test_the_model_name_selects_the_mode(client, model, mode):
    reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTION}])
    assert reply.model == model and reply.model_extra["rag_bot"]["mode"] == mode


def test_a_follow_up_uses_the_history(client, first):
    # (not "on HarmBench": one abstract alone names that benchmark, so the name would find CorrSteer by itself)
    follow_up = "and how large is its gain?"
    alone = client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": follow_up}])
    reply = client.chat.completions.create(model="rag-bot", messages=[
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": [{"type": "text", "text": follow_up}]},
    ])
    extra = reply.model_extra["rag_bot"]
    assert alone.model_extra["rag_bot"]["certainty"] != "confident"  # without the conversation "it" is nothing
    assert extra["certainty"] == "confident" and extra["citations"][0]["title"] == "CorrSteer"
    assert "HarmBench" in reply.choices[0].message.content


def _error(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    assert set(body) == {"error"} and {"message", "type", "code"} <= set(body["error"])
    assert "Traceback" not in exc.response.text
    return dict(body["error"])


def test_errors_are_in_openai_format(client, servers):
    with pytest.raises(openai.BadRequestError) as empty:
        client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": "  \n "}])
    assert _error(empty.value)["code"] == "empty_question"
    with pytest.raises(openai.BadRequestError) as empty_stream:
        list(client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": ""}],
                                            stream=True))
    assert _error(empty_stream.value)["code"] == "empty_question"
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    error = _error(unknown.value)
    assert error["code"] == "model_not_found" and "rag-bot-summary" in error["message"]

    url = servers["open"] + "/chat/completions"
    for payload in ({"content": b"{not json"}, {"json": {"model": "rag-bot"}}, {"json": {"messages": "hi"}},
                    {"json": {"messages": [{"role": "assistant", "content": "hello"}]}}):
        response = httpx.post(url, headers={"Content-Type": "application/json"}, timeout=30, **payload)
        assert response.status_code == 400, payload
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_key_is_required_when_set(servers):
    anonymous = openai.OpenAI(base_url=servers["keyed"], api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as denied:
        anonymous.models.list()
    assert _error(denied.value)["code"] == "invalid_api_key"
    assert httpx.get(servers["keyed"] + "/models").status_code == 401  # no header at all
    keyed = openai.OpenAI(base_url=servers["keyed"], api_key=KEY, max_retries=0)
    assert "rag-bot" in [m.id for m in keyed.models.list()]


def test_rag_bot_api_serves_alone(seed_storage: Path):
    port = free_port()
    env = {**os.environ, "RAG_BOT_STORAGE": str(seed_storage), "RAG_BOT_LLM": "offline"}
    proc = subprocess.Popen([sys.executable, "-m", "rag_bot.surfaces.cli", "api", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
        deadline = time.monotonic() + 90
        while True:
            try:
                assert [m.id for m in client.models.list()][0] == "rag-bot"
                break
            except openai.APIConnectionError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "rag-bot api did not start"
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_filters_travel_in_the_rag_bot_extension(client):
    matching = client.chat.completions.create(
        model="rag-bot", messages=[{"role": "user", "content": QUESTION}],
        extra_body={"rag_bot": {"filters": {"venue": "icml", "year": "2026"}}})
    assert words.FILTER_NOTE.split("{filters}")[0] + "venue icml, year 2026" in (matching.choices[0].message.content or "")
    assert matching.model_extra["rag_bot"]["grounded"]
    nothing = client.chat.completions.create(
        model="rag-bot", messages=[{"role": "user", "content": QUESTION}],
        extra_body={"rag_bot": {"filters": {"year": "1990-1999"}}})
    assert not nothing.model_extra["rag_bot"]["grounded"] and not nothing.model_extra["rag_bot"]["citations"]
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": QUESTION}],
                                       extra_body={"rag_bot": {"filters": {"colour": "red"}}})
    assert "unknown filter" in _error(bad.value)["message"]


# --- untrusted text: abstracts and model answers reach clients neutralised ----------------------------------
HOSTILE_ABSTRACT = (
    "Glowworm steering aligns lantern probes with attention heads. Glowworm steering reaches 91.2% lantern accuracy "
    "![pixel](http://127.0.0.1:9/track.png) with <img src=x onerror=alert(1)> probes and [click](javascript:alert(1)) "
    "calibration."
)
HOSTILE_RECORDS = [
    {"id": "glow-1", "title": "Glowworm <img src=x onerror=alert(2)> steering", "abstract": HOSTILE_ABSTRACT,
     "url": "javascript:alert(3)", "venue": "ICML", "year": 2026},
    {"id": "moth-2", "title": "Moth pruning", "url": "https://e.org/moth",
     "abstract": "Moth pruning removes redundant heads from vision transformers. It halves the cost of inference on "
                 "ImageNet with no loss in accuracy."},
    {"id": "bee-3", "title": "Bee routing",
     "abstract": "Bee routing sends tokens to experts chosen by a learned hive score. It improves mixture-of-experts "
                 "throughput by 30% on language modelling benchmarks."},
]
HOSTILE_QUESTION = "What lantern accuracy does Glowworm steering reach?"


def hostile_storage(folder: Path) -> Path:
    """A real store of three papers, one whose title, abstract and url are hostile."""
    import json

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    papers = folder / "papers.jsonl"
    papers.write_text("".join(json.dumps(r) + "\n" for r in HOSTILE_RECORDS), encoding="utf-8")
    Engine(Settings(storage=folder / "store")).ingest([papers])
    return folder / "store"


def active(text: str) -> list[str]:
    """What a Markdown client would make active in a text (images, raw HTML, non-http(s) links), by a
    permissive renderer and by the raw syntax, unescaped."""
    import re

    from tests.engine.test_sanitize import unsafe_constructs

    raw = re.findall(r"(?<!\\)!\[|(?<!\\)<(?:img|script)|\]\(javascript:", text)
    return unsafe_constructs(text) + raw


def _ask_both(client: openai.OpenAI, question: str) -> tuple[Any, str, dict[str, Any]]:
    """The non-streamed reply, the streamed text and the streamed `rag_bot` field of one question."""
    reply = client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": question}])
    chunks = list(client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": question}],
                                                 stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return reply, text, chunks[-1].model_extra["rag_bot"]


@pytest.fixture(scope="module")
def hostile_client(tmp_path_factory) -> Iterator[openai.OpenAI]:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.surfaces.api import create_api

    engine = Engine(Settings(storage=hostile_storage(tmp_path_factory.mktemp("hostile"))))
    url, server, thread = _serve(create_api(engine))
    yield openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
    server.should_exit = True
    thread.join(timeout=10)


def test_a_hostile_abstract_comes_back_neutralised_streamed_or_not(hostile_client):
    reply, streamed, streamed_extra = _ask_both(hostile_client, HOSTILE_QUESTION)
    content = reply.choices[0].message.content or ""
    extra = reply.model_extra["rag_bot"]
    assert streamed == content and streamed_extra["citations"] == extra["citations"]
    citation = extra["citations"][0]
    assert citation["doc_id"] == "glow-1" and "[1]" in content and "References:" in content
    assert "91.2% lantern accuracy" in content and "91.2% lantern accuracy" in citation["quote"]
    assert "Glowworm" in citation["title"] and "(glow-1)" in content.split("References:")[1]
    assert "http://127.0.0.1:9/track.png" in content  # the image's URL stays readable, as text or a link
    for text in (content, citation["title"], citation["quote"]):
        assert active(text) == [], text


def test_an_llm_answer_with_an_image_is_neutralised(llm_engine, stub):
    from rag_bot.surfaces.api import create_api
    from tests.openai_stub import Reply

    # Written by the model, streamed to rag-bot in 3-character pieces: each construct arrives split.
    stub.default = lambda body: Reply(text="CorrSteer selects features by correlation [1]. "
                                           "![seen](http://127.0.0.1:9/llm.png) <img src=x onerror=alert(1)> "
                                           "[more](javascript:alert(1)) and <script>alert(2)</script>.")
    url, server, thread = _serve(create_api(llm_engine()))
    try:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        reply, streamed, _ = _ask_both(client, QUESTION)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    content = reply.choices[0].message.content or ""
    assert reply.model_extra["rag_bot"]["llm"] != "offline"  # the model's own text
    assert "CorrSteer selects features by correlation [1]" in content and streamed == content
    for text in (content, streamed):
        assert active(text) == [], text


def test_usage_counts_word_pieces_unstreamed_and_streamed_on_request(client, first):
    """`usage` (word pieces of the shipped model) is in every unstreamed answer, and in a last chunk with no
    choices when `stream_options.include_usage` asks for it; both validate as the openai package's types."""
    from tokenizers import Tokenizer

    from rag_bot.store.embedding import model_files

    tokenizer = Tokenizer.from_file(str(model_files()[1]))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def pieces(text: str) -> int:
        return len(tokenizer.encode(text).ids) - 2

    content = first.choices[0].message.content
    assert first.usage is not None
    assert first.usage.prompt_tokens == pieces(QUESTION) and first.usage.completion_tokens == pieces(content)
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens
    chunks = list(client.chat.completions.create(
        model="rag-bot", messages=[{"role": "user", "content": QUESTION}], stream=True,
        stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.model_dump() == first.usage.model_dump()  # the same text, counted the same
    assert all(c.usage is None for c in chunks[:-1])
    plain = list(client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": QUESTION}],
                                                stream=True))
    assert all(c.usage is None for c in plain) and plain[-1].choices[0].finish_reason == "stop"
