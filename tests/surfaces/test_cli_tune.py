"""`rag-bot tune`: without the `train` extra, one line and nothing changed; with it (`make test-train`), a model
folder the store is moved to and answers with."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import paper_with, run_main

HAS_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "onnx"))
needs_train_extra = pytest.mark.skipif(not HAS_TORCH, reason="needs the `train` extra (torch's CPU build), never "
                                       "part of `make test`: run `make test-train`")


def _store_files(storage: Path) -> dict[str, int]:
    return {str(p.relative_to(storage)): p.stat().st_size for p in storage.rglob("*") if p.is_file()}


def test_without_the_train_extra_tune_names_what_to_install_and_changes_nothing(
        monkeypatch, capsys, seed_storage: Path) -> None:
    before = _store_files(seed_storage)
    monkeypatch.setitem(sys.modules, "torch", None)  # as in an install without the extra: `import torch` fails
    code, out, err = run_main(monkeypatch, capsys, seed_storage, "tune")
    assert code == 2 and not out
    assert "pip install 'rag-bot[train]'" in err and "nothing was changed" in err and len(err.splitlines()) == 1
    assert _store_files(seed_storage) == before and not (seed_storage / "models").exists()


@pytest.mark.parametrize("flag", [["--steps", "0"], ["--batch", "1"], ["--questions", "x"], ["--anchor", "-1"],
                                  ["--anchor", "nan"]])
def test_impossible_numbers_are_refused_before_anything_runs(monkeypatch, capsys, seed_storage: Path, flag) -> None:
    with pytest.raises(SystemExit) as stop:
        run_main(monkeypatch, capsys, seed_storage, "tune", *flag)
    assert stop.value.code == 2
    assert flag[0] in capsys.readouterr().err


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, seed_storage: Path) -> tuple[Path, Path, tuple[int, str, str]]:
    """A copy of the seed store, tuned for two steps by the console script (the shared seed store is never
    written)."""
    if not HAS_TORCH:
        pytest.skip("needs the `train` extra")
    storage = tmp_path_factory.mktemp("tune") / "store"
    shutil.copytree(seed_storage, storage)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    done = subprocess.run([str(Path(sys.executable).parent / "rag-bot"), "tune", "--steps", "2", "--questions", "8",
                           "--quiet"], capture_output=True, text=True, timeout=900, cwd=storage.parent,
                          env=env | {"RAG_BOT_STORAGE": str(storage)}, stdin=subprocess.DEVNULL)
    return storage, storage / "models" / "abstracts-tuned", (done.returncode, done.stdout, done.stderr)


@needs_train_extra
def test_tune_writes_a_model_folder_with_its_provenance(tuned) -> None:
    storage, folder, (code, out, err) = tuned
    assert code == 0, err
    assert {"model.onnx", "model.safetensors", "config.json", "tokenizer.json", "provenance.json"} <= {
        p.name for p in folder.iterdir()}
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["made_by"] == "rag-bot tune" and provenance["steps"] == 2 and provenance["papers"] == 38
    assert provenance["int8_cosine_min"] > 0.97, "the int8 export must say what the trained weights say"
    assert f"RAG_BOT_EMBED_PATH={folder}" in out and "Moved 38 papers" in out
    assert "Check it on your own questions" in out and "ingest --reembed" in out, "the way back is named"


@needs_train_extra
def test_a_tuned_store_answers_with_its_model_and_says_how_without_it(tuned, engine, monkeypatch, capsys) -> None:
    storage, folder, _ = tuned
    code, out, err = run_main(monkeypatch, capsys, storage, "ask", "--json", "what does CorrSteer gain on HarmBench?",
                              RAG_BOT_EMBED_PATH=str(folder))
    assert code == 0, err
    answer = json.loads(out)
    assert answer["citations"][0]["doc_id"] == paper_with(engine, "CorrSteer")
    code, out, err = run_main(monkeypatch, capsys, storage, "ask", "what is said about sparse autoencoders?")
    assert code != 0 and f"RAG_BOT_EMBED_PATH={folder}" in err and "Traceback" not in err


@needs_train_extra
def test_tune_refuses_to_overwrite_a_model_and_a_base_that_is_not_a_model(tuned, monkeypatch, capsys,
                                                                          tmp_path: Path) -> None:
    storage, folder, _ = tuned
    stamp = (folder / "model.onnx").stat().st_mtime_ns
    code, _, err = run_main(monkeypatch, capsys, storage, "tune", "--steps", "1", RAG_BOT_EMBED_PATH=str(folder))
    assert code == 2 and "--force" in err and (folder / "model.onnx").stat().st_mtime_ns == stamp
    code, _, err = run_main(monkeypatch, capsys, storage, "tune", "--base", str(tmp_path), "--out",
                            str(tmp_path / "other"), RAG_BOT_EMBED_PATH=str(folder))
    assert code == 2 and "model.safetensors" in err and not (tmp_path / "other").exists()
