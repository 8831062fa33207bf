"""BM25's score matrix, built from each paper's distinct words and their counts, as `bm25s.BM25.index` builds it
from every paper's token list: the same numbers in the same layout (a words x papers CSC matrix, float32 scores;
tests/retrieval/lexical/test_bm25_build.py compares the two), and the same saved files, which bm25s loads and searches.

bm25s holds every paper's token list, then three arrays of every (paper, word) pair, then sorts them with int64
copies. Here the input is what the lexical cache keeps anyway (the distinct word ids of each paper, `DocTerms`),
with the counts beside it and the papers' lengths. The pairs are scored and put in place a slice at a time (a
counting sort by word, so each word's papers stay in paper order). At a million papers the build's own memory is
2,974 MiB instead of 4,400, and it takes 439 s instead of 461 (bench/perf/lexicon_build.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import bm25s

SLICE = 1_000_000  # (paper, word) pairs scored and placed at a time: about 80 bytes of temporaries a pair


def build(terms: np.ndarray, counts: np.ndarray, lengths: np.ndarray, doc_lengths: np.ndarray,
          vocab: dict[str, int], slice_pairs: int = SLICE) -> bm25s.BM25:
    """A `bm25s.BM25` holding the scores of papers whose distinct word ids are `terms` (each paper's sorted, one
    after another; `lengths` of them a paper) seen `counts` times, in papers `doc_lengths` tokens long. `vocab`
    (word -> id) gets bm25s's empty token, as its own index adds it; `slice_pairs` pairs are scored at a time."""
    import bm25s

    bm25 = bm25s.BM25()
    n_docs, n_vocab = len(lengths), len(vocab)
    # as bm25s: the mean of the lengths (float64), the Lucene idf per word in Python floats, then float32
    avg_doc_len = np.asarray(doc_lengths, dtype=np.int64).mean()
    df = np.bincount(terms, minlength=n_vocab)
    idf_of = {int(d): math.log(1 + (n_docs - d + 0.5) / (d + 0.5)) for d in np.unique(df) if d}
    idf = np.zeros(n_vocab, dtype=bm25.dtype)
    present = df > 0
    idf[present] = [idf_of[int(d)] for d in df[present]]

    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    data = np.empty(len(terms), dtype=bm25.dtype)
    rows = np.empty(len(terms), dtype=bm25.int_dtype)
    heads = indptr[:-1].copy()
    ends = np.cumsum(lengths)
    starts = ends - lengths
    doc = 0
    while doc < n_docs:
        # whole papers, up to slice_pairs pairs (at least one paper)
        last = max(doc + 1, int(np.searchsorted(ends, starts[doc] + slice_pairs, side="right")))
        lo, hi = int(starts[doc]), int(ends[last - 1])
        words = terms[lo:hi]
        papers = np.repeat(np.arange(doc, last, dtype=bm25.int_dtype), lengths[doc:last])
        tf = counts[lo:hi].astype(bm25.dtype)
        # bm25s's expression, term for term: the length norm in float64, the score rounded to float32 once
        norm = bm25.k1 * ((1 - bm25.b) + bm25.b * np.asarray(doc_lengths[doc:last], dtype=np.int64) / avg_doc_len)
        scores = idf[words] * (tf / (np.repeat(norm, lengths[doc:last]) + tf))
        order = np.argsort(words, kind="stable")
        ranked = words[order]
        first = np.searchsorted(ranked, ranked, side="left")
        places = heads[ranked] + (np.arange(len(ranked)) - first)
        data[places] = scores[order]
        rows[places] = papers[order]
        heads += np.bincount(words, minlength=n_vocab)
        doc = last

    bm25.scores = {"data": data, "indices": rows, "indptr": indptr, "num_docs": n_docs}
    bm25.nonoccurrence_array = None
    vocab = dict(vocab)
    if "" not in vocab:
        vocab[""] = max(vocab.values(), default=-1) + 1
    bm25.vocab_dict = vocab
    bm25.unique_token_ids_set = set(vocab.values())
    return bm25
