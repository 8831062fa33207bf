"""Chroma's vector files in a store folder: a copy saved before a write, put back when a failed write left them
damaged.

Chroma 1.5.9 keeps each collection's vectors in an HNSW folder named by its segment id (`header.bin`,
`data_level0.bin`, `length.bin`, `link_lists.bin`, `index_metadata.pickle`) and rewrites those files in place
every 1,000 added vectors. A disk that fills while it does leaves them truncated (measured on a 8.5 MB tmpfs: a
0-byte `index_metadata.pickle`, `data_level0.bin` cut at 917,504 of 2,058,128 bytes, `length.bin` at 4,096 of
4,912, `link_lists.bin` empty), and from then on Chroma refuses every read ("Error deserializing pickle file"),
space freed or not. Once Chroma has pruned its log the vectors are nowhere else: with the folder removed it opens an
empty index and every question silently finds nothing. So before an ingest's or an import's first write the folders
are copied aside (`SAVED`, in the store folder), and a damaged folder is put back from the copy; Chroma then
replays its log since the copy, which it keeps: it prunes only up to the seq id its `max_seq_id` table holds for
the segment, and only a finished rewrite moves that (a copy whose seq id has moved since is refreshed after each
write call, and never put back).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import sqlite3
import struct
import uuid
from pathlib import Path

log = logging.getLogger(__name__)


SAVED = "rag-bot-vectors.saved"  # in the store folder, beside the segment folders (a rename puts one back)

HEADER = "header.bin"
PICKLE = "index_metadata.pickle"
_DATA, _LENGTHS = "data_level0.bin", "length.bin"

# hnswlib's header as Chroma 1.5.9 writes it (100 bytes): a format version, then offsetLevel0, max_elements,
# cur_element_count, size_data_per_element, ...
_HEADER_FORMAT = "<iQQQQ"
_HEADER_SIZE = 100

_FICLONE = 0x40049409  # Linux's reflink ioctl: a copy that shares the blocks on btrfs and XFS


def segment_folders(storage: Path) -> list[Path]:
    """The store folder's HNSW segment folders (named by a segment's UUID)."""
    out = []
    for entry in sorted(storage.iterdir()) if storage.is_dir() else []:
        try:
            uuid.UUID(entry.name)
        except ValueError:
            continue
        if entry.is_dir():
            out.append(entry)
    return out


def damage(folder: Path) -> str | None:
    """What is wrong with a segment folder's files, or None when they are whole (sizes and the pickle's end are
    checked: a truncated file is what a failed rewrite leaves)."""
    header = folder / HEADER
    if not header.exists():
        return None if not any(folder.iterdir()) else f"{HEADER} is missing"
    raw = header.read_bytes()
    if len(raw) != _HEADER_SIZE:
        return f"{HEADER} is {len(raw)} bytes, not {_HEADER_SIZE}"
    _, _, _, count, per_element = struct.unpack_from(_HEADER_FORMAT, raw)
    for name, need in ((_DATA, count * per_element), (_LENGTHS, 4 * count)):
        size = (folder / name).stat().st_size if (folder / name).exists() else -1
        if size < need:
            return f"{name} is {max(size, 0):,} bytes, {need:,} expected"
    pickle = folder / PICKLE
    if count and not pickle.exists():
        return f"{PICKLE} is missing"
    if pickle.exists():
        size = pickle.stat().st_size
        with open(pickle, "rb") as handle:
            handle.seek(max(size - 1, 0))
            if size == 0 or handle.read(1) != b".":  # every pickle ends with STOP
                return f"{PICKLE} is cut short ({size:,} bytes)"
    return None


def _seq_ids(storage: Path) -> dict[str, int]:
    """Each segment's seq id in Chroma's `max_seq_id` table, read-only (how far its files are known written)."""
    db = storage / "chroma.sqlite3"
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
            return {str(s): int(n) for s, n in conn.execute("SELECT segment_id, seq_id FROM max_seq_id")}
    except (sqlite3.Error, ValueError, TypeError) as exc:
        log.debug("reading the segments' seq ids failed: %s", exc)
        return {}


def collection_names(storage: Path) -> dict[str, str]:
    """Segment id -> the name of its collection (for messages; empty when Chroma's file cannot be read)."""
    db = storage / "chroma.sqlite3"
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
            return {str(s): str(n) for s, n in conn.execute(
                "SELECT segments.id, collections.name FROM segments JOIN collections ON "
                "segments.collection = collections.id")}
    except sqlite3.Error:
        return {}


def _copy(source: Path, target: Path) -> None:
    """A file copied (shared blocks where the file system can, else its bytes), then flushed to disk."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        try:
            fcntl.ioctl(dst.fileno(), _FICLONE, src.fileno())
        except OSError:
            shutil.copyfileobj(src, dst, 1 << 20)
        dst.flush()
        os.fsync(dst.fileno())


def _copy_folder(source: Path, target: Path) -> None:
    """`source`'s files copied into a new `target` (built beside it, then renamed: a copy is there whole or not)."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for entry in source.iterdir():
            if entry.is_file():
                _copy(entry, partial / entry.name)
        shutil.rmtree(target, ignore_errors=True)
        os.rename(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


class SavedVectors:
    """The store folder's HNSW folders as they were before a write, with the seq id each was written up to."""

    def __init__(self, storage: Path) -> None:
        self.storage = storage
        self.folder = storage / SAVED

    @property
    def exists(self) -> bool:
        """Whether a copy is saved."""
        return (self.folder / "seq_ids.json").exists()

    def save(self) -> None:
        """Copy every segment folder aside (replacing an older copy); OSError when it cannot (nothing written)."""
        self.discard()
        try:
            self.folder.mkdir()
            seq = _seq_ids(self.storage)
            for segment in segment_folders(self.storage):
                _copy_folder(segment, self.folder / segment.name)
            self._write_seq({name: seq.get(name) for name in self._saved()})
        except BaseException:
            self.discard()
            raise

    def refresh(self) -> None:
        """Copy again the folders Chroma has rewritten whole since they were saved (their seq id moved), so that
        the copy is always one Chroma's log can be replayed onto."""
        if not self.exists:
            return
        saved, now = self._read_seq(), _seq_ids(self.storage)
        moved = [name for name in saved if now.get(name) != saved[name]]
        new = [s.name for s in segment_folders(self.storage) if s.name not in saved]
        for name in moved + new:
            if damage(self.storage / name) is None:
                _copy_folder(self.storage / name, self.folder / name)
                saved[name] = now.get(name)
        if moved or new:
            self._write_seq(saved)

    def restore_damaged(self) -> tuple[list[str], list[str]]:
        """Put back the damaged segment folders whose saved copy Chroma's log can be replayed onto; returns (what
        was put back, what is damaged and could not be), each as `<collection>: <why>`."""
        saved = self._read_seq() if self.exists else {}
        now, names = _seq_ids(self.storage), collection_names(self.storage)
        restored, left = [], []
        for segment in segment_folders(self.storage):
            why = damage(segment)
            if why is None:
                continue
            label = f"{names.get(segment.name, segment.name)} ({why})"
            copy = self.folder / segment.name
            if copy.is_dir() and segment.name in saved and now.get(segment.name) == saved[segment.name]:
                _swap_in(copy, segment)
                restored.append(label)
            elif segment.name not in now:
                # Never written whole: Chroma's log still holds every vector of it, and replays them into new files.
                shutil.rmtree(segment)
                segment.mkdir()
                restored.append(label)
            else:
                left.append(label)
        return restored, left

    def discard(self) -> None:
        """Delete the copy."""
        for path in (self.folder, self.folder.with_name(self.folder.name + ".partial")):
            shutil.rmtree(path, ignore_errors=True)

    def _saved(self) -> list[str]:
        return [p.name for p in self.folder.iterdir() if p.is_dir() and not p.name.endswith(".partial")]

    def _read_seq(self) -> dict[str, int | None]:
        try:
            return dict(json.loads((self.folder / "seq_ids.json").read_text()))
        except (OSError, ValueError):
            return {}

    def _write_seq(self, seq: dict[str, int | None]) -> None:
        part = self.folder / "seq_ids.json.partial"
        part.write_text(json.dumps(seq))
        os.rename(part, self.folder / "seq_ids.json")


def _swap_in(copy: Path, segment: Path) -> None:
    """The saved copy takes the damaged folder's place by renames (no new space needed on a full disk), then is
    copied again for a later failure when there is room (else that segment is no longer saved)."""
    damaged = segment.with_name(segment.name + ".damaged")
    shutil.rmtree(damaged, ignore_errors=True)
    os.rename(segment, damaged)
    os.rename(copy, segment)
    shutil.rmtree(damaged)
    try:
        _copy_folder(segment, copy)
    except OSError as exc:
        log.debug("could not save the restored vectors again: %s", exc)
