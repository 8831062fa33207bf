"""Checking a portable collection file before anything is written: its manifest (format, version, index version, model), every record's fields, their limits (rag_bot/reading/limits.py) and vector size, every chunk's id naming its own paper; a `Plan` of what it holds, or the one line saying what is wrong and where."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from chromadb.api.types import validate_metadata

from rag_bot.reading import limits
from rag_bot.reading.files import clean_value
from rag_bot.store.embedding import DIMENSIONS, MODEL_NAME
from rag_bot.store.records import chunk_id_parts, paper_from_record

FORMAT = "rag-bot-collection"
VERSION = 1
KINDS = ("chunk", "paper")
# A paper record's metadata keys read as the paper's fields (their limits are the paper's); any other key is kept as
# it is, within `limits.VALUE_CHARS`.
PAPER_KEYS = {"text", "title", "source", "aliases", "links", "authors", "identifiers", "venue", "url"}


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


def numbered_lines(path: Path) -> Generator[tuple[int, str], None, None]:
    """The file's lines, numbered from 1; a ValueError when it is not gzip, or is truncated or damaged."""
    try:
        handle = gzip.open(path, "rt", encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    lineno = 0
    with handle:
        try:
            # One line at most `limits.LINE_CHARS` held: a 300 MB line is refused, not read into memory whole.
            while line := handle.readline(limits.LINE_CHARS + 1):
                lineno += 1
                if len(line) > limits.LINE_CHARS and not line.endswith("\n"):
                    raise ValueError(f"{path}:{lineno}: line over {limits.LINE_CHARS:,} characters (no record "
                                     f"within the limits is that long)")
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
    lines = numbered_lines(path)
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


def _vector_problem(embedding: object, size: list[int]) -> str | None:
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


def cleaned(record: dict[str, Any]) -> dict[str, Any]:
    """A record with its document and metadata texts cleaned as an ingest cleans a record's
    (`reading.files.clean_value`: no terminal escape sequence or control character); its id and vector as they are
    (an id holding such characters is refused by the check)."""
    return {**record, **{key: clean_value(record[key]) for key in ("document", "metadata") if key in record}}


def _chunk_problem(record_id: str, metadata: dict[str, Any]) -> str | None:
    """What is wrong with a chunk's paper: none named, or another than its id names (`<doc_id>::<n>`, as an ingest
    names chunks: rag_bot/store/index.py): such a chunk would take over another paper's chunk."""
    doc_id = metadata.get("doc_id")
    if not isinstance(doc_id, str) or not doc_id:
        return "its metadata names no paper (doc_id)"
    if len(doc_id) > limits.ID_CHARS:
        return f"its paper id is {len(doc_id):,} characters long (the limit is {limits.ID_CHARS:,})"
    named, n = chunk_id_parts(record_id)
    if not (named and n.isascii() and n.isdigit() and len(n) <= 6):
        return "its id is not '<paper id>::<n>'"
    if named != doc_id:
        return (f"its id names the paper {named!r} but its metadata says it belongs to {doc_id!r}: it would replace "
                f"that paper's chunk")
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
    if len(record_id) > limits.ID_CHARS + len("::999999"):  # a paper's id, or a chunk's: its paper's and "::<n>"
        raise _Bad(0, f"this {kind} record's id is {len(record_id):,} characters long (the limit is "
                      f"{limits.ID_CHARS:,})")
    what = f"{kind} {record_id!r}"
    if clean_value(record_id) != record_id:
        raise _Bad(0, f"this {kind} record's id holds control characters or terminal escape sequences")
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
    # A chunk keeps only its paper and position (rag_bot/store/records.py): its other keys are counted, not stored.
    problem = (limits.metadata_problem(metadata, set(metadata) if kind == "chunk" else PAPER_KEYS)
               or _vector_problem(record.get("embedding"), size))
    if problem:
        raise _Bad(0, f"{what}: {problem}")
    if kind == "chunk":
        problem = _chunk_problem(record_id, metadata)
        if problem:
            raise _Bad(0, f"{what}: {problem}")
        return kind, record_id, metadata
    try:
        paper = paper_from_record(record_id, record["document"], metadata)  # exactly as a question reads it back
    except ValueError as exc:
        raise _Bad(0, f"{what}: {exc}") from None
    problem = limits.paper_problem(paper)  # what an ingest would skip is not imported either
    if problem:
        raise _Bad(0, f"{what}: {problem}")
    clean = cleaned(record)
    if clean != record:  # cleaned (as it is written), it must still read back
        try:
            paper_from_record(record_id, clean["document"], clean["metadata"])
        except ValueError as exc:
            raise _Bad(0, f"{what}: once its control characters are removed, {exc}") from None
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
