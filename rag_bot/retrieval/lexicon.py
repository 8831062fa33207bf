"""The lexical side of retrieval (BM25, word statistics, the alias table, the papers' records), persisted so that
a process start does not rebuild it from every record of the store.

Saved beside the store (`<storage>/lexicon/<key>/`) or, for a Chroma server, in the user's cache folder
(`$XDG_CACHE_HOME/rag-bot/lexicon/<server+collection>/<key>/`). The key is a hash of the collection's state
(`PaperIndex.state()`: both collections' ids and counts and the generation every writing ingest changes), so a
cache of another state is never used: it is rebuilt from the store and saved again. While an ingest is writing (or
after one was killed) nothing is saved. Files are plain data (numpy arrays without pickles, JSON, bm25s's own
format); a damaged or partial cache is rebuilt.

At load nothing grows with the collection but memory maps and two small JSON files: a paper's record is decoded
when it is first used (`LazyPapers`), a paper's words when they are asked for (`DocTerms`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rag_bot.retrieval.columns import Columns
from rag_bot.retrieval.rows import IdTable
from rag_bot.store.index import PaperIndex
from rag_bot.text import clean_markup, normalize_name
from rag_bot.types import Paper

log = logging.getLogger(__name__)

FORMAT = 4  # bump when what is saved (or how BM25 tokenises) changes (2: identifiers, 3: filter columns, 4: id table)
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
    """doc_id -> Paper, decoding a record (a JSON line in one memory-mapped blob) when it is first asked for."""

    def __init__(self, ids: Sequence[str], blob: Any, offsets: np.ndarray, rows: Mapping[str, int]) -> None:
        super().__init__(ids, rows)
        self._blob = blob
        self._offsets = offsets
        self._made: dict[str, Paper] = {}

    def __getitem__(self, doc_id: str) -> Paper:
        paper = self._made.get(doc_id)
        if paper is None:
            row = self._rows[doc_id]
            record = json.loads(bytes(self._blob[int(self._offsets[row]):int(self._offsets[row + 1])]))
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
    names: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # NameIndex.by_key
    bm25: Any = None
    doc_terms: Mapping[str, set[str]] = field(default_factory=dict)
    df: Mapping[str, int] = field(default_factory=dict)
    chunks: int = 0
    origin: str = "empty"  # cache | built | empty
    rows: Mapping[str, int] = field(default_factory=dict)  # doc_id -> row of every array
    columns: Columns | None = None  # the papers' filterable fields (rag_bot/retrieval/columns.py)


def cache_root(index: PaperIndex, kind: str = "lexicon") -> Path:
    """The folder of a collection's caches of one kind (`lexicon`, `map`): beside the store, or for a Chroma
    server in the user's cache folder, named by the collection's own id (a server reached at another address, or
    restarted on another port, keeps its caches: at 100,000 papers a rebuild over HTTP took 111 s)."""
    settings = index.settings
    if settings.chroma_url:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag-bot" / kind
        server = hashlib.sha256(f"{index.papers.id}\x1f{settings.collection}".encode()).hexdigest()[:16]
        return base / server
    return Path(settings.storage) / kind / settings.collection


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
    records = _read_records(index)
    lexicon, arrays = _build(records, stemmer, state)
    generation = str(state.get("generation") or "")
    if not generation.startswith("writing-"):  # an ingest is writing (or was killed): its state is not final
        try:
            _save(folder, lexicon, arrays, records)
        except OSError as exc:  # a read-only store still serves, rebuilding at each start
            log.warning("could not save the lexical cache in %s: %s", folder, exc)
    return lexicon


def _read_records(index: PaperIndex) -> list[tuple[str, list[Any]]]:
    """(doc_id, [title, text, ...]) of every paper, as stored (read as every reader reads them, `all_papers`: a
    malformed record is skipped with a warning)."""
    return [(paper.doc_id, [getattr(paper, name) for name in _FIELDS]) for paper in index.all_papers()]


def _build(records: list[tuple[str, list[Any]]], stemmer: Any, state: dict[str, Any]) -> tuple[Lexicon, dict[str, Any]]:
    import bm25s

    started = time.perf_counter()
    ids = [doc_id for doc_id, _ in records]
    corpus = [f"{r[0]} {' '.join(r[3])} {clean_markup(r[1])}" for _, r in records]
    tokens = bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False)
    bm25 = bm25s.BM25()
    bm25.index(tokens, show_progress=False)
    vocab = [""] * len(tokens.vocab)
    for word, i in tokens.vocab.items():
        vocab[i] = word
    rows = [np.unique(np.asarray(row, dtype=np.int32)) for row in tokens.ids]
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int32)
    counts = np.bincount(indices, minlength=len(vocab)).astype(np.int32)
    names = _names(records)
    papers = {doc_id: Paper(doc_id=doc_id, **dict(zip(_FIELDS, r))) for doc_id, r in records}
    row_of = {d: n for n, d in enumerate(ids)}
    lexicon = Lexicon(
        ids=ids, papers=papers, names=names, bm25=bm25, doc_terms=DocTerms(ids, vocab, indptr, indices, row_of),
        df=DocFreq(dict(tokens.vocab), counts), chunks=state["chunks"], origin="built", rows=row_of,
        columns=Columns.build(papers.values()),
    )
    log.info("lexicon of %d papers built in %.1f s", len(ids), time.perf_counter() - started)
    return lexicon, {"indptr": indptr, "indices": indices, "vocab": vocab, "counts": counts}


def alias_table(papers: list[Paper]) -> dict[str, list[tuple[str, str]]]:
    """normalised name -> [(alias, doc_id)]: the names the papers introduce, for lookup (retrieve.NameIndex)."""
    table: dict[str, list[tuple[str, str]]] = {}
    for paper in papers:
        for alias in paper.aliases:
            key = normalize_name(alias)
            if len(key) >= 2:
                table.setdefault(key, []).append((alias, paper.doc_id))
    return table


def _names(records: list[tuple[str, list[Any]]]) -> dict[str, list[tuple[str, str]]]:
    return alias_table([Paper(doc_id=doc_id, title=r[0], text="", source="", aliases=r[3])
                        for doc_id, r in records if r[3]])


def _save(folder: Path, lexicon: Lexicon, arrays: dict[str, Any], records: list[tuple[str, list[Any]]]) -> None:
    """Write the cache to a temporary folder, then rename it into place (readers never see half of one); other
    states' caches of the collection are removed."""
    started = time.perf_counter()
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    lexicon.bm25.save(str(tmp / "bm25"), show_progress=False)
    blobs = [json.dumps(r, ensure_ascii=False).encode() for _, r in records]
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in blobs])
    (tmp / "records.bin").write_bytes(b"".join(blobs))
    np.save(tmp / "offsets.npy", offsets)
    np.save(tmp / "indptr.npy", arrays["indptr"])
    np.save(tmp / "indices.npy", arrays["indices"])
    np.save(tmp / "counts.npy", arrays["counts"])
    if lexicon.columns is not None:
        lexicon.columns.save(tmp)
    (tmp / "vocab.json").write_text(json.dumps(arrays["vocab"], ensure_ascii=False), encoding="utf-8")
    IdTable.build(lexicon.ids).save(tmp)
    (tmp / "meta.json").write_text(json.dumps({"papers": len(lexicon.ids), "names": lexicon.names,
                                               "chunks": lexicon.chunks, "format": FORMAT}, ensure_ascii=False),
                                   encoding="utf-8")
    (tmp / "done").write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
    try:
        tmp.rename(folder)
    except OSError:  # another process saved the same state first
        shutil.rmtree(tmp, ignore_errors=True)
    for other in folder.parent.iterdir():
        if other != folder and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
    log.info("lexicon saved in %s (%.1f s)", folder, time.perf_counter() - started)


def _load(folder: Path, state: dict[str, Any]) -> Lexicon:
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
    if len(ids) != state["papers"] or len(indptr) != len(ids) + 1 or len(offsets) != len(ids) + 1:
        raise ValueError("the cache does not match the collection")
    blob = np.memmap(folder / "records.bin", dtype=np.uint8, mode="r") if offsets[-1] else b""
    term_ids = {w: i for i, w in enumerate(vocab)}
    counts = np.load(folder / "counts.npy", mmap_mode="r")
    names = {k: [(a, d) for a, d in v] for k, v in meta["names"].items()}
    rows = ids.rows
    return Lexicon(
        ids=ids, papers=LazyPapers(ids, blob, offsets, rows), names=names, bm25=bm25,
        doc_terms=DocTerms(ids, vocab, indptr, indices, rows), df=DocFreq(term_ids, counts), chunks=state["chunks"],
        origin="cache", rows=rows, columns=Columns.load(folder),
    )
