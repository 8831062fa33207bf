"""Collections that travel: a whole index (papers, metadata, chunk and paper vectors) in one portable file, loaded
into any store (a folder or a Chroma server) without embedding anything. A lab embeds a conference once and shares
it; the lexical index is rebuilt from the papers on the first question (it is derived, not stored).

The file is gzipped JSON Lines: a manifest line, then one line per chunk and one per paper (papers last, as in an
ingest: a paper's record is its commit marker).

An import checks the whole file first, in one streaming pass, and writes nothing unless all of it is sound: the
manifest, every record's fields and vector dimension, every paper's metadata read back exactly as a question reads
it, every chunk's paper in the file and every paper's chunks. Then it writes all or nothing: what it will replace
(records with the same ids, and the chunks of the papers it replaces) is saved to a temporary file first, and a
failure part-way puts the store back as it was."""

from __future__ import annotations

import gzip
import json
import logging
import os
import tempfile
import uuid
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from chromadb.api.types import validate_metadata

from rag_bot.embedding import DIMENSIONS, MODEL_NAME
from rag_bot.errors import StoreError
from rag_bot.index import PaperIndex, one_line, paper_from_record, store_label

log = logging.getLogger(__name__)

FORMAT = "rag-bot-collection"
VERSION = 1
BATCH = 500  # records per Chroma call: bounded memory, and well under Chroma's largest batch
KINDS = ("chunk", "paper")
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
                out.write(json.dumps({"kind": kind, "id": record_id, "document": document, "metadata": metadata,
                                      "embedding": [round(float(x), 7) for x in embedding]}) + "\n")
                if progress and kind == "paper":
                    progress(1)
    log.info("exported %d papers and %d chunks to %s", papers, chunks, path)
    return {"papers": papers, "chunks": chunks}


class _Bad(Exception):
    """A problem of the file at a line (becomes the ValueError the user sees, prefixed with file:line)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Plan:
    """What a checked file holds: the ids of its papers and chunks (ids only: memory stays small)."""

    papers: set[str] = field(default_factory=set)
    chunks: set[str] = field(default_factory=set)


def _lines(path: Path) -> Generator[tuple[int, str], None, None]:
    """The file's lines, numbered from 1; a ValueError when it is not gzip, or is truncated or damaged."""
    try:
        handle = gzip.open(path, "rt", encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    lineno = 0
    with handle:
        try:
            for lineno, line in enumerate(handle, start=1):
                if not line.endswith("\n"):
                    handle.read(1)  # a stream cut short says so here, before its cut last line is parsed
                yield lineno, line
        except gzip.BadGzipFile as exc:
            if lineno == 0:
                raise ValueError(f"{path}:1: not a rag-bot collection file (not gzip: {exc})") from None
            raise ValueError(f"{path}:{lineno + 1}: the file is truncated or damaged ({exc}); export it again "
                             f"or copy it again whole") from None
        except (EOFError, zlib.error, OSError, UnicodeDecodeError) as exc:
            where = f"{path}:{lineno + 1}"
            if lineno == 0 and isinstance(exc, OSError | UnicodeDecodeError):
                raise ValueError(f"{where}: not a rag-bot collection file ({exc})") from None
            raise ValueError(f"{where}: the file is truncated or damaged ({exc}); export it again or copy it "
                             f"again whole") from None


def check_file(path: Path, index_version: str) -> Plan:
    """Check the whole file, streaming, before anything is written; a ValueError "file:line: what is wrong" for the
    first problem (the import writes nothing then)."""
    lines = _lines(path)
    try:
        return _check(lines, index_version)
    except _Bad as bad:
        # Damage inside a gzip stream often shows first as a garbled record: the damage is the cause to report.
        for _ in lines:
            pass
        raise ValueError(f"{path}:{bad.line}: {bad}") from None
    finally:
        lines.close()


def _manifest(line: str, index_version: str) -> dict[str, Any]:
    try:
        manifest = json.loads(line)
    except ValueError:
        raise _Bad(1, "not a rag-bot collection file (no manifest line)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _Bad(1, "not a rag-bot collection file")
    if manifest.get("version") != VERSION:
        raise _Bad(1, f"the file is in format version {manifest.get('version')!r}; this rag-bot reads version "
                      f"{VERSION}: export it with this version of rag-bot")
    if manifest.get("index_version") != index_version:
        raise _Bad(1, f"the file was embedded as {manifest.get('index_version')}; this rag-bot uses "
                      f"{index_version}: re-ingest the sources instead")
    for key in ("papers", "chunks"):
        value = manifest.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _Bad(1, f"the manifest's {key!r} count is {value!r}, not a number of records")
    return manifest


def _vector_problem(embedding: Any, size: list[int]) -> str | None:
    """What is wrong with a record's vector; `size` holds the model's vector size (the shipped model's, or the
    first record's for a served model) and is filled by the first record when empty."""
    if not isinstance(embedding, list):
        return f"its embedding is {type(embedding).__name__}, not a list of numbers"
    if not size:
        size.append(len(embedding))
    if len(embedding) != size[0]:
        return (f"its embedding has {len(embedding)} dimensions; this rag-bot's model makes {size[0]}: the file "
                f"was embedded with another model")
    values = np.asarray(embedding)  # four times faster than checking each number in Python
    if values.ndim != 1 or values.dtype.kind not in "fiu" or not np.isfinite(values).all():
        return "its embedding holds something that is not a finite number"
    return None


def _record(line: str, index_version: str, size: list[int]) -> tuple[str, str, dict[str, Any]]:
    """(kind, id, metadata) of one sound record; `_Bad` (line 0: the caller's) says what is wrong."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise _Bad(0, f"not a collection record (not valid JSON: {exc})") from None
    if not isinstance(record, dict) or record.get("kind") not in KINDS:
        raise _Bad(0, "not a collection record (its kind is neither 'chunk' nor 'paper')")
    kind, record_id, metadata = record["kind"], record.get("id"), record.get("metadata")
    if not isinstance(record_id, str) or not record_id:
        raise _Bad(0, f"this {kind} record has no id")
    what = f"{kind} {record_id!r}"
    if not isinstance(record.get("document"), str):
        raise _Bad(0, f"{what}: its document is not text")
    if not isinstance(metadata, dict):
        raise _Bad(0, f"{what}: its metadata is not an object")
    try:
        validate_metadata(metadata)  # what Chroma would refuse halfway through the write, refused now
    except (TypeError, ValueError) as exc:
        raise _Bad(0, f"{what}: its metadata cannot be stored ({exc})") from None
    for key, value in metadata.items():  # Chroma stores integers in 64 bits and reads larger ones back as errors
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise _Bad(0, f"{what}: its {key!r} metadata {str(value)[:20]}... is too large a number to store")
    problem = _vector_problem(record.get("embedding"), size)
    if problem:
        raise _Bad(0, f"{what}: {problem}")
    if kind == "chunk":
        if not isinstance(metadata.get("doc_id"), str) or not metadata["doc_id"]:
            raise _Bad(0, f"{what}: its metadata names no paper (doc_id)")
        return kind, record_id, metadata
    try:
        paper_from_record(record_id, record["document"], metadata)  # exactly as a question reads it back
    except ValueError as exc:
        raise _Bad(0, f"{what}: {exc}") from None
    if not str(metadata.get("fingerprint", "")).endswith(f":{index_version}"):
        raise _Bad(0, f"{what}: its fingerprint says it was not embedded as {index_version}")
    stated = metadata.get("chunks")
    if stated is not None and (not isinstance(stated, int) or isinstance(stated, bool) or stated < 0):
        raise _Bad(0, f"{what}: its chunk count {stated!r} is not a number")
    return kind, record_id, metadata


def _check(lines: Iterator[tuple[int, str]], index_version: str) -> Plan:
    first = next(lines, None)
    if first is None:
        raise _Bad(1, "not a rag-bot collection file (it is empty)")
    manifest = _manifest(first[1], index_version)
    plan = Plan()
    papers: dict[str, tuple[int, int | None]] = {}  # paper id -> (its line, the chunk count its record states)
    owners: dict[str, tuple[int, int, str]] = {}  # paper id -> (chunks naming it, first such line and chunk id)
    size = [DIMENSIONS] if index_version.startswith(f"{MODEL_NAME}/") else []
    for lineno, line in lines:
        try:
            kind, record_id, metadata = _record(line, index_version, size)
        except _Bad as bad:
            raise _Bad(lineno, str(bad)) from None
        seen = plan.chunks if kind == "chunk" else plan.papers
        if record_id in seen:
            raise _Bad(lineno, f"the {kind} id {record_id!r} appears twice")
        seen.add(record_id)
        if kind == "paper":
            papers[record_id] = (lineno, metadata.get("chunks"))
        else:
            n, at, chunk_id = owners.get(metadata["doc_id"], (0, lineno, record_id))
            owners[metadata["doc_id"]] = (n + 1, at, chunk_id)
    for doc_id, (_, at, chunk_id) in owners.items():
        if doc_id not in papers:
            raise _Bad(at, f"chunk {chunk_id!r} belongs to the paper {doc_id!r}, which is not in the file")
    for doc_id, (at, stated) in papers.items():
        n = owners.get(doc_id, (0, 0, ""))[0]
        if not n:
            raise _Bad(at, f"paper {doc_id!r} has no chunk in the file")
        if stated is not None and stated != n:
            raise _Bad(at, f"paper {doc_id!r} has {n} chunks in the file; its record says {stated}")
    if not papers:
        raise _Bad(1, "the file holds no papers")
    if (manifest["papers"], manifest["chunks"]) != (len(plan.papers), len(plan.chunks)):
        raise _Bad(1, f"the manifest says {manifest['papers']} papers and {manifest['chunks']} chunks; the file "
                      f"holds {len(plan.papers)} and {len(plan.chunks)}: it is incomplete, export it again")
    return plan


def _in_batches(items: Iterable[T]) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= BATCH:
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
        fd, name = tempfile.mkstemp(prefix="rag-bot-import-", suffix=".backup.jsonl.gz")
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


def _upsert(index: PaperIndex, kind: str, records: Iterable[dict[str, Any]],
            progress: Callable[[int], None] | None = None) -> None:
    """Write records of one kind, `BATCH` at a time (bounded memory); `progress` counts the papers written."""
    collection = index.chunks if kind == "chunk" else index.papers
    for batch in _in_batches(records):
        collection.upsert(ids=[r["id"] for r in batch], documents=[r["document"] for r in batch],
                          metadatas=[r["metadata"] for r in batch], embeddings=[r["embedding"] for r in batch])
        if progress and kind == "paper":
            progress(len(batch))


def _write(index: PaperIndex, path: Path, plan: Plan, stale: set[str], progress: Callable[[int], None] | None,
           started: list[bool]) -> None:
    """Chunks first, then the replaced papers' old chunks that the file lacks go, then the papers (a paper's record
    is its commit marker); each kind in its own pass over the file, whatever the order of its lines. `started`
    gets True once the store has been written to."""
    # A reader's cache keyed by this collection is stale from the first write on (rag_bot/lexicon.py).
    index._mark(f"writing-{uuid.uuid4().hex}")
    started.append(True)
    for kind in KINDS:
        if kind == "paper":
            for ids in _batches(stale):
                index.chunks.delete(ids=ids)
        _upsert(index, kind, _file_records(path, plan, kind), progress)
    index.record_write()


def _file_records(path: Path, plan: Plan, kind: str) -> Iterator[dict[str, Any]]:
    """The file's records of one kind, read again (a checked file: one that changed since is refused)."""
    for _, line in _lines(path):
        record = json.loads(line)
        if not isinstance(record, dict) or record.get("kind") != kind:
            continue
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


def import_collection(index: PaperIndex, path: Path, progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Load a portable file into the index (papers already there are replaced, with their chunks); no embedding is
    computed. Raises ValueError "file:line: what is wrong" for a file that is not sound (nothing is written), and
    StoreError when the write fails (the store is put back as it was)."""
    plan = check_file(path, index.index_version)
    if index.write_failed:
        index.reopen()
    with index.writer_lock(wait=True):  # an ingest's or a reader's orphan cleaning must not take our chunks
        try:
            backup = _Backup(index, plan)
        except OSError as exc:
            raise StoreError(f"cannot save what the import replaces to a temporary file ({_cause(exc)}); nothing "
                             f"was written: free some space in {tempfile.gettempdir()} (or set TMPDIR) and import "
                             f"again") from exc
        stale = backup.chunks - plan.chunks
        started: list[bool] = []
        try:
            _write(index, path, plan, stale, progress, started)
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
                _restore(index, plan, backup)
            except BaseException as again:
                log.debug("restoring the store failed", exc_info=True)
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
