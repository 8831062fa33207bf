"""Moving a collection to another embedding model (rag_bot/store/reembed.py, `rag-bot ingest --reembed`), against the
stand-in embeddings server of tests/store/test_remote_embedding.py (it computes the shipped model's vectors)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.embedders import embedder_name
from rag_bot.store.reembed import reembed, staging_name
from tests.conftest import run_main
from tests.store.test_remote_embedding import StandIn, embeddings_server, remote

QUESTION = "How is attention made sparse?"  # of conftest's few_papers


@pytest.fixture()
def stand_in():
    state = StandIn()
    with embeddings_server(state) as url:
        yield state, url


@pytest.fixture(scope="module")
def few_store(few_papers, tmp_path_factory):
    """Three papers indexed by the shipped model, copied by each test (a move of the seeds' 38 papers took 8 s on
    2 busy cores, and these tests make three; nothing here depends on the collection's size)."""
    storage = tmp_path_factory.mktemp("few-store")
    Engine(Settings(storage=storage)).ingest([few_papers])
    return storage


def test_a_cut_short_move_keeps_the_old_collection_and_resumes(stand_in, few_store, tmp_path):
    state, url = stand_in
    storage = tmp_path / "store"
    shutil.copytree(few_store, storage)
    built_in = Engine(Settings(storage=storage)).ask(QUESTION).answer
    state.fail_after = 1  # the stand-in answers 500 from its second request on
    with pytest.raises(StoreError, match="HTTP 500"):
        reembed(remote(storage, url), batch_papers=1)
    state.fail_after = None
    # Nothing was lost: the old collection still answers, with its own model; some papers are staged.
    assert Engine(Settings(storage=storage)).ask(QUESTION).answer == built_in
    staged = Engine(remote(storage, url, collection=staging_name("abstracts"))).index.count()
    assert 0 < staged < 3
    state.inputs.clear()
    moved, said = reembed(remote(storage, url), batch_papers=1)
    # Said from the model that made the old vectors to the new one (it once named the new one twice).
    assert moved == 3 and said == f"re-embedded with {embedder_name(Settings())} -> api:minilm-stand-in", said
    resumed_texts = len(state.inputs)
    after = Engine(remote(storage, url))
    assert after.index.count() == 3 and after.ask(QUESTION).answer == built_in
    with pytest.raises(StoreError, match="was embedded with api:minilm-stand-in"):
        Engine(Settings(storage=storage)).ask(QUESTION)
    # The second run embedded only what the first had not staged (a whole move embeds more).
    state.inputs.clear()
    fresh = tmp_path / "fresh"
    shutil.copytree(few_store, fresh)
    reembed(remote(fresh, url), batch_papers=1)
    assert resumed_texts < len(state.inputs)


def test_the_command_moves_the_collection_with_progress(stand_in, few_store, tmp_path, monkeypatch, capsys):
    state, url = stand_in
    storage = tmp_path / "store"
    shutil.copytree(few_store, storage)
    env = {"RAG_BOT_EMBED_URL": url, "RAG_BOT_EMBED_MODEL": "minilm-stand-in", "RAG_BOT_LLM": "offline"}
    done = subprocess.run([sys.executable, "-m", "rag_bot.surfaces.cli", "ingest", "--reembed"],
                          env={**os.environ, "RAG_BOT_STORAGE": str(storage), **env},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "3 papers" in done.stdout and "Re-embedding" in done.stderr
    # What the next commands say, through the CLI's main in this process (an interpreter start is 3-4 s).
    code, out, _ = run_main(monkeypatch, capsys, storage, "ask", QUESTION, **env)
    assert code == 0 and "Sparse attention for long contexts" in out
    code, _, err = run_main(monkeypatch, capsys, storage, "ingest", "--reembed", "seeds", **env)
    assert code == 2 and "--reembed reads the papers from the store" in err
