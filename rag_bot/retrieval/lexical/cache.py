"""`LexicalCache`, the lexical cache's one public face: the collection's lexicon read from the cache of its current
state, or built from the store and saved (rag_bot/store/caches.py: its key, folder, format and atomic save).

At load nothing grows with the collection but memory maps and two small JSON files: a paper's record is decoded
when it is first used (`PaperRecords`), a paper's words when they are asked for (`DocTerms`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rag_bot.retrieval.lexical import build
from rag_bot.retrieval.lexical.columns import Columns
from rag_bot.retrieval.lexical.papers import PaperRecords, RecordReader
from rag_bot.retrieval.lexical.rows import ByRow, IdTable
from rag_bot.retrieval.spelling import Spelling
from rag_bot.store.base import StoreState
from rag_bot.store.caches import DerivedCache
from rag_bot.store.index import PaperIndex
from rag_bot.types import Paper

log = logging.getLogger(__name__)

# Bump the format when what is saved (or how BM25 tokenises) changes (2: identifiers, 3: filter columns, 4: id table,
# 5: records compressed, papers.py; 6: titles' names in the name table, rag_bot/retrieval/names.py; 7: the words as
# written, rag_bot/retrieval/spelling.py).
LEXICAL = DerivedCache("lexicon", format=7)
# np.load reads each array's header with ast.literal_eval. On Python 3.11.7 and older, AST construction in two
# threads at once can fail ("SystemError: AST constructor recursion depth mismatch", CPython gh-106905, fixed in
# 3.11.8): questions asked while an ingest reloads the lexicon load or build it together, so they take turns.
_READING = threading.RLock()


class DocTerms(ByRow[set[str]]):
    """doc_id -> its stemmed words, from a compressed sparse row matrix of term ids."""

    def __init__(self, ids: Sequence[str], vocab: list[str], indptr: np.ndarray, indices: np.ndarray,
                 rows: Mapping[str, int]) -> None:
        super().__init__(ids, rows)
        self._vocab = vocab
        self._indptr = indptr
        self._indices = indices

    def __getitem__(self, doc_id: str) -> set[str]:
        row = self._rows[doc_id]
        vocab = self._vocab
        return {vocab[t] for t in self._indices[self._indptr[row]:self._indptr[row + 1]].tolist()}


class DocFreq(Mapping[str, int]):
    """stemmed word -> papers holding it."""

    def __init__(self, term_ids: dict[str, int], counts: np.ndarray) -> None:
        self._ids = term_ids
        self._counts = counts

    def __getitem__(self, term: str) -> int:
        return int(self._counts[self._ids[term]])

    def __contains__(self, term: object) -> bool:
        return term in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


@dataclass
class Lexicon:
    """What retrieval's snapshot holds of the collection, as loaded or built."""

    ids: Sequence[str] = field(default_factory=list)
    papers: Mapping[str, Paper] = field(default_factory=dict)
    names: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # names.NameIndex.by_key
    bm25: Any = None
    doc_terms: Mapping[str, set[str]] = field(default_factory=dict)
    df: Mapping[str, int] = field(default_factory=dict)
    chunks: int = 0
    origin: str = "empty"  # cache | built | empty
    rows: Mapping[str, int] = field(default_factory=dict)  # doc_id -> row of every array
    columns: Columns | None = None  # the papers' filterable fields (columns.py)
    spelling: Spelling | None = None  # the words as the papers write them (rag_bot/retrieval/spelling.py)


class LexicalCache:
    """The lexicon of a `PaperIndex`'s collection, saved per collection state."""

    def __init__(self, index: PaperIndex, page: int = build.PAGE) -> None:
        self.index = index
        self.page = page  # papers tokenised at a time by a build

    def folder(self, state: StoreState) -> Path:
        """Where the lexicon of a collection state is saved."""
        return LEXICAL.folder(self.index, state)

    def cached(self) -> Lexicon | None:
        """The lexicon of the collection's current state when its cache is saved, else None (nothing is built)."""
        state = self.index.state()
        folder = self.folder(state)
        if not state["papers"] or not LEXICAL.saved(folder):
            return None
        try:
            return self.read(folder, state)
        except Exception:  # a damaged or partial cache: the caller reads the store
            return None

    def load_or_build(self, stemmer: Any) -> Lexicon:
        """The collection's lexicon: from the cache of its current state, else built from the store (and saved).
        One thread loads or builds at a time."""
        with _READING:
            return self._load_or_build(stemmer)

    def _load_or_build(self, stemmer: object) -> Lexicon:
        state = self.index.state()
        if not state["papers"]:
            return Lexicon(chunks=state["chunks"])
        folder = self.folder(state)
        if LEXICAL.saved(folder):
            try:
                lexicon = self.read(folder, state)
                log.info("lexicon of %d papers loaded from %s", len(lexicon.ids), folder)
                return lexicon
            except Exception:  # a damaged or partial cache: rebuilt below, and replaced
                log.warning("the lexical cache %s could not be read; rebuilding it", folder, exc_info=True)
        # While an ingest is writing (or after one was killed) the state is not final: built aside, never kept.
        final = not str(state.get("generation") or "").startswith("writing-")
        with LEXICAL.stage(folder, keep=final) as tmp:
            lexicon = self.read(tmp, state, papers=self.write(tmp, stemmer, state))
        lexicon.origin = "built"
        return lexicon

    def write(self, folder: Path, stemmer: Any, state: StoreState) -> int:
        """Build the lexicon of every stored paper into `folder`; the papers written."""
        return build.write(self.index, stemmer, state, folder, LEXICAL.format, self.page)

    @staticmethod
    def read(folder: Path, state: StoreState, papers: int | None = None) -> Lexicon:
        """The lexicon saved in `folder`, memory-mapped; `papers` is how many it holds (the collection's count when
        not given: a cache that misses some, a malformed record's, is rebuilt). One thread reads at a time."""
        with _READING:
            return LexicalCache._read(folder, state, papers)

    @staticmethod
    def _read(folder: Path, state: StoreState, papers: int | None) -> Lexicon:
        import bm25s

        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != LEXICAL.format:
            raise ValueError("another cache format")
        ids = IdTable.load(folder)
        vocab: list[str] = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        bm25 = bm25s.BM25.load(str(folder / "bm25"), mmap=True, show_progress=False)
        indptr = np.load(folder / "indptr.npy", mmap_mode="r")
        indices = np.load(folder / "indices.npy", mmap_mode="r")
        offsets = np.load(folder / "offsets.npy", mmap_mode="r")
        expected = state["papers"] if papers is None else papers
        if len(ids) != expected or len(indptr) != len(ids) + 1 or len(offsets) != len(ids) + 1:
            raise ValueError("the cache does not match the collection")
        blob = np.memmap(folder / "records.bin", dtype=np.uint8, mode="r") if offsets[-1] else b""
        term_ids = {w: i for i, w in enumerate(vocab)}
        counts = np.load(folder / "counts.npy", mmap_mode="r")
        names = {k: [(a, d) for a, d in v] for k, v in meta["names"].items()}
        rows = ids.rows
        records = RecordReader((folder / "records.dict").read_bytes())
        return Lexicon(
            ids=ids, papers=PaperRecords(ids, blob, offsets, rows, records), names=names, bm25=bm25,
            doc_terms=DocTerms(ids, vocab, indptr, indices, rows), df=DocFreq(term_ids, counts),
            chunks=state["chunks"], origin="cache", rows=rows, columns=Columns.load(folder),
            spelling=Spelling.load(folder),
        )
