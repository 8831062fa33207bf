"""Collections that travel: a whole index (papers, metadata, chunk and paper vectors) in one portable file, loaded
into any store (a folder or a Chroma server) without embedding anything. A lab embeds a conference once and shares
it; the lexical index is rebuilt from the papers on the first question (it is derived, not stored).

The file is gzipped JSON Lines: a manifest line, then one line per chunk and one per paper (papers last, as in an
ingest: a paper's record is its commit marker)."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rag_bot.errors import StoreError
from rag_bot.index import PaperIndex

log = logging.getLogger(__name__)

FORMAT = "rag-bot-collection"
VERSION = 1
BATCH = 500


def _records(collection: Any, total: int) -> Iterator[tuple[str, str, dict[str, Any], list[float]]]:
    for offset in range(0, total, BATCH):
        got = collection.get(include=["documents", "metadatas", "embeddings"], limit=BATCH, offset=offset)
        yield from zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"])


def export_collection(index: PaperIndex, path: Path, progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Write the index to one portable file; returns the counts written."""
    papers, chunks = index.count(), index.chunk_count()
    with gzip.open(path, "wt", encoding="utf-8") as out:
        manifest = {"format": FORMAT, "version": VERSION, "index_version": index.index_version,
                    "papers": papers, "chunks": chunks}
        out.write(json.dumps(manifest) + "\n")
        for kind, collection, total in (("chunk", index.chunks, chunks), ("paper", index.papers, papers)):
            for record_id, document, metadata, embedding in _records(collection, total):
                out.write(json.dumps({"kind": kind, "id": record_id, "document": document, "metadata": metadata,
                                      "embedding": [round(float(x), 7) for x in embedding]}) + "\n")
                if progress and kind == "paper":
                    progress(1)
    log.info("exported %d papers and %d chunks to %s", papers, chunks, path)
    return {"papers": papers, "chunks": chunks}


def import_collection(index: PaperIndex, path: Path, progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Load a portable file into the index (papers already there are replaced); no embedding is computed.
    Raises ValueError with the reason for a file that is not a rag-bot collection or was embedded differently."""
    try:
        handle = gzip.open(path, "rt", encoding="utf-8")
        first = handle.readline()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a rag-bot collection file ({exc})") from None
    with handle:
        try:
            manifest = json.loads(first)
        except json.JSONDecodeError:
            raise ValueError(f"{path} is not a rag-bot collection file (no manifest line)") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ValueError(f"{path} is not a rag-bot collection file")
        if manifest.get("index_version") != index.index_version:
            raise ValueError(f"{path} was embedded as {manifest.get('index_version')}; this rag-bot uses "
                             f"{index.index_version}: re-ingest the sources instead")
        counts = {"papers": 0, "chunks": 0}
        batches: dict[str, list[dict[str, Any]]] = {"chunk": [], "paper": []}
        for lineno, line in enumerate(handle, start=2):
            try:
                record = json.loads(line)
                kind = record["kind"]
                batches[kind].append(record)
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{path}:{lineno}: not a collection record") from None
            if len(batches[kind]) >= BATCH:
                counts[f"{kind}s"] += _write(index, kind, batches[kind], progress)
                batches[kind] = []
        for kind in ("chunk", "paper"):  # chunks before the papers they belong to
            counts[f"{kind}s"] += _write(index, kind, batches[kind], progress)
    index.record_write()
    log.info("imported %(papers)d papers and %(chunks)d chunks", counts)
    return counts


def _write(index: PaperIndex, kind: str, records: list[dict[str, Any]], progress: Callable[[int], None] | None) -> int:
    if not records:
        return 0
    collection = index.chunks if kind == "chunk" else index.papers
    try:
        collection.upsert(ids=[r["id"] for r in records], documents=[r["document"] for r in records],
                          metadatas=[r["metadata"] for r in records], embeddings=[r["embedding"] for r in records])
    except Exception as exc:
        raise StoreError(f"the store could not be written while importing: {exc}") from exc
    if progress and kind == "paper":
        progress(len(records))
    return len(records)
