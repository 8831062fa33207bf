"""The lexical cache's build: every stored paper read once, a page at a time, into the cache's files (the papers'
records, the word ids of each paper, BM25's matrix, the filter columns, the id table, the name table and the
words as written, for spelling).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rag_bot.retrieval.lexical import bm25_build
from rag_bot.retrieval.lexical.columns import Columns
from rag_bot.retrieval.lexical.papers import RecordWriter
from rag_bot.retrieval.lexical.rows import IdTable
from rag_bot.retrieval.names import name_table
from rag_bot.retrieval.spelling import SpellingCounts
from rag_bot.store.base import StoreState
from rag_bot.store.index import PaperIndex
from rag_bot.text import clean_markup
from rag_bot.types import Paper

log = logging.getLogger(__name__)

# Papers tokenised at a time: the build's memory is this page's text plus arrays of term ids (4 bytes a word), not
# every paper's text and Python token lists at once (the whole-list build took 1.96 GB at 100,000 papers).
PAGE = 20_000
_EMPTY = np.zeros(0, dtype=np.int32)


class _Pages:
    """Per paper: its distinct word ids (sorted) and how often each occurs, in one flat array per page."""

    def __init__(self) -> None:
        self.terms: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []  # distinct words a paper
        self.tokens: list[np.ndarray] = []  # tokens a paper (BM25's document length)

    def add(self, docs: list[np.ndarray]) -> None:
        pairs = [np.unique(d, return_counts=True) for d in docs]
        self.terms.append(np.concatenate([u for u, _ in pairs]).astype(np.int32) if docs else _EMPTY)
        self.counts.append(np.concatenate([c for _, c in pairs]).astype(np.int32) if docs else _EMPTY)
        self.lengths.append(np.asarray([len(u) for u, _ in pairs], dtype=np.int64))
        self.tokens.append(np.asarray([len(d) for d in docs], dtype=np.int64))

    @staticmethod
    def joined(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
        """One array of the pages' parts, each page's freed as it is copied."""
        out = np.empty(sum(len(p) for p in parts), dtype=dtype)
        at = 0
        while parts:
            part = parts.pop(0)
            out[at:at + len(part)] = part
            at += len(part)
        return out


def write(index: PaperIndex, stemmer: Any, state: StoreState, folder: Path, cache_format: int,
          page: int = PAGE) -> int:
    """Write the lexicon of every stored paper into `folder`, reading and tokenising `page` papers at a time
    (a malformed record is skipped with a warning, as every reader skips it); returns the papers written."""
    import bm25s

    started = time.perf_counter()
    ids: list[str] = []
    vocab: dict[str, int] = {}
    pages = _Pages()
    names: dict[str, list[tuple[str, str]]] = {}
    spelling = SpellingCounts()
    with open(folder / "records.bin", "wb") as blob:
        records = RecordWriter(blob)

        def flush(batch: list[Paper]) -> None:
            corpus = [f"{p.title} {' '.join(p.aliases)} {clean_markup(p.text)}" for p in batch]
            spelling.add(corpus)
            got = bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False)
            remap = np.zeros(len(got.vocab), dtype=np.int32)
            for word, i in got.vocab.items():
                remap[i] = vocab.setdefault(word, len(vocab))
            pages.add([remap[np.asarray(row, dtype=np.int64)] for row in got.ids])

        def stream() -> Iterator[Paper]:
            batch: list[Paper] = []
            for paper in index.iter_papers():
                ids.append(paper.doc_id)
                records.add_paper(paper)
                for key, entries in name_table([paper]).items():  # the names only, not the paper's text
                    names.setdefault(key, []).extend(entries)
                batch.append(paper)
                if len(batch) == page:
                    flush(batch)
                    batch = []
                yield paper
            if batch:
                flush(batch)

        columns = Columns.build(stream())
        records.close()
    (folder / "records.dict").write_bytes(records.dictionary)
    lengths = _Pages.joined(pages.lengths, np.int64)
    indices = _Pages.joined(pages.terms, np.int32)
    bm25 = bm25_build.build(indices, _Pages.joined(pages.counts, np.int32), lengths,
                            _Pages.joined(pages.tokens, np.int64), vocab)
    words = [""] * len(bm25.vocab_dict)
    for word, i in bm25.vocab_dict.items():
        words[i] = word
    indptr = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    bm25.save(str(folder / "bm25"), show_progress=False)
    np.save(folder / "offsets.npy", np.asarray(records.offsets, dtype=np.int64))
    np.save(folder / "indptr.npy", indptr)
    np.save(folder / "indices.npy", indices)
    np.save(folder / "counts.npy", np.bincount(indices, minlength=len(words)).astype(np.int32))
    columns.save(folder)
    (folder / "vocab.json").write_text(json.dumps(words, ensure_ascii=False), encoding="utf-8")
    spelling.save(folder)
    IdTable.build(ids).save(folder)
    (folder / "meta.json").write_text(json.dumps({"papers": len(ids), "names": names, "chunks": state["chunks"],
                                                  "format": cache_format}, ensure_ascii=False), encoding="utf-8")
    log.info("lexicon of %d papers built in %.1f s", len(ids), time.perf_counter() - started)
    return len(ids)
