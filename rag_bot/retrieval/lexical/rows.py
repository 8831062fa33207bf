"""doc_id <-> row of the lexical cache's arrays, saved as sorted fixed-width arrays and memory-mapped, so a process
start reads no list of every id and builds no dictionary of them (at a million papers, a JSON list and a dict of
the ids took about a second of every start): a row's id is an array read, an id's row a binary search.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar, overload

import numpy as np

_V = TypeVar("_V")


class IdTable(Sequence[str]):
    """The doc_ids in row order (`ids[row]`), and `rows`, their row by doc_id."""

    def __init__(self, ids: np.ndarray, sorted_ids: np.ndarray, order: np.ndarray) -> None:
        self._ids, self._sorted, self._order = ids, sorted_ids, order
        self.rows = RowLookup(self)

    @classmethod
    def build(cls, ids: Sequence[str]) -> IdTable:
        """The table of ids given in row order."""
        encoded = np.array([d.encode("utf-8") for d in ids], dtype=bytes) if len(ids) else np.zeros(0, dtype="S1")
        order = np.argsort(encoded, kind="stable").astype(np.int64)
        return cls(encoded, encoded[order], order)

    def save(self, folder: Path) -> None:
        """Write the table into a folder (three numpy arrays)."""
        for name, array in (("ids", self._ids), ("ids_sorted", self._sorted), ("ids_order", self._order)):
            np.save(folder / f"{name}.npy", array)

    @classmethod
    def load(cls, folder: Path) -> IdTable:
        """The table saved in a folder, memory-mapped."""
        return cls(*(np.load(folder / f"{name}.npy", mmap_mode="r") for name in ("ids", "ids_sorted", "ids_order")))

    def row(self, doc_id: str) -> int | None:
        """The row of a doc_id, None when the table lacks it."""
        key = doc_id.encode("utf-8")
        if not len(self._sorted) or len(key) > self._sorted.dtype.itemsize:
            return None
        at = int(np.searchsorted(self._sorted, key))
        if at < len(self._sorted) and self._sorted[at] == key:
            return int(self._order[at])
        return None

    @overload
    def __getitem__(self, row: int) -> str: ...

    @overload
    def __getitem__(self, row: slice) -> list[str]: ...

    def __getitem__(self, row: int | slice) -> str | list[str]:
        if isinstance(row, slice):
            return [bytes(d).decode("utf-8") for d in self._ids[row]]
        return bytes(self._ids[row]).decode("utf-8")

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return (bytes(d).decode("utf-8") for d in self._ids)


class RowLookup(Mapping[str, int]):
    """doc_id -> row, by binary search in the table's sorted ids."""

    def __init__(self, table: IdTable) -> None:
        self._table = table

    def __getitem__(self, doc_id: str) -> int:
        row = self._table.row(doc_id) if isinstance(doc_id, str) else None
        if row is None:
            raise KeyError(doc_id)
        return row

    def get(self, doc_id: object, default: int | None = None) -> int | None:  # type: ignore[override]
        row = self._table.row(doc_id) if isinstance(doc_id, str) else None
        return default if row is None else row

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and self._table.row(doc_id) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


class ByRow(Mapping[str, _V]):
    """A mapping keyed by doc_id over rows stored in arrays (row n = ids[n]); a subclass reads a row's value."""

    def __init__(self, ids: Sequence[str], rows: Mapping[str, int]) -> None:
        self._rows = rows
        self._ids = ids

    def __getitem__(self, doc_id: str) -> _V:
        raise NotImplementedError

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)
