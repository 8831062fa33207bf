"""The store's connection (rag_bot/store/base.py): what its Chroma collections search like."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from rag_bot.retrieval.retrieve import _nearest
from rag_bot.settings import Settings
from rag_bot.store.base import EF_SEARCH
from rag_bot.store.index import PaperIndex

# 3,000 vectors in 60 loose clusters: Chroma's default search (100 candidates) finds only 0.9 of a query's 40 nearest
# here, and all 40 for fewer than one query in ten (measured; bench/eval/hnsw_search.py on real papers).
PAPERS, CLUSTERS, SPREAD, NEAREST = 3000, 60, 1.0, 40


def _vectors(count: int, seed: int) -> np.ndarray:
    """Unit vectors around clusters of their own (a question's do not lie on the papers' clusters)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLUSTERS, 384))
    x = centres[rng.integers(0, CLUSTERS, count)] + SPREAD * rng.normal(size=(count, 384))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_a_question_s_nearest_papers_are_the_exact_nearest_even_in_a_store_chroma_made_with_its_defaults(
    tmp_path: Path,
) -> None:
    papers = _vectors(PAPERS, seed=1)
    np.save(tmp_path / "papers.npy", papers)
    storage = tmp_path / "store"
    # The papers collection as Chroma makes it by default (an older rag-bot made it so), in another process.
    subprocess.run([sys.executable, "-c", f"""
import chromadb, numpy as np
x = np.load({str(tmp_path / 'papers.npy')!r})
client = chromadb.PersistentClient(path={str(storage)!r})
papers = client.get_or_create_collection('abstracts_papers', metadata={{'hnsw:space': 'cosine'}},
                                         embedding_function=None)
assert papers.configuration['hnsw']['ef_search'] == 100
for start in range(0, len(x), 1000):
    papers.add(ids=[f'p{{i}}' for i in range(start, start + 1000)], embeddings=x[start:start + 1000].tolist())
"""], check=True, capture_output=True)

    index = PaperIndex(Settings(storage=storage))
    assert index.papers.configuration["hnsw"]["ef_search"] == EF_SEARCH
    questions = _vectors(20, seed=2)
    for question in questions:
        found = _nearest(index.papers, question.tolist(), NEAREST, PAPERS, None, None, PAPERS)
        exact = [f"p{i}" for i in np.argsort(-(papers @ question))[:NEAREST]]
        assert [doc_id for doc_id, _ in found] == exact
        assert np.allclose([1 - distance for _, distance in found], np.sort(papers @ question)[::-1][:NEAREST],
                           atol=1e-5)
