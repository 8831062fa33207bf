"""The index: papers chunked with a llama-index node parser, embedded offline, stored in Chroma.

Two collections: `<name>_chunks` (the llama-index `ChromaVectorStore`: one vector per chunk) and
`<name>_papers` (one record per paper: its original text, metadata, a whole-abstract vector, and the
fingerprint that makes ingestion incremental). A paper's record is written after its chunks, so it acts
as the commit marker: an interrupted ingest leaves no paper that looks done but is not.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import chromadb
from chromadb.config import Settings as ChromaSettings
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, Document, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.vector_stores.chroma import ChromaVectorStore

from rag_bot.embedding import MODEL_NAME, MiniLMEmbedding
from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.text import clean_markup
from rag_bot.types import Paper

log = logging.getLogger(__name__)

BATCH_PAPERS = 32
_READ_BATCH = 2000


@dataclass
class IngestReport:
    """What an ingest changed."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_embedded: int = 0

    def __str__(self) -> str:
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.removed} removed ({self.chunks_embedded} chunks embedded)"
        )


def open_client(settings: Settings) -> Any:
    """A Chroma client: a server at `chroma_url`, else a persistent store in `storage`."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_url:
        url = urlparse(settings.chroma_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise StoreError(f"RAG_BOT_CHROMA_URL must look like http://host:port, got {settings.chroma_url!r}")
        try:
            return chromadb.HttpClient(
                host=url.hostname,
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings,
            )
        except Exception as exc:  # chromadb raises plain ValueError/ConnectionError here
            log.debug("Chroma server client failed", exc_info=True)
            raise StoreError(f"cannot reach the Chroma server at {settings.chroma_url}: {exc}") from exc
    try:
        settings.storage.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(settings.storage), settings=chroma_settings)
    except Exception as exc:
        log.debug("persistent Chroma client failed", exc_info=True)
        raise StoreError(f"cannot open the store in {settings.storage}: {exc}") from exc


def store_label(settings: Settings) -> str:
    """Where the index lives, for people."""
    return f"Chroma server {settings.chroma_url}" if settings.chroma_url else f"folder {settings.storage}"


def _paper_metadata(paper: Paper, fingerprint: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "title": paper.title,
        "source": paper.source,
        "fingerprint": fingerprint,
        "aliases": json.dumps(paper.aliases),
        "links": json.dumps(paper.links),
        "authors": json.dumps(paper.authors),
    }
    for key in ("venue", "year", "url"):
        value = getattr(paper, key)
        if value is not None:
            meta[key] = value
    return meta


def paper_from_record(doc_id: str, text: str, meta: dict[str, Any]) -> Paper:
    """A `Paper` back from its Chroma record."""
    return Paper(
        doc_id=doc_id,
        title=meta.get("title", doc_id),
        text=text,
        source=meta.get("source", ""),
        aliases=json.loads(meta.get("aliases", "[]")),
        links=json.loads(meta.get("links", "[]")),
        authors=json.loads(meta.get("authors", "[]")),
        venue=meta.get("venue"),
        year=meta.get("year"),
        url=meta.get("url"),
    )


class PaperIndex:
    """The Chroma-backed index of papers and their chunks."""

    def __init__(self, settings: Settings, embedder: MiniLMEmbedding | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        self.client = open_client(settings)
        try:
            space = {"hnsw:space": "cosine"}
            self.papers = self.client.get_or_create_collection(
                f"{settings.collection}_papers", metadata=space, embedding_function=None
            )
            self.chunks = self.client.get_or_create_collection(
                f"{settings.collection}_chunks", metadata=space, embedding_function=None
            )
        except Exception as exc:
            log.debug("opening the collections failed", exc_info=True)
            raise StoreError(f"cannot open the collections in {store_label(settings)}: {exc}") from exc
        self.vector_store = ChromaVectorStore(chroma_collection=self.chunks)
        self.splitter = SentenceSplitter(chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap)
        # Part of every paper's fingerprint: a change of model or chunking re-indexes everything.
        self.index_version = f"{MODEL_NAME}/{settings.max_tokens}/{settings.chunk_size}/{settings.chunk_overlap}/v2"

    @property
    def embedder(self) -> MiniLMEmbedding:
        """The embedding model, loaded on first use (opening the store for stats needs none)."""
        if self._embedder is None:
            self._embedder = MiniLMEmbedding(
                max_tokens=self.settings.max_tokens, embed_batch_size=self.settings.embed_batch_size
            )
        return self._embedder

    def count(self) -> int:
        """Papers in the index."""
        return int(self.papers.count())

    def chunk_count(self) -> int:
        """Chunks in the index."""
        return int(self.chunks.count())

    def fingerprints(self) -> dict[str, str]:
        """doc_id -> stored fingerprint, for every paper."""
        out: dict[str, str] = {}
        for batch in self._iter_records(include=["metadatas"]):
            for doc_id, meta in zip(batch["ids"], batch["metadatas"] or []):
                out[doc_id] = (meta or {}).get("fingerprint", "")
        return out

    def _iter_records(self, include: list[str]) -> Iterator[dict[str, Any]]:
        total = self.count()
        for offset in range(0, total, _READ_BATCH):
            yield self.papers.get(include=include, limit=_READ_BATCH, offset=offset)  # type: ignore[arg-type]

    def all_papers(self) -> list[Paper]:
        """Every stored paper (for BM25, name lookup and browsing)."""
        papers: list[Paper] = []
        for batch in self._iter_records(include=["documents", "metadatas"]):
            for doc_id, text, meta in zip(batch["ids"], batch["documents"] or [], batch["metadatas"] or []):
                papers.append(paper_from_record(doc_id, text or "", dict(meta or {})))
        return papers

    def paper_vectors(self, doc_ids: Sequence[str]) -> dict[str, list[float]]:
        """Whole-abstract vectors of the given papers."""
        if not doc_ids:
            return {}
        got = self.papers.get(ids=list(doc_ids), include=["embeddings"])
        return {i: list(v) for i, v in zip(got["ids"], got["embeddings"])}  # type: ignore[arg-type]

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
        papers: Sequence[Paper],
        prune: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> IngestReport:
        """Add new and changed papers (re-embedding only those); with `prune`, drop papers not given."""
        report = IngestReport()
        stored = self.fingerprints()
        self.chunks.delete(where={"doc_id": "None"})  # orphans written by v1 stores (see chunk_nodes)
        todo: list[tuple[Paper, str]] = []
        for paper in papers:
            fingerprint = f"{paper.content_hash}:{self.index_version}"
            if stored.get(paper.doc_id) == fingerprint:
                report.unchanged += 1
                if progress:
                    progress(1)
            else:
                todo.append((paper, fingerprint))
                if paper.doc_id in stored:
                    report.updated += 1
                else:
                    report.added += 1
        for start in range(0, len(todo), BATCH_PAPERS):
            batch = todo[start:start + BATCH_PAPERS]
            report.chunks_embedded += self._write_batch(batch)
            if progress:
                progress(len(batch))
        if prune:
            keep = {p.doc_id for p in papers}
            gone = [doc_id for doc_id in stored if doc_id not in keep]
            for start in range(0, len(gone), 500):
                ids = gone[start:start + 500]
                self.chunks.delete(where={"doc_id": {"$in": ids}})
                self.papers.delete(ids=ids)
            report.removed = len(gone)
        log.info("index: %s", report)
        return report

    def _write_batch(self, batch: Sequence[tuple[Paper, str]]) -> int:
        ids = [paper.doc_id for paper, _ in batch]
        # Old or half-written chunks of these papers go first, so a changed abstract leaves none behind.
        self.chunks.delete(where={"doc_id": {"$in": ids}})
        nodes: list[TextNode] = []
        for paper, _ in batch:
            nodes.extend(self.chunk_nodes(paper))
        # The title travels with every chunk (names live there); the paper vector sees the whole text.
        chunk_texts = [f"{n.metadata['title']}. {n.get_content()}" for n in nodes]
        paper_texts = [f"{paper.title}. {clean_markup(paper.text)}" for paper, _ in batch]
        vectors = self.embedder.embed(chunk_texts + paper_texts)
        for node, vector in zip(nodes, vectors[: len(nodes)]):
            node.embedding = vector.tolist()
        if nodes:
            self.vector_store.add(list[BaseNode](nodes))
        self.papers.upsert(
            ids=ids,
            documents=[paper.text for paper, _ in batch],
            metadatas=[_paper_metadata(paper, fp) for paper, fp in batch],
            embeddings=[v.tolist() for v in vectors[len(nodes):]],
        )
        return len(nodes)
