"""bench/perf/simulate.py, the generator of the simulated collections issue 25 measures: its file is what `rag-bot
import` loads (nothing embedded), with the number of papers asked for, texts recombined from real sentences, and
vectors near, not equal to, their originals."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _rag_bot(storage: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env["RAG_BOT_STORAGE"] = str(storage)
    return subprocess.run([str(Path(sys.executable).with_name("rag-bot")), *args], env=env, capture_output=True,
                          text=True, timeout=600)


def test_a_simulated_collection_imports_without_embedding(seed_storage, tmp_path):
    base = tmp_path / "base.ragbot.jsonl.gz"
    assert _rag_bot(seed_storage, "export", str(base)).returncode == 0
    sim = tmp_path / "sim.ragbot.jsonl.gz"
    made = subprocess.run([sys.executable, "-m", "bench.perf.simulate", str(base), "100", str(sim)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["papers"] == 100
    with gzip.open(base, "rt") as a, gzip.open(sim, "rt") as b:
        originals = {r["id"]: r for r in map(json.loads, list(a)[1:]) if r["kind"] == "paper"}
        copies = [r for r in map(json.loads, list(b)[1:]) if r["kind"] == "paper"]
    first = copies[0]
    original = next(iter(originals.values()))
    cosine = float(np.dot(first["embedding"], original["embedding"]))
    assert 0.8 < cosine < 0.999  # near its original, not equal
    assert first["document"] != original["document"]  # recombined
    store = tmp_path / "store"
    done = _rag_bot(store, "import", str(sim))
    assert done.returncode == 0 and "Imported 100 papers" in done.stdout, done.stderr
    asked = _rag_bot(store, "ask", "--json", "what does the collection say about sparse autoencoders?")
    assert asked.returncode == 0, asked.stderr
    assert all(c["doc_id"].startswith("sim") for c in json.loads(asked.stdout)["citations"])
