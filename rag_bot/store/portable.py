"""Collections that travel: a whole index (papers, metadata, chunk and paper vectors) in one portable file, loaded
into any store (a folder or a Chroma server) without embedding anything. A lab embeds a conference once and shares
it; the lexical index is rebuilt from the papers on the first question (it is derived, not stored).

The file is gzipped JSON Lines: a manifest line, then one line per chunk and one per paper (papers last, as in an
ingest: a paper's record is its commit marker).

An import checks the whole file first, in one streaming pass, and writes nothing unless all of it is sound: the
manifest, every record's fields and vector dimension, every paper's metadata read back exactly as a question reads
it, every chunk's paper in the file and every paper's chunks. Then it writes all or nothing: what it will replace
(records with the same ids, and the chunks of the papers it replaces) is saved to a temporary file first, and a
failure part-way puts the store back as it was. The backup is named by the importing process (`base.BACKUP_GLOB`), in the
store folder for a folder store (the temporary folder for a server's): one a killed import left is deleted by the
next import or open."""

from __future__ import annotations

import gzip
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from rag_bot.errors import StoreError
from rag_bot.store.base import backup_folder, remove_stale_backups
from rag_bot.store.chroma import store_label
from rag_bot.store.index import PaperIndex
from rag_bot.store.portable_check import FORMAT, KINDS, VERSION, Plan, check_file, cleaned, numbered_lines
from rag_bot.store.records import chunk_metadata, portable_paper, stored_paper
from rag_bot.text import one_line

log = logging.getLogger(__name__)

BATCH = 500  # records per Chroma read: bounded memory, and well under Chroma's largest batch
# Records per Chroma write, under the folder store's largest batch (5,461). Against 500, 5,000 wrote 20,000 records
# 23% faster (1,254 against 1,018 a second, one run on these two cores); 4,000 leaves room for a server's limit.
WRITE_BATCH = 4000
T = TypeVar("T")


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
                if kind == "paper":  # the text as the document, whatever the store's layout (records.py)
                    document, metadata = portable_paper(document, metadata)
                out.write(json.dumps({"kind": kind, "id": record_id, "document": document or "", "metadata": metadata,
                                      "embedding": [round(float(x), 7) for x in embedding]}) + "\n")
                if progress and kind == "paper":
                    progress(1)
    log.info("exported %d papers and %d chunks to %s", papers, chunks, path)
    return {"papers": papers, "chunks": chunks}


def _in_batches(items: Iterable[T], size: int = BATCH) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _batches(ids: set[str]) -> Iterator[list[str]]:
    return _in_batches(sorted(ids))


class _Backup:
    """The records an import replaces (same ids as the file's, and every chunk of the papers it replaces),
    streamed to a temporary gzip file before anything is written, so a failure can put them back."""

    def __init__(self, index: PaperIndex, plan: Plan) -> None:
        fd, name = tempfile.mkstemp(prefix=f"rag-bot-import-{os.getpid()}-", suffix=".backup.jsonl.gz",
                                    dir=backup_folder(index.settings))
        os.close(fd)
        self.path = Path(name)
        self.chunks: set[str] = set()
        self.papers: set[str] = set()
        include = ["documents", "metadatas", "embeddings"]
        try:
            # Level 1: a backup is written once and read at most once; speed matters more than size.
            with gzip.open(self.path, "wt", encoding="utf-8", compresslevel=1) as out:
                for ids in _batches(plan.papers):
                    self._save(out, "paper", index.papers.get(ids=ids, include=include), self.papers)
                    self._save(out, "chunk", index.chunks.get(where={"doc_id": {"$in": ids}}, include=include),
                               self.chunks)
                for ids in _batches(plan.chunks):
                    self._save(out, "chunk", index.chunks.get(ids=ids, include=include), self.chunks)
        except BaseException:
            self.discard()
            raise

    @staticmethod
    def _save(out: Any, kind: str, got: Any, saved: set[str]) -> None:
        vectors = got["embeddings"] if got["embeddings"] is not None else [None] * len(got["ids"])
        for record_id, document, metadata, vector in zip(got["ids"], got["documents"], got["metadatas"], vectors):
            if record_id in saved:
                continue
            saved.add(record_id)
            embedding = [float(x) for x in vector] if vector is not None else None  # as stored, not rounded
            out.write(json.dumps({"kind": kind, "id": record_id, "document": document, "metadata": metadata,
                                  "embedding": embedding}) + "\n")

    def records(self, kind: str) -> Iterator[dict[str, Any]]:
        """The saved records of one kind."""
        with gzip.open(self.path, "rt", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if record["kind"] == kind:
                    yield record

    def discard(self) -> None:
        """Delete the temporary file."""
        self.path.unlink(missing_ok=True)

    def keep(self) -> None:
        """Rename the file out of base.BACKUP_GLOB, so no later command deletes it (the user needs it)."""
        kept = self.path.with_name(self.path.name.replace("rag-bot-import-", "rag-bot-import-kept-", 1))
        os.rename(self.path, kept)
        self.path = kept


def _upsert(index: PaperIndex, kind: str, records: Iterable[dict[str, Any]],
            progress: Callable[[int], None] | None = None, write_batch: int = WRITE_BATCH) -> None:
    """Write records of one kind, `write_batch` at a time (bounded memory); `progress` counts the records written."""
    for batch in _in_batches(records, write_batch):
        ids, embeddings = [r["id"] for r in batch], [r["embedding"] for r in batch]
        if kind == "chunk":  # a chunk keeps its paper and position only (rag_bot/store/index.py), whatever the file has
            index.chunks.upsert(ids=ids, embeddings=embeddings, metadatas=[chunk_metadata(r["metadata"]) for r in batch])
        else:
            index.papers.upsert(ids=ids, embeddings=embeddings,
                                metadatas=[stored_paper(r["document"], r["metadata"]) for r in batch])
        if progress:
            progress(len(batch))


def _write(index: PaperIndex, path: Path, plan: Plan, stale: set[str], progress: Callable[[int], None] | None,
           started: list[bool], write_batch: int = WRITE_BATCH) -> None:
    """Chunks first, then the replaced papers' old chunks that the file lacks go, then the papers (a paper's record
    is its commit marker); each kind in its own pass over the file, whatever the order of its lines. `started`
    gets True once the store has been written to."""
    index.mark_writing()
    started.append(True)
    for kind in KINDS:
        if kind == "paper":
            for ids in _batches(stale):
                index.chunks.delete(ids=ids)
        _upsert(index, kind, _file_records(path, plan, kind), progress, write_batch)
    index.record_write()


def _file_records(path: Path, plan: Plan, kind: str) -> Iterator[dict[str, Any]]:
    """The file's records of one kind, read again (a checked file: one that changed since is refused). A line
    that starts as the other kind's lines of an export do is skipped undecoded (the other kind's pass reads it)."""
    other = f'{{"kind": "{KINDS[1 - KINDS.index(kind)]}"'
    for _, line in numbered_lines(path):
        if line.startswith(other):
            continue
        record = json.loads(line)
        if not isinstance(record, dict) or record.get("kind") != kind:
            continue
        record = cleaned(record)  # no terminal escape or control character stored, as an ingest stores none
        if record.get("id") not in (plan.chunks if kind == "chunk" else plan.papers):
            raise ValueError(f"{path} changed while it was being imported")
        yield record


def _restore(index: PaperIndex, plan: Plan, backup: _Backup) -> None:
    """Put the store back as it was: what the import wrote goes, then what it replaced comes back."""
    index.reopen()  # after a failed write, chromadb's old connection can hang every later call
    for ids in _batches(plan.papers):
        index.papers.delete(ids=ids)
    for ids in _batches(plan.chunks):
        index.chunks.delete(ids=ids)
    for kind in KINDS:
        _upsert(index, kind, backup.records(kind))
    index.record_write()


def _cause(exc: BaseException) -> str:
    """The real cause of a failure in one line (a store fault's own error, not the ingest's advice around it)."""
    return one_line(exc.__cause__ if isinstance(exc, StoreError) and exc.__cause__ is not None else exc)


def import_collection(index: PaperIndex, path: Path, progress: Callable[[int], None] | None = None,
                      on_checked: Callable[[int], None] | None = None, write_batch: int = WRITE_BATCH,
                      ) -> dict[str, int]:
    """Load a portable file into the index (papers already there are replaced, with their chunks), `write_batch`
    records per write; no embedding is computed. `on_checked` gets the number of records to write once the file
    is checked, `progress` the records written as they go. Raises ValueError "file:line: what is wrong" for a file
    that is not sound (nothing is written), and StoreError when the write fails (the store is put back as it was)."""
    plan = check_file(path, index.index_version)
    if on_checked:
        on_checked(len(plan.papers) + len(plan.chunks))
    if index.write_failed:
        index.reopen()
    with index.writer_lock(wait=True):  # an ingest's or a reader's orphan cleaning must not take our chunks
        remove_stale_backups(index.settings)
        try:
            backup = _Backup(index, plan)
        except OSError as exc:
            where = "set TMPDIR" if index.settings.chroma_url else "its disk is the store's"
            raise StoreError(f"cannot save what the import replaces ({_cause(exc)}); nothing was written: free some "
                             f"space in {backup_folder(index.settings)} ({where}) and import again") from exc
        try:
            return _write_or_restore(index, path, plan, backup, progress, write_batch)
        finally:
            index.end_write()


def _write_or_restore(index: PaperIndex, path: Path, plan: Plan, backup: _Backup,
                      progress: Callable[[int], None] | None, write_batch: int = WRITE_BATCH) -> dict[str, int]:
    """The import's writes, and on a failure the store put back as it was (see import_collection)."""
    stale = backup.chunks - plan.chunks
    started: list[bool] = []
    try:
        _write(index, path, plan, stale, progress, started, write_batch)
    except BaseException as exc:
        log.debug("import failed; restoring the store", exc_info=True)
        where = store_label(index.settings)
        if not started:  # not even the first write went through (a read-only store, say)
            backup.discard()
            if not isinstance(exc, Exception):
                raise
            raise StoreError(f"importing {path} failed before anything was written ({_cause(exc)}) [{where}]; "
                             f"the store is unchanged; fix the cause and import again") from exc
        try:
            index.recover_vectors()  # vector files the failed write damaged come back first
            _restore(index, plan, backup)
        except BaseException as again:
            log.debug("restoring the store failed", exc_info=True)
            backup.keep()
            raise StoreError(
                f"importing {path} failed part-way ({_cause(exc)}) and the store could not be put back as it "
                f"was ({_cause(again)}) [{where}]; what the import replaced is saved in {backup.path}; once the "
                f"cause is fixed, import the file again (it replaces the same records) and run `rag-bot doctor`"
            ) from exc
        backup.discard()
        if not isinstance(exc, Exception):
            raise  # an interrupt: the store is as it was, and the CLI says to run it again
        raise StoreError(f"importing {path} failed part-way ({_cause(exc)}) [{where}]; the store was put back as "
                         f"it was before the import; fix the cause and import again") from exc
    backup.discard()
    replaced = len(backup.papers & plan.papers)
    log.info("imported %d papers (%d replaced) and %d chunks; %d old chunks removed", len(plan.papers), replaced,
             len(plan.chunks), len(stale))
    return {"papers": len(plan.papers), "chunks": len(plan.chunks), "replaced": replaced}
