"""The BM25 matrix built from each paper's distinct words and counts is bm25s's own, number for number: on the
seed abstracts as the lexicon tokenises them, and on random token lists cut into many slices."""

from __future__ import annotations

from types import SimpleNamespace

import bm25s
import numpy as np
import pytest
import Stemmer

from rag_bot.retrieval.lexical import bm25_build
from tests.conftest import SEEDS


def _by_bm25s(docs: list[np.ndarray], vocab: dict[str, int]) -> bm25s.BM25:
    reference = bm25s.BM25()
    reference.index(SimpleNamespace(ids=[d.tolist() for d in docs], vocab=dict(vocab)), show_progress=False)
    return reference


def _ours(docs: list[np.ndarray], vocab: dict[str, int], slice_pairs: int = bm25_build.SLICE) -> bm25s.BM25:
    pairs = [np.unique(d, return_counts=True) for d in docs]
    terms = np.concatenate([u for u, _ in pairs]).astype(np.int32) if docs else np.zeros(0, np.int32)
    counts = np.concatenate([c for _, c in pairs]).astype(np.int32) if docs else np.zeros(0, np.int32)
    return bm25_build.build(terms, counts, np.asarray([len(u) for u, _ in pairs], dtype=np.int64),
                            np.asarray([len(d) for d in docs], dtype=np.int64), vocab, slice_pairs)


def _assert_same(ours: bm25s.BM25, reference: bm25s.BM25) -> None:
    for key in ("data", "indices", "indptr"):
        assert ours.scores[key].dtype == reference.scores[key].dtype, key
        assert np.array_equal(ours.scores[key], reference.scores[key]), key
    assert ours.scores["num_docs"] == reference.scores["num_docs"]
    assert ours.vocab_dict == reference.vocab_dict


def test_the_seed_abstracts_give_bm25s_s_matrix_and_ranking(tmp_path) -> None:
    texts = [p.read_text(encoding="utf-8") for p in sorted(SEEDS.glob("*.txt"))]
    got = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)
    docs = [np.asarray(row, dtype=np.int32) for row in got.ids]
    ours, reference = _ours(docs, got.vocab), _by_bm25s(docs, got.vocab)
    _assert_same(ours, reference)
    ours.save(str(tmp_path / "bm25"), show_progress=False)
    loaded = bm25s.BM25.load(str(tmp_path / "bm25"), mmap=True)
    query = bm25s.tokenize(["steering sparse autoencoder features"], stopwords="en",
                           stemmer=Stemmer.Stemmer("english"), show_progress=False, return_ids=False)[0]
    ids = [loaded.vocab_dict[w] for w in query if w in loaded.vocab_dict]
    assert ids and np.array_equal(loaded.get_scores_from_ids(ids), reference.get_scores_from_ids(ids))


@pytest.mark.parametrize("slice_pairs", [1, 37, 4_000_000])
def test_random_token_lists_in_many_slices_give_bm25s_s_matrix(slice_pairs: int) -> None:
    rng = np.random.default_rng(slice_pairs)
    vocab = {f"w{i}": i for i in range(300)}
    # Zipf-like words, lengths from empty to long, so that some words are rare and some papers have no token
    docs = [np.minimum(rng.zipf(1.3, rng.integers(0, 120)), 300) - 1 for _ in range(400)]
    docs = [d.astype(np.int32) for d in docs]
    _assert_same(_ours(docs, vocab), _by_bm25s(docs, vocab))
