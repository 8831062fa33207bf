"""A paper as its Chroma record holds it, and back: the layout of the papers' and chunks' metadata.

A paper's text is kept in its metadata (key `text`), not as Chroma's document. Chroma's folder store keeps a document
four times (the metadata row, the string-value index, and its FTS5 trigram index with that index's own copy of the
text); a metadata string twice. And a string longer than about 1,000 bytes overflows SQLite's index page: each
such value costs a whole 4 KiB overflow page in the string-value index. So a long string is stored in pieces of at
most `PIECE` bytes (`key`, `key:1`, `key:2`, ... and `key:pieces`, their number). Measured on 3,000 real abstracts
(about 1,000 bytes of text each; bench/perf/record_layout.py): 9.47 KB a paper record as a document, 5.29 KB as one
metadata string, 3.73 KB in pieces. Records written by older versions (text as the document) are read as they are.

Chroma's upsert merges a record's metadata with the stored one, so a writer sets `key:pieces` of every short string
to None (deleting a longer earlier value's count); pieces beyond the count are never read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from rag_bot.types import Paper

TEXT = "text"
# The largest piece: SQLite keeps an index entry of up to 1,002 bytes in its 4 KiB page (the largest local payload
# of an index b-tree page); the entry also holds the key name, the record id and its header. 900 and 600 gave the
# same size on 3,000 abstracts (3.58 and 3.55 KB a paper), the whole text in one string 5.2 KB.
PIECE = 900
PIECES = ":pieces"


def _pieces(value: str) -> list[str]:
    """`value` cut into UTF-8 pieces of at most PIECE bytes, never inside a character."""
    data = value.encode("utf-8")
    out: list[str] = []
    while data:
        cut = min(PIECE, len(data))
        while cut < len(data) and (data[cut] & 0xC0) == 0x80:  # a continuation byte: cut before its character
            cut -= 1
        out.append(data[:cut].decode("utf-8"))
        data = data[cut:]
    return out


def spread(meta: dict[str, Any]) -> dict[str, Any]:
    """Metadata as it is written: every string longer than PIECE bytes in pieces, with their count."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        out[key] = value
        if not isinstance(value, str):
            continue
        parts = _pieces(value) if len(value.encode("utf-8")) > PIECE else [value]
        out[key] = parts[0]
        out.update({f"{key}:{n}": part for n, part in enumerate(parts[1:], 1)})
        out[key + PIECES] = len(parts) if len(parts) > 1 else None
    return out


def joined(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata as it was given to `spread` (every string whole); metadata without pieces is returned as it is."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if ":" in key:  # a piece or a count (no field name has a colon)
            continue
        count = meta.get(key + PIECES)
        if isinstance(value, str) and isinstance(count, int) and count > 1:
            value += "".join(str(meta.get(f"{key}:{n}", "")) for n in range(1, count))
        out[key] = value
    return out


def paper_metadata(paper: Paper, fingerprint: str) -> dict[str, Any]:
    """A paper's record metadata, text included, before `spread`."""
    meta: dict[str, Any] = {
        TEXT: paper.text,
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


def paper_record(paper: Paper, fingerprint: str, chunks: int) -> dict[str, Any]:
    """The metadata an ingest writes for a paper with `chunks` chunks."""
    return spread(paper_metadata(paper, fingerprint) | {"chunks": chunks})


def stored_paper(document: str | None, meta: dict[str, Any]) -> dict[str, Any]:
    """The metadata to write for a paper given as a portable record (text as its document)."""
    whole = joined(meta)
    if TEXT not in whole:
        whole[TEXT] = document or ""
    return spread(whole)


def portable_paper(document: str | None, meta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A stored paper record as a portable one: its text as the document, its metadata whole and without it (the
    export format every version reads)."""
    whole = joined(meta or {})
    text = whole.pop(TEXT, None)
    return (document or "") if text is None else str(text), whole


CHUNK_KEYS = ("doc_id", "chunk")  # all a chunk record keeps: its paper and its position


def chunk_id(doc_id: str, n: int) -> str:
    """The id of a paper's `n`th chunk: `<doc_id>::<n>` (an import and `doctor` check that a chunk's id names its
    own paper: one that names another would take over that paper's chunk)."""
    return f"{doc_id}::{n}"


def chunk_id_parts(record_id: str) -> tuple[str, str]:
    """The paper id and the number a chunk id names (`chunk_id` undone; the number as written)."""
    named, _, n = record_id.rpartition("::")
    return named, n


def chunk_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A chunk record's metadata as stored (from a node's, or an exported record's written by older versions with
    the title, source and llama-index's node JSON besides)."""
    return {key: metadata[key] for key in CHUNK_KEYS if key in metadata}


def paper_from_record(doc_id: str, document: str | None, meta: dict[str, Any]) -> Paper:
    """A `Paper` back from its Chroma record (the text from its metadata, or from the document of a record written
    by an older version); a one-line ValueError naming the field when its metadata cannot be read (the import
    checks every paper with this very function, so what it lets in can be read back)."""
    text, meta = portable_paper(document, meta)
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
