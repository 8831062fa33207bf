"""The real chat server (`rag-bot serve`), driven through its Gradio API like a client would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rag_bot.text import clean_markup
from tests.conftest import free_port

RAG_BOT = str(Path(sys.executable).parent / "rag-bot")


def _paper_with(engine, fragment: str) -> str:
    papers = engine.retriever.papers.values()
    hits = [p.doc_id for p in papers if fragment in p.aliases] or [
        p.doc_id for p in papers if fragment in clean_markup(p.text)
    ]
    assert len(hits) == 1
    return hits[0]


@pytest.fixture(scope="module")
def server(seed_storage, tmp_path_factory):
    """`rag-bot serve` on a free port over the seed store; stopped at the end of the module."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(seed_storage), RAG_BOT_PORT=str(port), RAG_BOT_HOST="127.0.0.1",
               GRADIO_ANALYTICS_ENABLED="False")
    workdir = tmp_path_factory.mktemp("serve")
    log = (workdir / "serve.log").open("w+")
    proc = subprocess.Popen([RAG_BOT, "serve"], env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"rag-bot serve exited with {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("rag-bot serve did not answer within 120 s")
            time.sleep(0.5)
        yield url, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


@pytest.fixture(scope="module")
def client(server):
    from gradio_client import Client

    return Client(server[0], verbose=False)


def chat(client, message: str, mode: str = "Auto") -> str:
    reply = client.predict(message=message, mode=mode, api_name="/chat")
    assert isinstance(reply, str)
    return reply


def test_chat_answers_with_citations_and_sources(client, engine):
    reply = chat(client, "what does CorrSteer gain on HarmBench?")
    body, _, sources = reply.partition("**Sources**")
    assert "[1]" in body
    assert "27.1" in body
    assert sources, "the reply lists its sources"
    corrsteer = _paper_with(engine, "CorrSteer")
    title = clean_markup(engine.retriever.papers[corrsteer].title)
    assert f"1. **{title}**" in sources
    assert corrsteer in sources


def test_compare_mode_from_the_radio(client, engine):
    message = "CorrSteer and SARSteer"  # nothing in the words asks for a comparison
    auto = chat(client, message, "Auto")
    compared = chat(client, message, "Compare")
    assert "|---" not in auto
    assert "|---" in compared, "the Compare radio value gives the comparison table"
    table = [line for line in compared.split("**Sources**")[0].splitlines() if line.startswith("|")]
    for name in ("CorrSteer", "SARSteer"):
        title = clean_markup(engine.retriever.papers[_paper_with(engine, name)].title)
        assert title in table[0], f"{name} has a column"
    assert all("[1]" in row and "[2]" in row for row in table[2:]), "both papers cited in every row"
    sources = compared.split("**Sources**")[1]
    assert "1. **" in sources and "2. **" in sources


@pytest.mark.parametrize("message", ["", "   "])
def test_blank_question_gets_a_friendly_message(client, server, message):
    reply = chat(client, message)
    assert reply.strip()
    assert "question" in reply.lower()
    for bad in ("Traceback", "Error", "error", "Sorry", "[1]"):
        assert bad not in reply
    log = server[1]
    log.seek(0)
    assert "Traceback" not in log.read()


def test_out_of_collection_question_is_declined_in_chat(client):
    reply = chat(client, "How do I make a sourdough bread starter?")
    assert "does not seem to cover" in reply
    assert "**Sources**" not in reply and "[1]" not in reply
