"""The index: papers chunked with a llama-index node parser, embedded offline, stored in Chroma.

Two collections: `<name>_chunks` (the llama-index `ChromaVectorStore`: one vector per chunk) and
`<name>_papers` (one record per paper: its original text, metadata, a whole-abstract vector, and the
fingerprint that makes ingestion incremental). A paper's record is written after its chunks, so it acts
as the commit marker: an interrupted ingest leaves no paper that looks done but is not.

Faults (a full disk, an I/O error, a damaged `chroma.sqlite3`) reach callers as one-line `StoreError`s naming the
store and the fix; chunks whose paper record is missing (left by a failed write) are removed at the next open or
ingest, so the previous index keeps serving.

A paper's chunks (title + chunk text) are embedded, and its paper vector is either a second pass over its title and
whole abstract (`paper_vector="whole"`, the default: the best dev-set figures) or the normalised mean of its chunk
vectors (`"mean"`: one model pass, about half the ingest time, one dev question lost; docs/benchmarks.md). The papers collection's metadata carries a generation (changed by every ingest
that writes) that keys the lexical cache (rag_bot/lexicon.py).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import chromadb
import httpx
import numpy as np
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, Document, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.vector_stores.chroma import ChromaVectorStore
from pydantic import ValidationError

from rag_bot import identity
from rag_bot.embedding import DIMENSIONS, MODEL_NAME, MiniLMEmbedding, embedder_name, make_embedder
from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.text import clean_markup, mask_credentials
from rag_bot.types import Paper

log = logging.getLogger(__name__)

# Papers embedded and written together: their chunk texts are length-sorted across the whole batch (little
# padding) and written in one call per collection; memory stays bounded and an interruption loses one batch.
BATCH_PAPERS = 256
# The papers collection's metadata: a generation that changes with every ingest that writes ("writing-..."
# while it runs), and the paper/chunk totals a finished ingest left (open skips its orphan scan when they hold).
GENERATION = "rag_bot_generation"
EMBEDDER = "rag_bot_embedder"  # the model the collection's vectors were made by
TOTALS = ("rag_bot_papers", "rag_bot_chunks")
_READ_BATCH = 2000
RECOVERY = "run `rag-bot doctor` to check it, or `rag-bot ingest --rebuild` to rebuild it from the sources"
# What a failing store raises (chromadb's own errors, sqlite's, the file system's, and httpx's when a Chroma server
# cannot be reached: chromadb's HTTP client lets httpx.ConnectError and the like through); anything else is a bug.
STORE_FAULTS: tuple[type[BaseException], ...] = (ChromaError, OSError, sqlite3.Error, httpx.HTTPError)
_WRITES = frozenset({"add", "upsert", "update", "delete"})
_DAMAGED = ("malformed", "not a database", "(code: 11)", "(code: 26)", "corrupt")
# A store the user may not write (a read-only folder or file): sqlite's READONLY codes as chromadb's Rust core
# reports them (8, and 1544 for a read-only folder), sqlite's and the OS's own words.
_READ_ONLY = ("readonly database", "(code: 8)", "(code: 1544)", "permission denied", "read-only file system",
              "os error 13", "os error 30")
_PERMISSION_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
# The ingest lock in a store folder (PaperIndex.writer_lock); it stays in place through a rebuild, so that two
# processes never each hold a lock on a different file.
LOCK_FILE = "rag-bot.lock"


@dataclass
class IngestReport:
    """What an ingest changed."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_embedded: int = 0
    merged: int = 0  # papers already stored under another id (same DOI, arXiv id or title): kept once

    def __str__(self) -> str:
        merged = f", {self.merged} merged into papers stored under another id" if self.merged else ""
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.removed} removed{merged} ({self.chunks_embedded} chunks embedded)"
        )


def open_client(settings: Settings) -> Any:
    """A Chroma client: a server at `chroma_url`, else a persistent store in `storage`."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_url:
        url = urlparse(settings.chroma_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise StoreError(
                f"RAG_BOT_CHROMA_URL must look like http://host:port, got {mask_credentials(settings.chroma_url)!r}"
            )
        try:
            return chromadb.HttpClient(
                host=url.hostname,
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings,
            )
        except Exception as exc:  # chromadb raises plain ValueError/ConnectionError here
            log.debug("Chroma server client failed", exc_info=True)
            raise _unreachable(settings, exc) from exc
    try:
        settings.storage.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(settings.storage), settings=chroma_settings)
    except Exception as exc:
        log.debug("persistent Chroma client failed", exc_info=True)
        raise store_error(settings, "open", exc) from exc


def store_label(settings: Settings) -> str:
    """Where the index lives, for people (never with the credentials of a server URL)."""
    if settings.chroma_url:
        return f"Chroma server {mask_credentials(settings.chroma_url)}"
    return f"folder {settings.storage}"


def one_line(exc: BaseException) -> str:
    return mask_credentials(" ".join(str(exc).split())) or type(exc).__name__


def _unreachable(settings: Settings, exc: BaseException, action: str = "open") -> StoreError:
    """A Chroma server that does not answer (down, killed, wrong address): a retry fixes it, a rebuild would not."""
    again = "run the same ingest again (it finishes what is missing)" if action == "write" else "try again"
    return StoreError(
        f"cannot reach the Chroma server at {mask_credentials(settings.chroma_url or '')}: it is unreachable "
        f"({one_line(exc)}); check that it is running (`chroma run`) and that RAG_BOT_CHROMA_URL points to it, "
        f"then {again}"
    )


def not_writable(exc: BaseException) -> bool:
    """Whether a fault says the store may not be written (permissions or a read-only file system)."""
    if isinstance(exc, OSError) and exc.errno in _PERMISSION_ERRNOS:
        return True
    cause = str(exc).lower()
    return any(mark in cause for mark in _READ_ONLY)


def store_error(settings: Settings, action: str, exc: BaseException) -> StoreError:
    """A store fault as the one line a user sees: what failed, where, and what to do."""
    cause = one_line(exc)
    where = store_label(settings)
    if settings.chroma_url and isinstance(exc, httpx.TransportError):
        return _unreachable(settings, exc, action)
    if not settings.chroma_url and not_writable(exc):
        # Rebuilding would fail the same way (and set a healthy store aside): the fix is the permissions.
        return StoreError(
            f"the store in the {where} cannot be written: permission denied ({cause}); give this user write "
            f"access to the folder and its files (e.g. `chmod -R u+w {settings.storage}`, or run rag-bot as their "
            f"owner), then try again; the store needs no rebuild"
        )
    if action == "write" and _disk_full(exc, cause):
        return StoreError(
            f"the store could not be written (disk full?): {cause} [{where}]; the index as it was before this "
            f"ingest is kept; free some space and run the same ingest again to finish it"
        )
    if action == "write":  # another cause: name it, without guessing a full disk
        return StoreError(
            f"the store could not be written: {cause} [{where}]; the index as it was before this ingest is kept; "
            f"run the same ingest again to finish it"
        )
    if any(mark in cause for mark in _DAMAGED):
        return StoreError(f"the store in the {where} is damaged ({cause}); {RECOVERY}")
    verb = "opened" if action == "open" else "read"
    return StoreError(f"the store in the {where} could not be {verb}: {cause}; {RECOVERY}")


def _disk_full(exc: BaseException, cause: str) -> bool:
    # ENOSPC / EDQUOT / EFBIG from the OS; SQLITE_FULL, or the disk I/O error sqlite reports when a write past
    # a full disk (or a file-size limit) fails.
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    return any(mark in cause.lower() for mark in ("no space left", "disk is full", "disk i/o error", "file too large",
                                                   "quota"))


@contextmanager
def folder_lock(storage: Path, wait: bool = True) -> Iterator[bool]:
    """The ingest lock of a store folder (`LOCK_FILE`, across processes): yields whether it is held (False when
    another process holds it and `wait` is False); OSError when the lock file cannot be opened."""
    fd = os.open(storage / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            held = True
        except OSError:
            held = False
        yield held
    finally:
        os.close(fd)


def forget_client(settings: Settings) -> None:
    """Drop chromadb's cached in-process system for this store: after a failed write its sqlite connection can
    hang every later write, and a rebuilt store must not reuse it."""
    from chromadb.api.shared_system_client import SharedSystemClient

    path = str(settings.storage) if not settings.chroma_url else None
    for identifier in list(SharedSystemClient._identifier_to_system):
        if path is None or identifier == path:
            SharedSystemClient._identifier_to_system.pop(identifier, None)
            SharedSystemClient._identifier_to_refcount.pop(identifier, None)


class GuardedCollection:
    """A Chroma collection whose faults arrive as one-line `StoreError`s (the retriever queries it directly)."""

    def __init__(self, collection: Any, index: PaperIndex) -> None:
        self._collection = collection
        self._index = index

    @property
    def name(self) -> str:
        return str(self._collection.name)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._collection, attr)
        if attr.startswith("_") or not callable(value):
            return value
        index = self._index

        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except STORE_FAULTS as exc:
                log.debug("Chroma %s.%s failed", self.name, attr, exc_info=True)
                write = attr in _WRITES
                if write:
                    index.write_failed = True
                raise store_error(index.settings, "write" if write else "read", exc) from exc

        return guarded


@dataclass
class Health:
    """What `rag-bot doctor` found."""

    papers: int = 0
    chunks: int = 0
    orphan_chunks: int = 0  # chunks whose paper record is missing
    papers_without_chunks: list[str] = field(default_factory=list)
    stale: int = 0  # papers indexed with another model or chunking
    unreadable: dict[str, str] = field(default_factory=dict)  # doc_id -> why its metadata cannot be read
    # "papers"/"chunks" -> the dimension its vectors have, when it is not the model's (every question fails)
    wrong_dimension: dict[str, int] = field(default_factory=dict)
    sample_ids: dict[str, list[str]] = field(default_factory=dict)  # a few ids of each collection with them

    @property
    def healthy(self) -> bool:
        return not (self.orphan_chunks or self.papers_without_chunks or self.stale or self.unreadable
                    or self.wrong_dimension)


# The answer-time cache of sentence vectors (rag_bot/sentences.py) is the store's third collection,
# `<collection>_sentences`: a rebuild and a prune clear it with the papers.
SENTENCES_SUFFIX = "_sentences"


def _paper_metadata(paper: Paper, fingerprint: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "title": paper.title,
        "source": paper.source,
        "fingerprint": fingerprint,
        "aliases": json.dumps(paper.aliases),
        "links": json.dumps(paper.links),
        "authors": json.dumps(paper.authors),
    }
    if paper.identifiers:
        meta["identifiers"] = json.dumps(paper.identifiers, sort_keys=True)
    for key in ("venue", "year", "url"):
        value = getattr(paper, key)
        if value is not None:
            meta[key] = value
    return meta


def paper_from_record(doc_id: str, text: str, meta: dict[str, Any]) -> Paper:
    """A `Paper` back from its Chroma record; a one-line ValueError naming the field when its metadata cannot be
    read (the import checks every paper with this very function, so what it lets in can be read back)."""
    lists: dict[str, Any] = {}
    for key in ("aliases", "links", "authors", "identifiers"):  # JSON text (Chroma metadata values are scalars)
        try:
            lists[key] = json.loads(meta.get(key, "{}" if key == "identifiers" else "[]"))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"its {key!r} metadata is not valid JSON ({exc})") from None
    try:
        return Paper(doc_id=doc_id, title=meta.get("title", doc_id), text=text, source=meta.get("source", ""),
                     venue=meta.get("venue"), year=meta.get("year"), url=meta.get("url"), **lists)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"its {where!r} metadata is not usable ({first['msg']})") from None


class PaperIndex:
    """The Chroma-backed index of papers and their chunks."""

    def __init__(self, settings: Settings, embedder: MiniLMEmbedding | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        self.write_failed = False
        self._splitter: SentenceSplitter | None = None
        # Part of every paper's fingerprint: a change of model or chunking re-indexes everything.
        self.index_version = f"{embedder_name(settings)}/{settings.max_tokens}/{settings.chunk_size}/" \
            f"{settings.chunk_overlap}/v2" \
            + ("-mean" if settings.paper_vector == "mean" else "")
        self._open()
        try:
            self.count()
            self._clean_orphans_if_counts_disagree()
        except StoreError:
            raise
        except Exception as exc:  # a damaged store can fail in odd ways while first read
            log.debug("first read of the store failed", exc_info=True)
            raise store_error(settings, "open", exc) from exc

    def _open(self) -> None:
        self.client = open_client(self.settings)
        try:
            space = {"hnsw:space": "cosine"}
            papers = self.client.get_or_create_collection(
                f"{self.settings.collection}_papers", metadata=space, embedding_function=None
            )
            chunks = self.client.get_or_create_collection(
                f"{self.settings.collection}_chunks", metadata=space, embedding_function=None
            )
        except Exception as exc:
            log.debug("opening the collections failed", exc_info=True)
            raise store_error(self.settings, "open", exc) from exc
        self.papers = GuardedCollection(papers, self)
        self.chunks = GuardedCollection(chunks, self)
        self.vector_store = ChromaVectorStore(chroma_collection=self.chunks)
        self.write_failed = False

    def reopen(self) -> None:
        """A fresh connection to the store (after a failed write, chromadb's old one can hang)."""
        forget_client(self.settings)
        self._open()

    @property
    def splitter(self) -> SentenceSplitter:
        """The chunker, made on first use (it loads a tokenizer: a question never needs it)."""
        if self._splitter is None:
            self._splitter = SentenceSplitter(
                chunk_size=self.settings.chunk_size, chunk_overlap=self.settings.chunk_overlap
            )
        return self._splitter

    @property
    def embedder(self) -> MiniLMEmbedding:
        """The embedding model, loaded on first use (opening the store for stats needs none)."""
        if self._embedder is None:
            self.check_embedder()
            self._embedder = make_embedder(self.settings)
        return self._embedder

    def dimensions(self) -> int:
        """The size of the vectors the chosen model makes (the shipped model's without loading it)."""
        return DIMENSIONS if embedder_name(self.settings) == MODEL_NAME else int(self.embedder.dimensions)

    def stored_embedder(self) -> str | None:
        """The model the collection's vectors were made by (recorded by every finished write; a store from before
        the record holds the shipped model's), None when it is empty."""
        if self.count() == 0:
            return None
        try:
            meta = self.client.get_collection(self.papers.name).metadata or {}
        except Exception as exc:
            raise store_error(self.settings, "read", exc) from exc
        return str(meta.get(EMBEDDER) or MODEL_NAME)

    def check_embedder(self) -> None:
        """Refuse to embed with another model than the collection's: its vectors and a question's (or new
        papers') would not be comparable."""
        stored, chosen = self.stored_embedder(), embedder_name(self.settings)
        if stored is not None and stored != chosen:
            raise StoreError(
                f"the collection {self.settings.collection!r} was embedded with {stored}, but the settings choose "
                f"{chosen}: move it to the new model with `rag-bot ingest --reembed`, set the embedding settings "
                f"back (RAG_BOT_EMBED_URL, RAG_BOT_EMBED_MODEL, RAG_BOT_EMBED_PATH), or index into a new collection "
                f"(RAG_BOT_COLLECTION=...)")

    def count(self) -> int:
        """Papers in the index."""
        return int(self.papers.count())

    def chunk_count(self) -> int:
        """Chunks in the index."""
        return int(self.chunks.count())

    def state(self) -> dict[str, Any]:
        """What identifies the collection's content, cheaply (no record is read): both collections' ids and
        counts and the generation of the last ingest that wrote. Keys the lexical cache (rag_bot/lexicon.py)."""
        try:
            meta = self.client.get_collection(self.papers.name).metadata or {}
        except Exception as exc:
            log.debug("reading the collection metadata failed", exc_info=True)
            raise store_error(self.settings, "read", exc) from exc
        return {
            "papers_id": str(self.papers.id), "chunks_id": str(self.chunks.id),
            "papers": self.count(), "chunks": self.chunk_count(), "generation": meta.get(GENERATION),
        }

    def record_write(self) -> None:
        """Mark the collection as changed by a finished write (an import): lexical caches keyed by it rebuild."""
        self._mark(uuid.uuid4().hex, totals=True)

    def _mark(self, generation: str, totals: bool = False) -> None:
        """Record a new generation in the papers collection's metadata (with the totals when finished) and the
        model that writes; a write by another model than the collection's is refused first."""
        self.check_embedder()
        meta: dict[str, Any] = {GENERATION: generation, EMBEDDER: embedder_name(self.settings)}
        if totals:
            meta |= dict(zip(TOTALS, (self.count(), self.chunk_count())))
        self.papers.modify(metadata=meta)

    def chunk_paper_ids(self) -> dict[str, int]:
        """doc_id -> number of stored chunks, read from the chunks' metadata."""
        out: dict[str, int] = {}
        total = self.chunk_count()
        for offset in range(0, total, _READ_BATCH):
            got = self.chunks.get(include=["metadatas"], limit=_READ_BATCH, offset=offset)
            for meta in got["metadatas"] or []:
                doc_id = str((meta or {}).get("doc_id", ""))
                out[doc_id] = out.get(doc_id, 0) + 1
        return out

    def remove_orphan_chunks(self, paper_ids: set[str] | None = None) -> int:
        """Delete the chunks whose paper record is missing (left by a failed write); returns how many."""
        if paper_ids is None:
            paper_ids = set(self.fingerprints())
        orphans = {d: n for d, n in self.chunk_paper_ids().items() if d not in paper_ids}
        ids = sorted(orphans)
        for start in range(0, len(ids), 500):
            self.chunks.delete(where={"doc_id": {"$in": ids[start:start + 500]}})
        if orphans:
            log.warning("removed %d chunks of %d unfinished papers", sum(orphans.values()), len(orphans))
        return sum(orphans.values())

    def _clean_orphans_if_counts_disagree(self) -> None:
        """At open, cheaply: each paper record knows its chunk count; only when their sum differs from the
        chunks stored are the chunks read and the orphans removed (best effort: a read-only store still serves,
        and the retriever ignores chunks of unknown papers)."""
        meta = self.papers.metadata or {}
        if [meta.get(key) for key in TOTALS] == [self.count(), self.chunk_count()]:
            return  # as the last finished ingest left it: no orphans (and no scan of every record)
        expected = 0
        for batch in self._iter_records(include=["metadatas"]):
            for meta in batch["metadatas"] or []:
                n = (meta or {}).get("chunks")
                if not isinstance(n, int):
                    return  # a store written before the counts were kept: the next ingest cleans it
                expected += n
        if expected == self.chunk_count():
            return
        with self.writer_lock(wait=False) as alone:
            if not alone:  # an ingest is writing: its chunks are not orphans yet
                return
            try:
                self.remove_orphan_chunks()
            except StoreError as exc:
                log.warning("%s", exc)
                self.reopen()

    @contextmanager
    def writer_lock(self, wait: bool = True) -> Iterator[bool]:
        """Ingests of one store folder take turns (across processes), so orphan cleaning never removes the
        chunks of another ingest's unfinished batch; yields whether the lock is held (a read-only store, or a
        server, gets none and yields True for a server)."""
        if self.settings.chroma_url:
            yield True
            return
        with ExitStack() as stack:
            try:
                held = stack.enter_context(folder_lock(Path(self.settings.storage), wait))
            except OSError:  # the lock file cannot be made: a read-only store
                held = False
            yield held

    def health(self) -> Health:
        """Counts and inconsistencies of the store (for `rag-bot doctor`): one pass over the papers' metadata (in
        batches: each is read as a question reads it) and the chunks', and one vector of each collection."""
        fingerprints: dict[str, str] = {}
        unreadable: dict[str, str] = {}
        for batch in self._iter_records(include=["metadatas"]):
            for doc_id, meta in zip(batch["ids"], batch["metadatas"] or []):
                meta = dict(meta or {})
                fingerprints[doc_id] = str(meta.get("fingerprint", ""))
                try:
                    paper_from_record(doc_id, "", meta)
                except ValueError as exc:
                    unreadable[doc_id] = str(exc)
        per_paper = self.chunk_paper_ids()
        # Chroma fixes a collection's dimension at its first write and refuses any other afterwards, so one vector
        # tells the dimension of all (a sample of one is exact); a few ids show the user which records.
        wrong: dict[str, int] = {}
        samples: dict[str, list[str]] = {}
        for name, collection in (("papers", self.papers), ("chunks", self.chunks)):
            got = collection.get(include=["embeddings"], limit=5)
            vectors = got["embeddings"]
            if vectors is not None and len(vectors) and len(vectors[0]) != self.dimensions():
                wrong[name], samples[name] = len(vectors[0]), list(got["ids"])
        return Health(
            papers=len(fingerprints),
            chunks=sum(per_paper.values()),
            orphan_chunks=sum(n for d, n in per_paper.items() if d not in fingerprints),
            papers_without_chunks=sorted(d for d in fingerprints if d not in per_paper),
            stale=sum(1 for fp in fingerprints.values() if not fp.endswith(f":{self.index_version}")),
            unreadable=unreadable,
            wrong_dimension=wrong,
            sample_ids=samples,
        )

    def fingerprints(self) -> dict[str, str]:
        """doc_id -> stored fingerprint, for every paper."""
        return self._stored()[0]

    def _stored(self) -> tuple[dict[str, str], dict[str, str]]:
        """doc_id -> stored fingerprint, and identity key -> doc_id (rag_bot/identity.py), for every paper."""
        out: dict[str, str] = {}
        known: dict[str, str] = {}
        for batch in self._iter_records(include=["metadatas"]):
            for doc_id, meta in zip(batch["ids"], batch["metadatas"] or []):
                meta = meta or {}
                out[doc_id] = meta.get("fingerprint", "")
                try:
                    ids = json.loads(meta.get("identifiers", "{}"))
                except (TypeError, ValueError):
                    ids = {}
                for key in identity.keys_of(str(meta.get("title", "")), str(meta.get("source", "")), ids):
                    known.setdefault(key, doc_id)
        return out, known

    def _merge_into(self, twin: str, paper: Paper, todo: list[tuple[Paper, str]], start_writing: Callable[[], None],
                    ) -> None:
        """`paper` kept as the stored (or just read) `twin` with what it adds (identity.merge): its metadata only,
        so nothing is embedded again."""
        for n, (kept, fingerprint) in enumerate(todo):
            if kept.doc_id == twin:
                todo[n] = (identity.merge(kept, paper), fingerprint)
                return
        got = self.papers.get(ids=[twin], include=["documents", "metadatas"])
        if not got["ids"]:
            return
        meta = dict((got["metadatas"] or [{}])[0] or {})
        kept = paper_from_record(twin, (got["documents"] or [""])[0], meta)
        merged = identity.merge(kept, paper)
        if merged != kept:
            start_writing()
            self.papers.update(ids=[twin], metadatas=[
                _paper_metadata(merged, str(meta.get("fingerprint", ""))) | {"chunks": meta.get("chunks", 0)}])

    def _iter_records(self, include: list[str]) -> Iterator[dict[str, Any]]:
        total = self.count()
        for offset in range(0, total, _READ_BATCH):
            yield self.papers.get(include=include, limit=_READ_BATCH, offset=offset)  # type: ignore[arg-type]

    def all_papers(self) -> list[Paper]:
        """Every stored paper (for BM25, name lookup and browsing)."""
        papers: list[Paper] = []
        for batch in self._iter_records(include=["documents", "metadatas"]):
            for doc_id, text, meta in zip(batch["ids"], batch["documents"] or [], batch["metadatas"] or []):
                try:
                    papers.append(paper_from_record(doc_id, text or "", dict(meta or {})))
                except ValueError as exc:  # one malformed record must not stop every question
                    log.warning("paper %s skipped: %s; run `rag-bot doctor`", doc_id, exc)
        return papers

    def paper_vectors(self, doc_ids: Sequence[str]) -> dict[str, list[float]]:
        """Whole-abstract vectors of the given papers."""
        if not doc_ids:
            return {}
        got = self.papers.get(ids=list(dict.fromkeys(doc_ids)), include=["embeddings"])
        return {i: list(v) for i, v in zip(got["ids"], got["embeddings"])}  # type: ignore[arg-type]

    def paper_matrix(self) -> tuple[list[str], np.ndarray]:
        """Every paper's id and whole-abstract vector, as float32 rows (read in batches)."""
        ids: list[str] = []
        rows: list[np.ndarray] = []
        for batch in self._iter_records(include=["embeddings"]):
            ids.extend(batch["ids"])
            if len(batch["ids"]):
                rows.append(np.asarray(batch["embeddings"], dtype=np.float32))
        return ids, (np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32))

    def chunk_nodes(self, paper: Paper) -> list[TextNode]:
        """The paper's chunks, with deterministic ids `<doc_id>::<n>`."""
        document = Document(text=clean_markup(paper.text), id_=paper.doc_id)
        nodes = self.splitter.get_nodes_from_documents([document])
        out = []
        for n, node in enumerate(nodes):
            out.append(
                TextNode(
                    id_=f"{paper.doc_id}::{n}",
                    text=node.get_content(),
                    metadata={"doc_id": paper.doc_id, "chunk": n, "title": paper.title, "source": paper.source},
                    excluded_embed_metadata_keys=["doc_id", "chunk", "source"],
                    # llama-index writes the source node's id as the chunk's `doc_id` metadata in Chroma;
                    # without it the field becomes "None" and per-paper deletes match nothing.
                    relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=paper.doc_id)},
                )
            )
        return out

    def ingest(
        self,
        papers: Iterable[Paper],
        prune: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> IngestReport:
        """Add new and changed papers (re-embedding only those); with `prune`, drop papers not given.

        `papers` is read once, in order (a `corpus.PaperStream` reads its files as it goes): papers are embedded
        and written `BATCH_PAPERS` at a time, so memory does not grow with the input; only their ids are kept."""
        if self.write_failed:
            self.reopen()
        with self.writer_lock(wait=True):
            try:
                return self._ingest(papers, prune, progress)
            except StoreError:
                if self.write_failed:  # keep serving: a fresh connection, and no half-written paper left visible
                    self.reopen()
                    try:
                        self.remove_orphan_chunks()
                    except StoreError as exc:
                        log.debug("cleaning up after the failed write failed too: %s", exc)
                        self.reopen()
                raise

    def _ingest(
        self,
        papers: Iterable[Paper],
        prune: bool,
        progress: Callable[[int], None] | None,
    ) -> IngestReport:
        report = IngestReport()
        stored, known = self._stored()
        # Chunks of papers that were never committed (a failed or killed ingest; "None": v1 stores, see chunk_nodes).
        removed = self.remove_orphan_chunks(set(stored))
        writing = False

        def start_writing() -> None:
            nonlocal writing
            if not writing:  # a reader's cache of this collection is stale from the first write on
                self._mark(f"writing-{uuid.uuid4().hex}")
                writing = True

        keep: set[str] = set()
        todo: list[tuple[Paper, str]] = []

        def flush() -> None:
            start_writing()
            report.chunks_embedded += self._write_batch(todo)
            if progress:
                progress(len(todo))
            todo.clear()

        for paper in papers:
            if paper.doc_id not in stored and paper.doc_id not in keep:
                names = identity.keys(paper)
                twin = next((known[k] for k in names if known.get(k, paper.doc_id) != paper.doc_id), None)
                if twin is not None:  # the same paper from another source: one record, with the richer metadata
                    keep.add(twin)
                    report.merged += 1
                    self._merge_into(twin, paper, todo, start_writing)
                    if progress:
                        progress(1)
                    continue
                for key in names:
                    known.setdefault(key, paper.doc_id)
            keep.add(paper.doc_id)
            fingerprint = f"{paper.content_hash}:{self.index_version}"
            if stored.get(paper.doc_id) == fingerprint:
                report.unchanged += 1
                if progress:
                    progress(1)
                continue
            todo.append((paper, fingerprint))
            if paper.doc_id in stored:
                report.updated += 1
            else:
                report.added += 1
            if len(todo) == BATCH_PAPERS:
                flush()
        if todo:
            flush()
        gone = [doc_id for doc_id in stored if doc_id not in keep] if prune else []
        if gone or removed:
            start_writing()
        if prune:
            for start in range(0, len(gone), 500):
                ids = gone[start:start + 500]
                self.chunks.delete(where={"doc_id": {"$in": ids}})
                self.papers.delete(ids=ids)
            self._forget_sentences(gone)
            report.removed = len(gone)
        if writing or (self.papers.metadata or {}).get(GENERATION) is None:
            self._mark(uuid.uuid4().hex, totals=True)
        log.info("index: %s", report)
        return report

    def _forget_sentences(self, doc_ids: Sequence[str]) -> None:
        """Drop removed papers' records from the answer-time cache of sentence vectors (`<name>_sentences`,
        rag_bot/sentences.py; one record per paper, its id the doc_id), when there is one. A cache: a fault is
        logged, not raised (a record left behind is never read for a paper that is gone)."""
        if not doc_ids:
            return
        try:
            names = {c if isinstance(c, str) else c.name for c in self.client.list_collections()}
            name = f"{self.settings.collection}{SENTENCES_SUFFIX}"
            if name in names:
                cache = self.client.get_collection(name, embedding_function=None)
                for start in range(0, len(doc_ids), 500):
                    cache.delete(ids=list(doc_ids[start:start + 500]))
        except STORE_FAULTS + (ValueError,) as exc:
            log.warning("could not drop the removed papers' sentence vectors: %s", one_line(exc))

    def _write_batch(self, batch: Sequence[tuple[Paper, str]]) -> int:
        ids = [paper.doc_id for paper, _ in batch]
        # Old or half-written chunks of these papers go first, so a changed abstract leaves none behind.
        self.chunks.delete(where={"doc_id": {"$in": ids}})
        nodes: list[TextNode] = []
        counts: dict[str, int] = {}
        for paper, _ in batch:
            paper_nodes = self.chunk_nodes(paper)
            counts[paper.doc_id] = len(paper_nodes)
            nodes.extend(paper_nodes)
        # The title travels with every chunk (names live there). With paper_vector "mean", one model pass: a paper
        # without chunks (no text) is embedded by its title, the others' paper vector is the mean of their chunk
        # vectors. With "whole" (the default), every paper's title and whole abstract are embedded too.
        chunk_texts = [f"{n.metadata['title']}. {n.get_content()}" for n in nodes]
        whole = self.settings.paper_vector == "whole"
        bare = [paper for paper, _ in batch if whole or not counts[paper.doc_id]]
        vectors = self.embedder.embed(chunk_texts + [
            f"{paper.title}. {clean_markup(paper.text)}" if whole else (paper.title or paper.doc_id) for paper in bare
        ])
        for node, vector in zip(nodes, vectors[: len(nodes)]):
            node.embedding = vector.tolist()
        if nodes:
            self.vector_store.add(list[BaseNode](nodes))
        paper_vectors: list[list[float]] = []
        start, extra = 0, len(nodes)
        for paper, _ in batch:
            n = counts[paper.doc_id]
            if n and not whole:
                mean = vectors[start:start + n].mean(axis=0)
            else:
                mean, extra = vectors[extra], extra + 1
            start += n
            paper_vectors.append((mean / max(float(np.linalg.norm(mean)), 1e-12)).tolist())
        self.papers.upsert(
            ids=ids,
            documents=[paper.text for paper, _ in batch],
            metadatas=[_paper_metadata(paper, fp) | {"chunks": counts[paper.doc_id]} for paper, fp in batch],
            embeddings=paper_vectors,
        )
        return len(nodes)
