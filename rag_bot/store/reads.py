"""The store's read path: papers back from their records, the collection's health (for `rag-bot doctor`), orphan
chunks found and removed, fingerprints and identity keys for an ingest, paper vectors for answers and the map."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rag_bot.errors import StoreError
from rag_bot.reading import identity
from rag_bot.store.base import EMBEDDER, EMBEDDER_FOLDER, EMBEDDER_WEIGHTS, READ_BATCH, TOTALS, ChromaStore
from rag_bot.store.records import chunk_id_parts, joined, paper_from_record
from rag_bot.types import Paper

if TYPE_CHECKING:
    from chromadb.api.types import GetResult

log = logging.getLogger(__name__)


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
    model_mismatch: str = ""  # why the settings' model must not embed for the collection (base.embedder_mismatch)
    model_folder: str = ""  # the model folder the collection records, or why it cannot be verified
    # chunks whose id (`<doc_id>::<n>`) names another paper than their metadata's: one took over another's chunk
    misnamed_chunks: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not (self.orphan_chunks or self.papers_without_chunks or self.stale or self.unreadable
                    or self.wrong_dimension or self.model_mismatch or self.misnamed_chunks)


# The answer-time cache of sentence vectors (rag_bot/store/sentences.py) is the store's third collection,
# `<collection>_sentences`: a rebuild and a prune clear it with the papers.
SENTENCES_SUFFIX = "_sentences"


def _readable_papers(got: GetResult) -> list[Paper]:
    """The papers of one Chroma answer (ids, documents, metadatas); a malformed record is skipped with a warning:
    one must not stop every question."""
    papers: list[Paper] = []
    for doc_id, text, meta in zip(got["ids"], got["documents"] or [], got["metadatas"] or []):
        try:
            papers.append(paper_from_record(doc_id, text, dict(meta or {})))
        except ValueError as exc:
            log.warning("paper %s skipped: %s; run `rag-bot doctor`", doc_id, exc)
    return papers


class PaperReads:
    """What is stored, read back, through a store's connection (base.ChromaStore)."""

    def __init__(self, store: ChromaStore) -> None:
        self.store = store

    def chunk_paper_ids(self, misnamed: list[str] | None = None) -> dict[str, int]:
        """doc_id -> number of stored chunks, read from the chunks' metadata; the ids of chunks whose id names
        another paper are added to `misnamed`."""
        out: dict[str, int] = {}
        total = self.store.chunk_count()
        for offset in range(0, total, READ_BATCH):
            got = self.store.chunks.get(include=["metadatas"], limit=READ_BATCH, offset=offset)
            for chunk_id, meta in zip(got["ids"], got["metadatas"] or []):
                doc_id = str((meta or {}).get("doc_id", ""))
                out[doc_id] = out.get(doc_id, 0) + 1
                if misnamed is not None and chunk_id_parts(chunk_id)[0] != doc_id:
                    misnamed.append(chunk_id)
        return out

    def remove_orphan_chunks(self, paper_ids: set[str] | None = None) -> int:
        """Delete the chunks whose paper record is missing (left by a failed write); returns how many."""
        if paper_ids is None:
            paper_ids = set(self.fingerprints())
        orphans = {d: n for d, n in self.chunk_paper_ids().items() if d not in paper_ids}
        ids = sorted(orphans)
        for start in range(0, len(ids), 500):
            self.store.chunks.delete(where={"doc_id": {"$in": ids[start:start + 500]}})
        if orphans:
            log.warning("removed %d chunks of %d unfinished papers", sum(orphans.values()), len(orphans))
        return sum(orphans.values())

    def clean_orphans_if_counts_disagree(self) -> None:
        """At open, cheaply: each paper record knows its chunk count; only when their sum differs from the
        chunks stored are the chunks read and the orphans removed (best effort: a read-only store still serves,
        and the retriever ignores chunks of unknown papers)."""
        meta = self.store.papers.metadata or {}
        if [meta.get(key) for key in TOTALS] == [self.store.count(), self.store.chunk_count()]:
            return  # as the last finished ingest left it: no orphans (and no scan of every record)
        expected = 0
        for batch in self.store.iter_records(include=["metadatas"]):
            for meta in batch["metadatas"] or []:
                n = (meta or {}).get("chunks")
                if not isinstance(n, int):
                    return  # a store written before the counts were kept: the next ingest cleans it
                expected += n
        if expected == self.store.chunk_count():
            return
        with self.store.writer_lock(wait=False) as alone:
            if not alone:  # an ingest is writing: its chunks are not orphans yet
                return
            try:
                self.remove_orphan_chunks()
            except StoreError as exc:
                log.warning("%s", exc)
                self.store.reopen()

    def health(self) -> Health:
        """Counts and inconsistencies of the store (for `rag-bot doctor`): one pass over the papers' metadata (in
        batches: each is read as a question reads it) and the chunks', and one vector of each collection."""
        fingerprints: dict[str, str] = {}
        unreadable: dict[str, str] = {}
        for batch in self.store.iter_records(include=["metadatas"]):
            for doc_id, meta in zip(batch["ids"], batch["metadatas"] or []):
                meta = dict(meta or {})
                fingerprints[doc_id] = str(meta.get("fingerprint", ""))
                try:
                    paper_from_record(doc_id, "", meta)
                except ValueError as exc:
                    unreadable[doc_id] = str(exc)
        misnamed: list[str] = []
        per_paper = self.chunk_paper_ids(misnamed)
        # Chroma fixes a collection's dimension at its first write and refuses any other afterwards, so one vector
        # tells the dimension of all (a sample of one is exact); a few ids show the user which records.
        wrong: dict[str, int] = {}
        samples: dict[str, list[str]] = {}
        mismatch = self.store.embedder_mismatch() or ""
        # Against the model that made the vectors: a change of model is `model_mismatch`, with its own fix.
        version = self.store.stored_index_version()
        for name, collection in (("papers", self.store.papers), ("chunks", self.store.chunks)):
            if mismatch:
                break  # the settings' model is not the collection's: its dimension says nothing of the store
            got = collection.get(include=["embeddings"], limit=5)
            vectors = got["embeddings"]
            if vectors is not None and len(vectors) and len(vectors[0]) != self.store.dimensions():
                wrong[name], samples[name] = len(vectors[0]), list(got["ids"])
        return Health(
            papers=len(fingerprints),
            chunks=sum(per_paper.values()),
            orphan_chunks=sum(n for d, n in per_paper.items() if d not in fingerprints),
            misnamed_chunks=misnamed,
            papers_without_chunks=sorted(d for d in fingerprints if d not in per_paper),
            stale=sum(1 for fp in fingerprints.values() if not fp.endswith(f":{version}")),
            unreadable=unreadable,
            wrong_dimension=wrong,
            sample_ids=samples,
            model_mismatch=mismatch,
            model_folder=self._recorded_folder() if fingerprints else "",
        )

    def _recorded_folder(self) -> str:
        """The model folder the collection records (path and weights), or why it cannot be verified."""
        meta = self.store.model_record()
        if not str(meta.get(EMBEDDER, "")).startswith("local:"):
            return ""
        if not meta.get(EMBEDDER_WEIGHTS):
            return ("recorded by its name only (written before rag-bot recorded a folder's weights), so which folder "
                    "made its vectors cannot be verified; `rag-bot ingest --reembed` re-embeds it and records the folder")
        return f"{meta.get(EMBEDDER_FOLDER)} (weights sha256 {str(meta[EMBEDDER_WEIGHTS])[:12]})"

    def fingerprints(self) -> dict[str, str]:
        """doc_id -> stored fingerprint, for every paper."""
        return self.fingerprints_and_keys()[0]

    def fingerprints_and_keys(self) -> tuple[dict[str, str], dict[str, str]]:
        """doc_id -> stored fingerprint, and identity key -> doc_id (rag_bot/reading/identity.py), for every paper."""
        out: dict[str, str] = {}
        known: dict[str, str] = {}
        for batch in self.store.iter_records(include=["metadatas"]):
            for doc_id, meta in zip(batch["ids"], batch["metadatas"] or []):
                meta = joined(meta or {})
                out[doc_id] = meta.get("fingerprint", "")
                try:
                    ids = json.loads(meta.get("identifiers", "{}"))
                except (TypeError, ValueError):
                    ids = {}
                for key in identity.keys_of(str(meta.get("title", "")), str(meta.get("source", "")), ids):
                    known.setdefault(key, doc_id)
        return out, known

    def all_papers(self) -> list[Paper]:
        """Every stored paper (for name lookup and browsing)."""
        return list(self.iter_papers())

    def iter_papers(self) -> Iterator[Paper]:
        """Every stored paper, read a page at a time (memory stays that of a page)."""
        for batch in self.store.iter_records(include=["documents", "metadatas"]):
            yield from _readable_papers(batch)

    def papers_by_id(self, doc_ids: Sequence[str]) -> list[Paper]:
        """The stored papers of these ids (those that exist and can be read), in one request."""
        if not doc_ids:
            return []
        return _readable_papers(self.store.papers.get(ids=list(dict.fromkeys(doc_ids)), include=["documents", "metadatas"]))

    def paper_vectors(self, doc_ids: Sequence[str]) -> dict[str, list[float]]:
        """Whole-abstract vectors of the given papers."""
        if not doc_ids:
            return {}
        got = self.store.papers.get(ids=list(dict.fromkeys(doc_ids)), include=["embeddings"])
        return {i: list(v) for i, v in zip(got["ids"], got["embeddings"])}  # type: ignore[arg-type]

    def paper_matrix(self) -> tuple[list[str], np.ndarray]:
        """Every paper's id and whole-abstract vector, as float32 rows (read in batches)."""
        ids: list[str] = []
        rows: list[np.ndarray] = []
        for batch in self.store.iter_records(include=["embeddings"]):
            ids.extend(batch["ids"])
            if len(batch["ids"]):
                rows.append(np.asarray(batch["embeddings"], dtype=np.float32))
        return ids, (np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32))
