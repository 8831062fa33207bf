"""The papers' filterable fields (year, venue, source, authors) as arrays, one row per paper in the lexicon's order,
so a filter is a few array operations over the collection's distinct values instead of a decode of every record.

Venue, source and author are substring matches (case-insensitive, `Filters.matches`): each is matched once against
its field's distinct values, joined into one string and searched by `str.find` (C speed whatever their number),
then the matching value codes select rows. Saved beside the lexical cache as numpy arrays and one JSON file, and
memory-mapped at load.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from rag_bot.types import Filters, Paper

_NO_YEAR = 0
_SEP = "\x1f"  # between distinct values in the searched string: no field holds it


class Vocabulary:
    """Distinct values of one field, and the lower-cased search string over them (made at first search)."""

    def __init__(self, values: list[str]) -> None:
        self.values = values
        self._joined: tuple[str, np.ndarray] | None = None

    def codes_containing(self, part: str) -> np.ndarray:
        """Codes of the values holding `part` (lower-cased) anywhere."""
        part = part.lower()
        if not part or _SEP in part or not self.values:
            return np.zeros(0, dtype=np.int32)
        if self._joined is None:
            lowered = [v.lower() for v in self.values]  # (lower() may change a value's length: search these)
            starts = np.cumsum([0] + [len(v) + 1 for v in lowered[:-1]], dtype=np.int64)
            self._joined = (_SEP.join(lowered), starts)
        joined, starts = self._joined
        found: list[int] = []
        at = joined.find(part)
        while at >= 0:
            code = int(np.searchsorted(starts, at, side="right")) - 1
            found.append(code)
            next_start = int(starts[code + 1]) if code + 1 < len(starts) else len(joined)
            at = joined.find(part, next_start)
        return np.asarray(found, dtype=np.int32)


class Columns:
    """Rows of filterable fields: year, venue code, source code, and each paper's author codes (CSR)."""

    def __init__(self, years: np.ndarray, venue: np.ndarray, source: np.ndarray, author_ptr: np.ndarray,
                 author_ids: np.ndarray, vocab: dict[str, list[str]]) -> None:
        self.years, self.venue, self.source = years, venue, source
        self.author_ptr, self.author_ids = author_ptr, author_ids
        self.vocab = {name: Vocabulary(values) for name, values in vocab.items()}

    @classmethod
    def build(cls, papers: Iterable[Paper]) -> Columns:
        """The columns of papers, in their order."""
        codes: dict[str, dict[str, int]] = {"venue": {}, "source": {}, "author": {}}
        years: list[int] = []
        venue: list[int] = []
        source: list[int] = []
        ptr = [0]
        authors: list[int] = []

        def code(field: str, value: str | None) -> int:
            if not value:
                return -1
            table = codes[field]
            return table.setdefault(value, len(table))

        for paper in papers:
            years.append(paper.year if paper.year is not None else _NO_YEAR)
            venue.append(code("venue", paper.venue))
            source.append(code("source", paper.source))
            authors.extend(c for c in (code("author", a) for a in paper.authors) if c >= 0)
            ptr.append(len(authors))
        return cls(np.asarray(years, dtype=np.int32), np.asarray(venue, dtype=np.int32),
                   np.asarray(source, dtype=np.int32), np.asarray(ptr, dtype=np.int64),
                   np.asarray(authors, dtype=np.int32), {k: list(v) for k, v in codes.items()})

    def __len__(self) -> int:
        return len(self.years)

    def counts(self, field: str) -> dict[str, int]:
        """Papers per distinct value of a field (`venue` or `source`)."""
        column = self.venue if field == "venue" else self.source
        values = self.vocab[field].values
        per_code = np.bincount(column[column >= 0], minlength=len(values)).tolist() if values else []
        return {value: n for value, n in zip(values, per_code) if n}

    def mask(self, filters: Filters) -> np.ndarray:
        """Which rows pass every filter set (`Filters.matches`, row by row)."""
        keep = np.ones(len(self), dtype=bool)
        if filters.year_min is not None:
            keep &= (self.years != _NO_YEAR) & (self.years >= filters.year_min)
        if filters.year_max is not None:
            keep &= (self.years != _NO_YEAR) & (self.years <= filters.year_max)
        for field, column in (("venue", self.venue), ("source", self.source)):
            part = getattr(filters, field)
            if part:
                keep &= np.isin(column, self.vocab[field].codes_containing(part))
        if filters.author:
            hit = np.isin(self.author_ids, self.vocab["author"].codes_containing(filters.author))
            per_row = np.add.reduceat(np.append(hit, False).astype(np.int32), self.author_ptr[:-1]) \
                if len(self) else np.zeros(0, dtype=np.int32)
            # reduceat gives the value at a row's start for a row without authors: such rows match nothing.
            keep &= (per_row > 0) & (np.diff(self.author_ptr) > 0)
        return keep

    def save(self, folder: Path) -> None:
        """Write the columns into a folder (numpy arrays and one JSON file)."""
        for name in ("years", "venue", "source", "author_ptr", "author_ids"):
            np.save(folder / f"col_{name}.npy", getattr(self, name))
        values = {name: vocab.values for name, vocab in self.vocab.items()}
        (folder / "col_vocab.json").write_text(json.dumps(values, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> Columns:
        """The columns saved in a folder, memory-mapped."""
        def array(name: str) -> np.ndarray:
            return np.load(folder / f"col_{name}.npy", mmap_mode="r")

        vocab = json.loads((folder / "col_vocab.json").read_text(encoding="utf-8"))
        return cls(array("years"), array("venue"), array("source"), array("author_ptr"), array("author_ids"), vocab)


class Allowed:
    """The papers a filter lets through: a row mask over the lexicon's ids, with set-like membership."""

    def __init__(self, ids: Sequence[str], rows: Mapping[str, int], mask: np.ndarray) -> None:
        self.ids, self.rows, self.mask = ids, rows, mask
        self._count = int(np.count_nonzero(mask))

    def __contains__(self, doc_id: object) -> bool:
        row = self.rows.get(doc_id) if isinstance(doc_id, str) else None
        return row is not None and bool(self.mask[row])

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        ids = self.ids
        return (ids[int(r)] for r in np.flatnonzero(self.mask))
