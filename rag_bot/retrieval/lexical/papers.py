"""The papers' records in the lexical cache, and the one reader of them: a `Paper` is written as a record
(`RecordWriter.add_paper`) and read back (`PaperRecords`) here only.

Each record is compressed on its own with zlib against one dictionary shared by the collection, so that one record
is read without the others.

A record is a JSON line of a paper's fields (1.32 KB on average at a million simulated papers). Alone, zlib takes it
to 0.73 KB; primed with 32 KB of the collection's first records (zlib's window, so no larger dictionary helps), to
0.53 KB, and a record is unpacked in about 8 µs (level 6, zlib's default: 79 µs to pack; level 9 gains 1 byte for
93 µs, level 1 costs 90 bytes; bench/perf/record_packing.py on 20,000 records of the million). At a million papers the
cache's records take 0.53 GB instead of 1.32.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

import numpy as np

from rag_bot.retrieval.lexical.rows import ByRow
from rag_bot.types import Paper

FIELDS = ("title", "text", "source", "aliases", "links", "authors", "venue", "year", "url", "identifiers")
WINDOW = 32768  # zlib's window: the dictionary's size
LEVEL = 6


class RecordWriter:
    """Appends compressed records to a file; the dictionary is the first records (held until it is full)."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._base: zlib._Compress | None = None
        self.dictionary = b""
        self.offsets = [0]

    def add_paper(self, paper: Paper) -> None:
        """Append a paper's record (its fields but the doc_id, which is the record's row)."""
        self.add(record_of(paper))

    def add(self, record: bytes) -> None:
        if self._base is None:
            self._held.append(record)
            self._held_bytes += len(record)
            if self._held_bytes >= WINDOW:
                self._prime()
            return
        self._write(record)

    def close(self) -> None:
        if self._base is None:
            self._prime()

    def _prime(self) -> None:
        self.dictionary = b"".join(self._held)[-WINDOW:]
        self._base = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, self.dictionary)
        held, self._held = self._held, []
        for record in held:
            self._write(record)

    def _write(self, record: bytes) -> None:
        assert self._base is not None
        packer = self._base.copy()  # primed once: copying skips reading the dictionary again
        packed = packer.compress(record) + packer.flush()
        self._out.write(packed)
        self.offsets.append(self.offsets[-1] + len(packed))


def record_of(paper: Paper) -> bytes:
    """A paper's record before compression: a JSON line of its `FIELDS`."""
    return json.dumps([getattr(paper, name) for name in FIELDS], ensure_ascii=False).encode()


class RecordReader:
    """One record back from its bytes."""

    def __init__(self, dictionary: bytes) -> None:
        self._base = zlib.decompressobj(-15, dictionary)

    def __call__(self, packed: bytes) -> bytes:
        return self._base.copy().decompress(packed)


class PaperRecords(ByRow[Paper]):
    """doc_id -> Paper, decoding a record (compressed, in one memory-mapped blob) when it is first asked for."""

    def __init__(self, ids: Sequence[str], blob: Any, offsets: np.ndarray, rows: Mapping[str, int],
                 unpack: RecordReader) -> None:
        super().__init__(ids, rows)
        self._blob = blob
        self._offsets = offsets
        self._unpack = unpack
        self._made: dict[str, Paper] = {}

    def __getitem__(self, doc_id: str) -> Paper:
        paper = self._made.get(doc_id)
        if paper is None:
            row = self._rows[doc_id]
            record = json.loads(self._unpack(bytes(self._blob[int(self._offsets[row]):int(self._offsets[row + 1])])))
            paper = self._made[doc_id] = Paper(doc_id=doc_id, **dict(zip(FIELDS, record)))
        return paper
