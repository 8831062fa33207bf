"""Saved conversations: every answered turn in one SQLite file (`conversations.sqlite3` in `Settings.data_path()`).

A conversation belongs to an owner (the logged-in user, "" when the chat has no logins) and only its owner lists,
opens, extends or deletes it. Each saved answer gets a permalink token (random, unguessable) that fetches that
one answer read-only. Bad input (an unknown id, someone else's conversation) gives None / False, never an
exception. A file that cannot be opened or written (corrupt, read-only, full disk) is logged once as a warning and
turns saving off (`error` says why): the chat keeps answering, unsaved.
"""

from __future__ import annotations

import json
import logging
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rag_bot.types import Answer, Turn

log = logging.getLogger(__name__)

FILE_NAME = "conversations.sqlite3"
TITLE_CHARS = 80
MAX_LISTED = 200
_T = TypeVar("_T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    title TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_owner ON conversations (owner, updated);
CREATE TABLE IF NOT EXISTS turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    created REAL NOT NULL,
    link TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS turns_conversation ON turns (conversation, seq);
"""


@dataclass(frozen=True)
class Summary:
    """One conversation as the list shows it."""

    id: str
    title: str
    created: float
    updated: float
    turns: int


@dataclass(frozen=True)
class SavedTurn:
    """One saved turn: the exchange, its permalink token and when it was answered."""

    turn: Turn
    link: str
    time: float


def title_of(question: str) -> str:
    """A conversation's title: its first question on one line, cut to `TITLE_CHARS`."""
    text = " ".join(question.split())
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1].rstrip() + "…"


def _ok_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 100


class Conversations:
    """The store. Safe from many threads: each thread has its own connection (WAL lets reads run beside a write)."""

    def __init__(self, folder: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(folder) / FILE_NAME
        self.clock = clock
        self.error: str | None = None
        self._lock = threading.Lock()  # guards `error` (the first failure is logged once)
        self._ready = False
        self._local = threading.local()  # one connection per thread (`_connection`)

    @property
    def ok(self) -> bool:
        """False once the file failed to open or write: saving is off until restart."""
        return self.error is None

    # --- plumbing ---------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, opened at its first call (a connection per call would pay an open, and a
        checkpoint of the WAL at its close, on every saved turn)."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            return db
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10.0)
        try:
            db.execute("PRAGMA foreign_keys = ON")
            # WAL with NORMAL sync: no fsync on every turn (a power cut may lose the last turns, never corrupt)
            db.execute("PRAGMA synchronous = NORMAL")
            if not self._ready:
                db.execute("PRAGMA journal_mode = WAL")
                db.executescript(SCHEMA)
                self._ready = True
        except BaseException:
            db.close()
            raise
        self._local.db = db
        return db

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = self._connection()
        try:
            with db:  # one transaction: committed on success, rolled back on an exception
                yield db
        except (sqlite3.Error, OSError):
            self._local.db = None  # a connection that failed is not used again
            db.close()
            raise

    def _run(self, what: str, work: Callable[[sqlite3.Connection], _T], failed: _T) -> _T:
        """`work` on a connection; on a broken or unwritable file: `failed`, with one warning for the process."""
        if self.error is not None:
            return failed
        try:
            with self._db() as db:
                return work(db)
        except (sqlite3.Error, OSError, ValueError) as exc:
            with self._lock:
                first = self.error is None
                self.error = f"{type(exc).__name__}: {exc}"
            if first:
                log.warning("saved conversations are off: cannot %s in %s (%s); the chat keeps answering without "
                            "saving", what, self.path, self.error)
            return failed

    # --- conversations ----------------------------------------------------------------------------

    def create(self, owner: str, question: str) -> str | None:
        """A new (empty) conversation of `owner` titled by its first question; its id, or None if saving is off."""
        if not isinstance(owner, str) or not isinstance(question, str):
            return None
        conversation = secrets.token_urlsafe(12)
        now = self.clock()

        def work(db: sqlite3.Connection) -> str:
            db.execute("INSERT INTO conversations (id, owner, title, created, updated) VALUES (?, ?, ?, ?, ?)",
                       (conversation, owner, title_of(question), now, now))
            return conversation

        return self._run("create a conversation", work, None)

    def append(self, conversation: str, owner: str, question: str, answer: Answer | None) -> str | None:
        """Save one answered turn at the end of `owner`'s conversation; its permalink token, or None (not
        `owner`'s conversation, unknown, or saving is off)."""
        if not _ok_id(conversation) or not isinstance(owner, str) or not isinstance(question, str):
            return None
        link = secrets.token_urlsafe(12)
        now = self.clock()
        body = json.dumps(answer.model_dump() if answer is not None else None)

        def work(db: sqlite3.Connection) -> str | None:
            found = db.execute("UPDATE conversations SET updated = ? WHERE id = ? AND owner = ?",
                               (now, conversation, owner)).rowcount
            if not found:
                return None
            db.execute("INSERT INTO turns (conversation, question, answer, created, link) VALUES (?, ?, ?, ?, ?)",
                       (conversation, question, body, now, link))
            return link

        return self._run("save a turn", work, None)

    def recent(self, owner: str, limit: int = MAX_LISTED) -> list[Summary]:
        """`owner`'s conversations that hold a turn, the most recently extended first."""
        if not isinstance(owner, str):
            return []

        def work(db: sqlite3.Connection) -> list[Summary]:
            rows = db.execute(
                "SELECT c.id, c.title, c.created, c.updated, COUNT(t.seq) FROM conversations c "
                "JOIN turns t ON t.conversation = c.id WHERE c.owner = ? "
                "GROUP BY c.id ORDER BY c.updated DESC, MAX(t.seq) DESC LIMIT ?", (owner, limit)).fetchall()
            return [Summary(id=r[0], title=r[1], created=r[2], updated=r[3], turns=r[4]) for r in rows]

        return self._run("list conversations", work, [])

    def load(self, conversation: str, owner: str) -> list[SavedTurn] | None:
        """The turns of `owner`'s conversation in order; None if unknown or someone else's."""
        if not _ok_id(conversation) or not isinstance(owner, str):
            return None

        def work(db: sqlite3.Connection) -> list[SavedTurn] | None:
            if db.execute("SELECT 1 FROM conversations WHERE id = ? AND owner = ?",
                          (conversation, owner)).fetchone() is None:
                return None
            rows = db.execute("SELECT question, answer, link, created FROM turns WHERE conversation = ? "
                              "ORDER BY seq", (conversation,)).fetchall()
            return [SavedTurn(turn=_turn(q, a), link=link, time=when) for q, a, link, when in rows]

        return self._run("read a conversation", work, None)

    def delete(self, conversation: str, owner: str) -> bool:
        """Delete `owner`'s conversation with its turns (and their permalinks); False if unknown or not theirs."""
        if not _ok_id(conversation) or not isinstance(owner, str):
            return False

        def work(db: sqlite3.Connection) -> bool:
            return bool(db.execute("DELETE FROM conversations WHERE id = ? AND owner = ?",
                                   (conversation, owner)).rowcount)

        return self._run("delete a conversation", work, False)

    def shared(self, link: str) -> SavedTurn | None:
        """The answer behind a permalink token (anyone holding the token may read it); None if unknown."""
        if not _ok_id(link):
            return None

        def work(db: sqlite3.Connection) -> SavedTurn | None:
            row = db.execute("SELECT question, answer, link, created FROM turns WHERE link = ?", (link,)).fetchone()
            return SavedTurn(turn=_turn(row[0], row[1]), link=row[2], time=row[3]) if row else None

        return self._run("read a permalink", work, None)


def _turn(question: str, body: str) -> Turn:
    """A saved turn back as a `Turn`; an answer that no longer validates is dropped (the question stays)."""
    try:
        data = json.loads(body)
        answer = Answer.model_validate(data) if data is not None else None
    except ValueError:  # json.JSONDecodeError and pydantic.ValidationError are ValueErrors
        log.warning("a saved answer could not be read back; showing its question only")
        answer = None
    return Turn(question=question, answer=answer)
