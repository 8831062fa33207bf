"""The index: papers chunked with a llama-index node parser, embedded offline, stored in Chroma.

Two collections: `<name>_chunks` (one vector per chunk, split by llama-index's `SentenceSplitter`; a record holds
only its paper's id and its position: the text is the paper's, and a chunk record with its text, llama-index's node
JSON and Chroma's full-text index over it took 60 % of the store's disk) and `<name>_papers` (one record per paper:
its original text and metadata (laid out by rag_bot/store/records.py), a whole-abstract vector, and the fingerprint that makes ingestion incremental). A paper's record is written after its chunks, so it acts
as the commit marker: an interrupted ingest leaves no paper that looks done but is not.

Faults (a full disk, an I/O error, a damaged `chroma.sqlite3`) reach callers as one-line `StoreError`s naming the
store and the fix; chunks whose paper record is missing (left by a failed write) are removed at the next open or
ingest, so the previous index keeps serving.

A paper's chunks (title + chunk text) are embedded, and its paper vector is either a second pass over its title and
whole abstract (`paper_vector="whole"`: about twice the ingest time) or the normalised mean of its chunk vectors
(`"mean"`, the default: one model pass; docs/benchmarks.md). The papers collection's metadata carries a generation (changed by every ingest
that writes) that keys the derived caches (rag_bot/store/caches.py).

`PaperIndex` is made of three parts, each of its own module and each held, not inherited: the connection
(base.ChromaStore), the read path (reads.PaperReads) and the write path (writes.PaperWrites); it hands each call
to the part that does it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import TextNode

from rag_bot.interfaces import Embedder
from rag_bot.settings import Settings
from rag_bot.store.base import ChromaStore, StoreState
from rag_bot.store.chroma import GuardedCollection
from rag_bot.store.embedders import RecordedModel
from rag_bot.store.embedding import MiniLMEmbedding
from rag_bot.store.reads import Health, PaperReads
from rag_bot.store.records import paper_from_record  # where bench/eval/vectors.py imports it from
from rag_bot.store.segments import SavedVectors
from rag_bot.store.writes import BATCH_PAPERS, IngestReport, PaperWrites
from rag_bot.types import Paper

__all__ = ["BATCH_PAPERS", "IngestReport", "PaperIndex", "paper_from_record"]


class PaperIndex:
    """The Chroma-backed index of papers and their chunks: the connection (`store`), the read path (`reads`) and
    the write path (`writes`), each called explicitly."""

    def __init__(self, settings: Settings, embedder: MiniLMEmbedding | None = None) -> None:
        self.store = ChromaStore(settings, embedder)
        self.reads = PaperReads(self.store)
        self.writes = PaperWrites(self.store, self.reads)
        # Chunks left by a failed write are dropped when the store opens (cheaply: only when the counts disagree).
        self.store.checked_read(self.reads.clean_orphans_if_counts_disagree)

    # --- the write path (writes.PaperWrites) ------------------------------------------------------------------
    def ingest(
        self,
        papers: Iterable[Paper],
        prune: bool = False,
        progress: Callable[[int], None] | None = None,
        replace: bool = True,
        batch_papers: int = BATCH_PAPERS,
    ) -> IngestReport:
        """Add new and changed papers, `batch_papers` at a time (`PaperWrites.ingest`)."""
        return self.writes.ingest(papers, prune, progress, replace, batch_papers)

    def chunk_nodes(self, paper: Paper) -> list[TextNode]:
        """The paper's chunks, with deterministic ids `<doc_id>::<n>`."""
        return self.writes.chunk_nodes(paper)

    # --- the read path (reads.PaperReads) ---------------------------------------------------------------------
    def chunk_paper_ids(self, misnamed: list[str] | None = None) -> dict[str, int]:
        """doc_id -> number of stored chunks; chunks whose id names another paper are added to `misnamed`."""
        return self.reads.chunk_paper_ids(misnamed)

    def remove_orphan_chunks(self, paper_ids: set[str] | None = None) -> int:
        """Delete the chunks whose paper record is missing; returns how many."""
        return self.reads.remove_orphan_chunks(paper_ids)

    def health(self) -> Health:
        """Counts and inconsistencies of the store (for `rag-bot doctor`)."""
        return self.reads.health()

    def fingerprints(self) -> dict[str, str]:
        """doc_id -> stored fingerprint, for every paper."""
        return self.reads.fingerprints()

    def all_papers(self) -> list[Paper]:
        """Every stored paper."""
        return self.reads.all_papers()

    def iter_papers(self) -> Iterator[Paper]:
        """Every stored paper, read a page at a time."""
        return self.reads.iter_papers()

    def papers_by_id(self, doc_ids: Sequence[str]) -> list[Paper]:
        """The stored papers of these ids, in one request."""
        return self.reads.papers_by_id(doc_ids)

    def paper_vectors(self, doc_ids: Sequence[str]) -> dict[str, list[float]]:
        """Whole-abstract vectors of the given papers."""
        return self.reads.paper_vectors(doc_ids)

    def paper_matrix(self) -> tuple[list[str], np.ndarray]:
        """Every paper's id and whole-abstract vector, as float32 rows."""
        return self.reads.paper_matrix()

    # --- the connection (base.ChromaStore) --------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        """The settings the store was opened with."""
        return self.store.settings

    @property
    def client(self) -> Any:  # what chroma.open_client returns
        """The Chroma client."""
        return self.store.client

    @property
    def papers(self) -> GuardedCollection:
        """The papers collection (a fresh one after `reopen`)."""
        return self.store.papers

    @property
    def chunks(self) -> GuardedCollection:
        """The chunks collection (a fresh one after `reopen`)."""
        return self.store.chunks

    @property
    def splitter(self) -> SentenceSplitter:
        """The chunker, made on first use."""
        return self.store.splitter

    @property
    def embedder(self) -> Embedder:
        """The embedding model, loaded on first use."""
        return self.store.embedder

    @property
    def index_version(self) -> str:
        """Part of every paper's fingerprint: the model and the chunking."""
        return self.store.index_version

    @property
    def write_failed(self) -> bool:
        """Whether a write failed since the store was (re)opened."""
        return self.store.write_failed

    @property
    def saved(self) -> SavedVectors | None:
        """The vector files' copy of a folder store (None for a server)."""
        return self.store.saved

    @property
    def repaired(self) -> list[str]:
        """What opening the store put back, one line per collection."""
        return self.store.repaired

    def reopen(self) -> None:
        """A fresh connection to the store."""
        return self.store.reopen()

    def dimensions(self) -> int:
        """The size of the vectors the chosen model makes."""
        return self.store.dimensions()

    def model_record(self) -> dict[str, Any]:
        """The collection's metadata: the model its vectors were made by."""
        return self.store.model_record()

    def recorded_model(self) -> RecordedModel:
        """The model the collection's vectors were made by."""
        return self.store.recorded_model()

    def stored_index_version(self) -> str:
        """`index_version` with the recorded model in place of the settings'."""
        return self.store.stored_index_version()

    def embedder_mismatch(self) -> str | None:
        """Why the settings' model must not embed for this collection, or None."""
        return self.store.embedder_mismatch()

    def check_embedder(self) -> None:
        """Refuse to embed with another model than the collection's."""
        return self.store.check_embedder()

    def count(self) -> int:
        """Papers in the index."""
        return self.store.count()

    def chunk_count(self) -> int:
        """Chunks in the index."""
        return self.store.chunk_count()

    def state(self) -> StoreState:
        """What identifies the collection's content, cheaply."""
        return self.store.state()

    def record_write(self) -> None:
        """Mark the collection as changed by a finished write."""
        return self.store.record_write()

    def mark_writing(self) -> None:
        """A write begins: the vector files are copied aside, the generation marked."""
        return self.store.mark_writing()

    def begin_write(self) -> None:
        """Before a write's first change: copy the vector files aside."""
        return self.store.begin_write()

    def after_write_call(self) -> None:
        """After each write call that succeeded: refresh the copy."""
        return self.store.after_write_call()

    def recover_vectors(self) -> None:
        """After a failed write: put back the vector files it damaged."""
        return self.store.recover_vectors()

    def end_write(self) -> None:
        """A write is over: its copy goes, unless vector files are still damaged."""
        return self.store.end_write()

    def writer_lock(self, wait: bool = True) -> AbstractContextManager[bool]:
        """Ingests of one store folder take turns; yields whether the lock is held."""
        return self.store.writer_lock(wait)
