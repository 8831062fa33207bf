"""The file of a collection's sentence vectors, a derived cache (rag_bot/store/caches.py: its folder and format).

One SQLite table in the `sentences` cache folder (`vectors.sqlite3`): a row per paper, its doc_id, the key
of what was embedded (rag_bot/store/sentences.py), its number of sentences and the packed vectors as a blob. They
were a metadata string of a Chroma collection, which SQLite keeps twice (the row and Chroma's string index) and in
base64: 9.2 KB a paper at a million papers' scale, against 2.7 KB here (bench/perf/sentence_file.py). SQLite, not a file
format of our own: several processes (the chat, an ingest, the CLI) read and write it at once, a row at a time, each
write a transaction. The file records the format of its rows (`PRAGMA user_version`): a file of another is emptied.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from rag_bot.store.caches import CacheOwner, DerivedCache

# The format is how a paper's vectors are packed (rag_bot/store/sentences.py: int8 codes, a scale per sentence).
SENTENCES = DerivedCache("sentences", format=1)
SENTENCE_FILE = "vectors.sqlite3"
# bench/perf/sentence_file.py, 20,000 real abstracts (6.3 sentences, 2.44 KB of vectors a paper): 2.74 KB a paper on
# disk with 16 KiB pages, 3.47 KB with SQLite's default 4 KiB (a row does not fit a page's remainder).
PAGE_SIZE = 16384
BATCH = 500  # ids per statement (SQLite's limit on parameters is 32,766)


def sentence_file(index: CacheOwner, any_format: bool = False) -> SentenceFile:
    """The sentence-vector file of a `PaperIndex`'s collection (not opened until used); `any_format` opens a file
    of whatever format without emptying it (to delete rows)."""
    return SentenceFile(SENTENCES.root(index) / SENTENCE_FILE, None if any_format else SENTENCES.format)


class SentenceFile:
    """A paper's packed sentence vectors by doc_id, in one SQLite file. `layout` names how the blobs are packed: a
    file of another layout is emptied when opened (None: any layout, to delete rows). Errors are the caller's (it
    is a cache: it logs them)."""

    def __init__(self, path: Path, layout: int | None) -> None:
        self.path = path
        self.layout = layout
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # one connection shared by a process's threads

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            try:
                db.execute(f"PRAGMA page_size={PAGE_SIZE}")  # takes effect only in a new file
                db.execute("PRAGMA journal_mode=WAL")  # readers go on while another process writes
                db.execute("CREATE TABLE IF NOT EXISTS vectors (doc_id TEXT PRIMARY KEY, key TEXT NOT NULL, "
                           "n INTEGER NOT NULL, data BLOB NOT NULL)")
                if self.layout is not None and db.execute("PRAGMA user_version").fetchone()[0] != self.layout:
                    with db:  # another layout's rows are never read as this one's
                        db.execute("BEGIN IMMEDIATE")
                        db.execute("DELETE FROM vectors")
                        db.execute(f"PRAGMA user_version={int(self.layout)}")
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    def get(self, ids: Sequence[str]) -> dict[str, tuple[str, int, bytes]]:
        """doc_id -> (key, sentences, packed vectors) of the ids the file holds."""
        out: dict[str, tuple[str, int, bytes]] = {}
        with self._lock:
            db = self._open()
            for start in range(0, len(ids), BATCH):
                part = list(ids[start:start + BATCH])
                marks = ",".join("?" * len(part))
                for doc_id, key, n, data in db.execute(
                        f"SELECT doc_id, key, n, data FROM vectors WHERE doc_id IN ({marks})", part):
                    out[doc_id] = (key, int(n), bytes(data))
        return out

    def put(self, rows: Iterable[tuple[str, str, int, bytes]]) -> int:
        """Write (doc_id, key, sentences, packed vectors) rows in one transaction, replacing a paper's old row;
        how many were written."""
        rows = list(rows)
        with self._lock:
            db = self._open()
            with db:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)
        return len(rows)

    def delete(self, ids: Sequence[str]) -> None:
        """Drop these papers' rows (a missing file is not created for it)."""
        if not ids or (self._db is None and not self.path.exists()):
            return
        with self._lock:
            db = self._open()
            with db:
                db.execute("BEGIN IMMEDIATE")
                for start in range(0, len(ids), BATCH):
                    part = list(ids[start:start + BATCH])
                    db.execute(f"DELETE FROM vectors WHERE doc_id IN ({','.join('?' * len(part))})", part)

    def count(self) -> int:
        with self._lock:
            return int(self._open().execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
