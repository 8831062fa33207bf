"""The lexical side of retrieval (BM25, word statistics, the alias table, the papers' records), persisted so that
a process start does not rebuild it from every record of the store.

Saved beside the store (`<storage>/lexicon/<key>/`) or, for a Chroma server, in the user's cache folder
(`$XDG_CACHE_HOME/rag-bot/lexicon/<server+collection>/<key>/`). The key is a hash of the collection's state
(`PaperIndex.state()`: both collections' ids and counts and the generation every writing ingest changes), so a
cache of another state is never used: it is rebuilt from the store and saved again. While an ingest is writing (or
after one was killed) nothing is saved. Files are plain data (numpy arrays without pickles, JSON, bm25s's own
format, the papers' records as zlib streams: rag_bot/retrieval/packed.py); a damaged or partial cache is rebuilt.

At load nothing grows with the collection but memory maps and two small JSON files: a paper's record is decoded
when it is first used (`LazyPapers`), a paper's words when they are asked for (`DocTerms`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rag_bot.retrieval import bm25_build
from rag_bot.retrieval.columns import Columns
from rag_bot.retrieval.names import name_table
from rag_bot.retrieval.packed import RecordReader, RecordWriter
from rag_bot.retrieval.rows import IdTable
from rag_bot.store.caches import cache_root
from rag_bot.store.index import PaperIndex
from rag_bot.text import clean_markup
from rag_bot.types import Paper

log = logging.getLogger(__name__)

FORMAT = 6  # bump when what is saved (or how BM25 tokenises) changes (2: identifiers, 3: filter columns, 4: id table,
# 5: records compressed, rag_bot/retrieval/packed.py; 6: titles' names in the name table, rag_bot/retrieval/names.py)
_V = TypeVar("_V")
_FIELDS = ("title", "text", "source", "aliases", "links", "authors", "venue", "year", "url", "identifiers")


class _ByRow(Mapping[str, _V]):
    """A mapping keyed by doc_id over rows stored in arrays (row n = ids[n])."""

    def __init__(self, ids: Sequence[str], rows: Mapping[str, int]) -> None:
        self._rows = rows
        self._ids = ids

    def __getitem__(self, doc_id: str) -> _V:
        raise NotImplementedError

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


class LazyPapers(_ByRow[Paper]):
    """doc_id -> Paper, decoding a record (a compressed JSON line in one memory-mapped blob) when it is first asked
    for."""

    def __init__(self, ids: Sequence[str], blob: Any, offsets: np.ndarray, rows: Mapping[str, int],
                 unpack: RecordReader) -> None:
        super().__init__(ids, rows)
        self._blob = blob
        self._offsets = offsets
        self._unpack = unpack
        self._made: dict[str, Paper] = {}

    def __getitem__(self, doc_id: str) -> Paper:
        paper = self._made.get(doc_id)
        if paper is None:
            row = self._rows[doc_id]
            record = json.loads(self._unpack(bytes(self._blob[int(self._offsets[row]):int(self._offsets[row + 1])])))
            paper = self._made[doc_id] = Paper(doc_id=doc_id, **dict(zip(_FIELDS, record)))
        return paper


class DocTerms(_ByRow[set[str]]):
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
    columns: Columns | None = None  # the papers' filterable fields (rag_bot/retrieval/columns.py)


def state_key(state: dict[str, Any]) -> str:
    """The cache key of a collection state."""
    payload = json.dumps(state | {"format": FORMAT}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def cached(index: PaperIndex) -> Lexicon | None:
    """The lexicon of the collection's current state when its cache is saved, else None (nothing is built)."""
    state = index.state()
    folder = cache_root(index) / state_key(state)
    if not state["papers"] or not (folder / "done").exists():
        return None
    try:
        return _load(folder, state)
    except Exception:  # a damaged or partial cache: the caller reads the store
        return None


def load_or_build(index: PaperIndex, stemmer: Any) -> Lexicon:
    """The collection's lexicon: from the cache of its current state, else built from the store (and saved)."""
    state = index.state()
    if not state["papers"]:
        return Lexicon(chunks=state["chunks"])
    folder = cache_root(index) / state_key(state)
    if (folder / "done").exists():
        try:
            lexicon = _load(folder, state)
            log.info("lexicon of %d papers loaded from %s", len(lexicon.ids), folder)
            return lexicon
        except Exception:  # a damaged or partial cache: rebuilt below
            log.warning("the lexical cache %s could not be read; rebuilding it", folder, exc_info=True)
    # While an ingest is writing (or after one was killed) the state is not final: built aside, never kept.
    final = not str(state.get("generation") or "").startswith("writing-")
    try:
        if not final:
            raise OSError("the collection is being written")
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        tmp.chmod(0o755)  # mkdtemp's folder is the owner's alone; a saved cache is readable like the store beside it
    except OSError as exc:  # a read-only store still serves, rebuilding at each start
        if final:
            log.warning("could not save the lexical cache in %s: %s", folder, exc)
        final, tmp = False, Path(tempfile.mkdtemp(prefix="rag-bot-lexicon-"))
    try:
        lexicon = _load(tmp, state, papers=_build(index, stemmer, state, tmp))
        if final:
            _keep(tmp, folder)
    finally:
        if not final or tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)  # what is loaded stays readable: its files are mapped or read
    lexicon.origin = "built"
    return lexicon


# Papers tokenised at a time: the build's memory is this page's text plus arrays of term ids (4 bytes a word), not
# every paper's text and Python token lists at once (the whole-list build took 1.96 GB at 100,000 papers).
PAGE = 20_000


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


_EMPTY = np.zeros(0, dtype=np.int32)


def _build(index: PaperIndex, stemmer: Any, state: dict[str, Any], folder: Path) -> int:
    """Write the lexicon of every stored paper into `folder`, reading and tokenising `PAGE` papers at a time
    (a malformed record is skipped with a warning, as every reader skips it); returns the papers written."""
    import bm25s

    started = time.perf_counter()
    ids: list[str] = []
    vocab: dict[str, int] = {}
    pages = _Pages()
    names: dict[str, list[tuple[str, str]]] = {}
    with open(folder / "records.bin", "wb") as blob:
        records = RecordWriter(blob)

        def flush(page: list[Paper]) -> None:
            corpus = [f"{p.title} {' '.join(p.aliases)} {clean_markup(p.text)}" for p in page]
            got = bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False)
            remap = np.zeros(len(got.vocab), dtype=np.int32)
            for word, i in got.vocab.items():
                remap[i] = vocab.setdefault(word, len(vocab))
            pages.add([remap[np.asarray(row, dtype=np.int64)] for row in got.ids])

        def stream() -> Iterator[Paper]:
            page: list[Paper] = []
            for paper in index.iter_papers():
                ids.append(paper.doc_id)
                records.add(json.dumps([getattr(paper, name) for name in _FIELDS], ensure_ascii=False).encode())
                for key, entries in name_table([paper]).items():  # the names only, not the paper's text
                    names.setdefault(key, []).extend(entries)
                page.append(paper)
                if len(page) == PAGE:
                    flush(page)
                    page = []
                yield paper
            if page:
                flush(page)

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
    IdTable.build(ids).save(folder)
    (folder / "meta.json").write_text(json.dumps({"papers": len(ids), "names": names,
                                                  "chunks": state["chunks"], "format": FORMAT}, ensure_ascii=False),
                                      encoding="utf-8")
    (folder / "done").write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
    log.info("lexicon of %d papers built in %.1f s", len(ids), time.perf_counter() - started)
    return len(ids)


def _keep(tmp: Path, folder: Path) -> None:
    """Rename a built cache into place (readers never see half of one); other states' caches of the collection
    are removed."""
    try:
        tmp.rename(folder)
    except OSError:  # another process saved the same state first
        return
    for other in folder.parent.iterdir():
        if other != folder and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
    log.info("lexicon saved in %s", folder)


def _load(folder: Path, state: dict[str, Any], papers: int | None = None) -> Lexicon:
    """The lexicon saved in `folder`, memory-mapped; `papers` is how many it holds (the collection's count when
    not given: a cache that misses some, a malformed record's, is rebuilt)."""
    import bm25s

    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError("another cache format")
    ids = IdTable.load(folder)
    vocab: list[str] = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    bm25 = bm25s.BM25.load(str(folder / "bm25"), mmap=True, show_progress=False)
    indptr = np.load(folder / "indptr.npy", mmap_mode="r")
    indices = np.load(folder / "indices.npy", mmap_mode="r")
    offsets = np.load(folder / "offsets.npy", mmap_mode="r")
    if len(ids) != (state["papers"] if papers is None else papers) or len(indptr) != len(ids) + 1 or len(offsets) != len(ids) + 1:
        raise ValueError("the cache does not match the collection")
    blob = np.memmap(folder / "records.bin", dtype=np.uint8, mode="r") if offsets[-1] else b""
    term_ids = {w: i for i, w in enumerate(vocab)}
    counts = np.load(folder / "counts.npy", mmap_mode="r")
    names = {k: [(a, d) for a, d in v] for k, v in meta["names"].items()}
    rows = ids.rows
    return Lexicon(
        ids=ids, papers=LazyPapers(ids, blob, offsets, rows, RecordReader((folder / "records.dict").read_bytes())),
        names=names, bm25=bm25,
        doc_terms=DocTerms(ids, vocab, indptr, indices, rows), df=DocFreq(term_ids, counts), chunks=state["chunks"],
        origin="cache", rows=rows, columns=Columns.load(folder),
    )
