"""The index's write path: papers chunked with a llama-index node parser, embedded, and written to the store's two
collections in batches (a paper's record after its chunks: the commit marker), incrementally by fingerprint and
identity (rag_bot/reading/identity.py). `PaperIndex` (index.py) holds one and calls it for `ingest`.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from llama_index.core.schema import Document, TextNode

from rag_bot.errors import StoreError
from rag_bot.reading import identity
from rag_bot.store.base import GENERATION, ChromaStore
from rag_bot.store.reads import PaperReads
from rag_bot.store.records import chunk_id, chunk_metadata, paper_from_record, paper_record
from rag_bot.store.sentence_file import sentence_file
from rag_bot.text import clean_markup, one_line
from rag_bot.types import Paper

log = logging.getLogger(__name__)


# Papers embedded and written together: their chunk texts are length-sorted across the whole batch (little
# padding) and written in one call per collection; memory stays bounded and an interruption loses one batch.
BATCH_PAPERS = 256


@dataclass
class IngestReport:
    """What an ingest changed."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_embedded: int = 0
    merged: int = 0  # papers already stored under another id (same DOI, arXiv id or title, same text): kept once
    kept_apart: int = 0  # papers sharing a DOI, arXiv id or title with a stored paper but not its text: both kept
    not_replaced: list[str] = field(default_factory=list)  # stored ids left as they were (`replace=False`)
    written: list[str] = field(default_factory=list, repr=False)  # doc_ids of the papers embedded and written

    def __str__(self) -> str:
        merged = f", {self.merged} merged into papers stored under another id" if self.merged else ""
        apart = (f", {self.kept_apart} kept apart: same title/DOI as a stored paper but another text"
                 if self.kept_apart else "")
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.removed} removed{merged}{apart} ({self.chunks_embedded} chunks embedded)"
        )


class PaperWrites:
    """The write path of the index (ingest), through a store's connection (base.ChromaStore) and what it reads back
    (reads.PaperReads)."""

    def __init__(self, store: ChromaStore, reads: PaperReads) -> None:
        self.store = store
        self.reads = reads

    def _merge_into(self, twin: str, paper: Paper, todo: list[tuple[Paper, str]], start_writing: Callable[[], None],
                    ) -> bool:
        """`paper` kept as the stored (or just read) `twin` with what it adds (identity.merge): its metadata only,
        so nothing is embedded again. Only when the two texts agree (identity.same_text): a record that merely
        shares a title or a DOI changes nothing, and False says so."""
        for n, (kept, fingerprint) in enumerate(todo):
            if kept.doc_id == twin:
                if not identity.same_text(kept.text, paper.text):
                    return False
                todo[n] = (identity.merge(kept, paper), fingerprint)
                return True
        got = self.store.papers.get(ids=[twin], include=["documents", "metadatas"])
        if not got["ids"]:
            return False
        meta = dict((got["metadatas"] or [{}])[0] or {})
        kept = paper_from_record(twin, (got["documents"] or [None])[0], meta)
        if not identity.same_text(kept.text, paper.text):
            return False
        merged = identity.merge(kept, paper)
        if merged != kept:
            start_writing()
            self.store.papers.update(ids=[twin], metadatas=[
                paper_record(merged, str(meta.get("fingerprint", "")), meta.get("chunks", 0))])
        return True

    def chunk_nodes(self, paper: Paper) -> list[TextNode]:
        """The paper's chunks, with deterministic ids `<doc_id>::<n>`."""
        document = Document(text=clean_markup(paper.text), id_=paper.doc_id)
        nodes = self.store.splitter.get_nodes_from_documents([document])
        out = []
        for n, node in enumerate(nodes):
            out.append(
                # The title travels with the text to the model; the record keeps `chunk_metadata` of it.
                TextNode(id_=chunk_id(paper.doc_id, n), text=node.get_content(),
                         metadata={"doc_id": paper.doc_id, "chunk": n, "title": paper.title})
            )
        return out

    def ingest(
        self,
        papers: Iterable[Paper],
        prune: bool = False,
        progress: Callable[[int], None] | None = None,
        replace: bool = True,
        batch_papers: int = BATCH_PAPERS,
    ) -> IngestReport:
        """Add new and changed papers (re-embedding only those); with `prune`, drop papers not given; without
        `replace`, a stored paper whose id comes again with other content is left as it is (`not_replaced`).

        `papers` is read once, in order (a `corpus.PaperStream` reads its files as it goes): papers are embedded
        and written `batch_papers` at a time, so memory does not grow with the input; only their ids are kept."""
        if self.store.write_failed:
            self.store.reopen()
        self.store.check_embedder()  # even when nothing is to embed: "unchanged" would vouch for another model's vectors
        with self.store.writer_lock(wait=True):
            try:
                return self._ingest(papers, prune, progress, replace, batch_papers)
            except StoreError:
                if self.store.write_failed:  # keep serving: whole vector files, a fresh connection, no half-written paper
                    try:
                        self.store.recover_vectors()
                        self.store.reopen()
                        self.reads.remove_orphan_chunks()
                    except StoreError as exc:  # the write's own error is the one to report (a full disk, say)
                        log.debug("cleaning up after the failed write failed too: %s", exc)
                        self.store.recover_vectors()
                raise
            finally:
                self.store.end_write()

    def _ingest(
        self,
        papers: Iterable[Paper],
        prune: bool,
        progress: Callable[[int], None] | None,
        replace: bool = True,
        batch_papers: int = BATCH_PAPERS,
    ) -> IngestReport:
        report = IngestReport()
        stored, known = self.reads.fingerprints_and_keys()
        # Chunks of papers that were never committed (a failed or killed ingest).
        removed = self.reads.remove_orphan_chunks(set(stored))
        writing = False

        def start_writing() -> None:
            nonlocal writing
            if not writing:  # a reader's cache of this collection is stale from the first write on
                self.store.mark_writing()
                writing = True

        keep: set[str] = set()
        todo: list[tuple[Paper, str]] = []

        def flush() -> None:
            start_writing()
            report.chunks_embedded += self._write_batch(todo)
            report.written.extend(paper.doc_id for paper, _ in todo)
            if progress:
                progress(len(todo))
            todo.clear()

        for paper in papers:
            if paper.doc_id not in stored and paper.doc_id not in keep:
                names = identity.keys(paper)
                twins = list(dict.fromkeys(known[k] for k in names if known.get(k, paper.doc_id) != paper.doc_id))
                # The same paper from another source: one record, with the richer metadata. A record that shares
                # only a key (a planted title or DOI) is kept apart: neither text is lost.
                twin = next((t for t in twins if self._merge_into(t, paper, todo, start_writing)), None)
                if twin is not None:
                    keep.add(twin)
                    report.merged += 1
                    if progress:
                        progress(1)
                    continue
                if twins:
                    report.kept_apart += 1
                    log.warning("%s kept apart from %s: same title or identifier, another text", paper.doc_id,
                                twins[0])
                for key in names:
                    known.setdefault(key, paper.doc_id)
            keep.add(paper.doc_id)
            fingerprint = f"{paper.content_hash}:{self.store.index_version}"
            if stored.get(paper.doc_id) == fingerprint:
                report.unchanged += 1
                if progress:
                    progress(1)
                continue
            if not replace and stored.get(paper.doc_id, paper.content_hash).partition(":")[0] != paper.content_hash:
                report.not_replaced.append(paper.doc_id)  # another record under this id: the stored one stays
                if progress:
                    progress(1)
                continue
            todo.append((paper, fingerprint))
            if paper.doc_id in stored:
                report.updated += 1
            else:
                report.added += 1
            if len(todo) == batch_papers:
                flush()
        if todo:
            flush()
        gone = [doc_id for doc_id in stored if doc_id not in keep] if prune else []
        if gone or removed:
            start_writing()
        if prune:
            for start in range(0, len(gone), 500):
                ids = gone[start:start + 500]
                self.store.chunks.delete(where={"doc_id": {"$in": ids}})
                self.store.papers.delete(ids=ids)
            self._forget_sentences(gone)
            report.removed = len(gone)
        if writing or (self.store.papers.metadata or {}).get(GENERATION) is None:
            self.store.record_write()
        log.info("index: %s", report)
        return report

    def _forget_sentences(self, doc_ids: Sequence[str]) -> None:
        """Drop removed papers' rows from the answer-time cache of sentence vectors (rag_bot/store/sentence_file.py),
        when there is one. A cache: a fault is logged, not raised (a row left behind is never read for a paper that
        is gone). For a Chroma server, only this machine's cache."""
        if not doc_ids:
            return
        file = sentence_file(self.store, any_format=True)
        try:
            file.delete(doc_ids)  # no file, nothing to drop: none is made
        except (OSError, sqlite3.Error) as exc:
            log.warning("could not drop the removed papers' sentence vectors: %s", one_line(exc))
        finally:
            file.close()

    def _write_batch(self, batch: Sequence[tuple[Paper, str]]) -> int:
        ids = [paper.doc_id for paper, _ in batch]
        # Old or half-written chunks of these papers go first, so a changed abstract leaves none behind.
        self.store.chunks.delete(where={"doc_id": {"$in": ids}})
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
        whole = self.store.settings.paper_vector == "whole"
        bare = [paper for paper, _ in batch if whole or not counts[paper.doc_id]]
        vectors = self.store.embedder.embed(chunk_texts + [
            f"{paper.title}. {clean_markup(paper.text)}" if whole else (paper.title or paper.doc_id) for paper in bare
        ])
        for node, vector in zip(nodes, vectors[: len(nodes)]):
            node.embedding = vector.tolist()
        if nodes:
            self.store.chunks.upsert(ids=[n.node_id for n in nodes], embeddings=[n.embedding for n in nodes],
                               metadatas=[chunk_metadata(n.metadata) for n in nodes])
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
        self.store.papers.upsert(  # the text in the metadata, not as Chroma's document (rag_bot/store/records.py)
            ids=ids,
            metadatas=[paper_record(paper, fp, counts[paper.doc_id]) for paper, fp in batch],
            embeddings=paper_vectors,
        )
        return len(nodes)
