"""Moving a collection to another embedding model (rag_bot/store/reembed.py, `rag-bot ingest --reembed`), against the
stand-in embeddings server of tests/test_remote_embedding.py (it computes the shipped model's vectors)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import rag_bot.store.index as index_module
from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.reembed import reembed, staging_name
from tests.test_remote_embedding import StandIn, embeddings_server, remote

QUESTION = "What does CorrSteer gain on HarmBench?"


@pytest.fixture()
def stand_in():
    state = StandIn()
    with embeddings_server(state) as url:
        yield state, url


def test_a_cut_short_move_keeps_the_old_collection_and_resumes(stand_in, seed_storage, tmp_path, monkeypatch):
    state, url = stand_in
    storage = tmp_path / "store"
    shutil.copytree(seed_storage, storage)
    built_in = Engine(Settings(storage=storage)).ask(QUESTION).answer
    monkeypatch.setattr(index_module, "BATCH_PAPERS", 10)
    state.fail_after = 2  # the stand-in answers 500 from its third request on
    with pytest.raises(StoreError, match="HTTP 500"):
        reembed(remote(storage, url))
    state.fail_after = None
    # Nothing was lost: the old collection still answers, with its own model; some papers are staged.
    assert Engine(Settings(storage=storage)).ask(QUESTION).answer == built_in
    staged = Engine(remote(storage, url, collection=staging_name("abstracts"))).index.count()
    assert 0 < staged < 38
    state.inputs.clear()
    moved, said = reembed(remote(storage, url))
    assert moved == 38 and "api:minilm-stand-in" in said
    resumed_texts = len(state.inputs)
    after = Engine(remote(storage, url))
    assert after.index.count() == 38 and after.ask(QUESTION).answer == built_in
    with pytest.raises(StoreError, match="was embedded with api:minilm-stand-in"):
        Engine(Settings(storage=storage)).ask(QUESTION)
    # The second run embedded only what the first had not staged (a whole move embeds more).
    state.inputs.clear()
    fresh = tmp_path / "fresh"
    shutil.copytree(seed_storage, fresh)
    reembed(remote(fresh, url))
    assert resumed_texts < len(state.inputs)


def test_the_command_moves_the_collection_with_progress(stand_in, seed_storage, tmp_path):
    state, url = stand_in
    storage = tmp_path / "store"
    shutil.copytree(seed_storage, storage)
    env = {**os.environ, "RAG_BOT_STORAGE": str(storage), "RAG_BOT_EMBED_URL": url,
           "RAG_BOT_EMBED_MODEL": "minilm-stand-in", "RAG_BOT_LLM": "offline"}
    done = subprocess.run([sys.executable, "-m", "rag_bot.surfaces.cli", "ingest", "--reembed"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "38 papers" in done.stdout and "Re-embedding" in done.stderr
    asked = subprocess.run([sys.executable, "-m", "rag_bot.surfaces.cli", "ask", QUESTION], env=env,
                           capture_output=True, text=True, timeout=300)
    assert asked.returncode == 0 and "CorrSteer" in asked.stdout
    again = subprocess.run([sys.executable, "-m", "rag_bot.surfaces.cli", "ingest", "--reembed", "seeds"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "--reembed reads the papers from the store" in again.stderr
