"""Chroma as the store sees it: a client for a folder or a `chroma run` server, the ingest lock of a folder, and every store fault turned into one line that says what failed, where and what to do (`GuardedCollection` wraps each collection so)."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import chromadb
import httpx
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError

from rag_bot.errors import StoreError
from rag_bot.settings import Settings, store_label  # noqa: F401 (re-exported: the store's label)
from rag_bot.text import mask_credentials, one_line

log = logging.getLogger(__name__)


RECOVERY = "run `rag-bot doctor` to check it, or `rag-bot ingest --rebuild` to rebuild it from the sources"


# What a failing store raises (chromadb's own errors, sqlite's, the file system's, and httpx's when a Chroma server
# cannot be reached: chromadb's HTTP client lets httpx.ConnectError and the like through); anything else is a bug.
STORE_FAULTS: tuple[type[BaseException], ...] = (ChromaError, OSError, sqlite3.Error, httpx.HTTPError)


_WRITES = frozenset({"add", "upsert", "update", "delete"})


_DAMAGED = ("malformed", "not a database", "(code: 11)", "(code: 26)", "corrupt")


# A store the user may not write (a read-only folder or file): sqlite's READONLY codes as chromadb's Rust core
# reports them (8, and 1544 for a read-only folder), sqlite's and the OS's own words.
_READ_ONLY = ("readonly database", "(code: 8)", "(code: 1544)", "permission denied", "read-only file system",
              "os error 13", "os error 30")


_PERMISSION_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


# The ingest lock in a store folder (PaperIndex.writer_lock); it stays in place through a rebuild, so that two
# processes never each hold a lock on a different file.
LOCK_FILE = "rag-bot.lock"


def open_client(settings: Settings) -> Any:
    """A Chroma client: a server at `chroma_url`, else a persistent store in `storage`."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_url:
        url = urlparse(settings.chroma_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise StoreError(
                f"RAG_BOT_CHROMA_URL must look like http://host:port, got {mask_credentials(settings.chroma_url)!r}"
            )
        try:
            return chromadb.HttpClient(
                host=url.hostname,
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings,
            )
        except Exception as exc:  # chromadb raises plain ValueError/ConnectionError here
            log.debug("Chroma server client failed", exc_info=True)
            raise _unreachable(settings, exc) from exc
    try:
        settings.storage.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(settings.storage), settings=chroma_settings)
    except Exception as exc:
        log.debug("persistent Chroma client failed", exc_info=True)
        raise store_error(settings, "open", exc) from exc


def _unreachable(settings: Settings, exc: BaseException, action: str = "open") -> StoreError:
    """A Chroma server that does not answer (down, killed, wrong address): a retry fixes it, a rebuild would not."""
    again = "run the same ingest again (it finishes what is missing)" if action == "write" else "try again"
    return StoreError(
        f"cannot reach the Chroma server at {mask_credentials(settings.chroma_url or '')}: it is unreachable "
        f"({one_line(exc)}); check that it is running (`chroma run`) and that RAG_BOT_CHROMA_URL points to it, "
        f"then {again}"
    )


def not_writable(exc: BaseException) -> bool:
    """Whether a fault says the store may not be written (permissions or a read-only file system)."""
    if isinstance(exc, OSError) and exc.errno in _PERMISSION_ERRNOS:
        return True
    cause = str(exc).lower()
    return any(mark in cause for mark in _READ_ONLY)


def store_error(settings: Settings, action: str, exc: BaseException) -> StoreError:
    """A store fault as the one line a user sees: what failed, where, and what to do."""
    cause = one_line(exc)
    where = store_label(settings)
    if settings.chroma_url and isinstance(exc, httpx.TransportError):
        return _unreachable(settings, exc, action)
    if not settings.chroma_url and not_writable(exc) and _read_only_mount(settings.storage):
        # Chroma 1.5.9 writes to its file when it opens a store (measured: PersistentClient on a read-only mount
        # fails with "attempt to write a readonly database"), so even `stats` needs a writable mount; no chmod helps.
        return StoreError(
            f"the store in the {where} is on a read-only file system ({cause}); Chroma writes to its file even to "
            f"read it, so remount it read-write (or copy the folder to a writable place and set RAG_BOT_STORAGE to "
            f"the copy), then try again; the store needs no rebuild"
        )
    if not settings.chroma_url and not_writable(exc):
        # Rebuilding would fail the same way (and set a healthy store aside): the fix is the permissions.
        return StoreError(
            f"the store in the {where} cannot be written: permission denied ({cause}); give this user write "
            f"access to the folder and its files (e.g. `chmod -R u+w {settings.storage}`, or run rag-bot as their "
            f"owner), then try again; the store needs no rebuild"
        )
    if action == "write" and _disk_full(exc, cause):
        return StoreError(
            f"the store could not be written (disk full?): {cause} [{where}]; the index as it was before this "
            f"ingest is kept; free some space and run the same ingest again to finish it"
        )
    if action == "write":  # another cause: name it, without guessing a full disk
        return StoreError(
            f"the store could not be written: {cause} [{where}]; the index as it was before this ingest is kept; "
            f"run the same ingest again to finish it"
        )
    if not settings.chroma_url and (_disk_full(exc, cause, reading=True) or _nearly_full(settings.storage)):
        return StoreError(f"the disk holding the store in the {where} is full ({cause}); free some space, then try "
                          f"again; the store needs no rebuild")
    if "too many sql variables" in cause.lower():  # the request, not the store: nothing to repair
        return StoreError(f"the store in the {where} refused a request as too large ({cause}); the store is fine "
                          f"and needs no repair; narrow the filter and try again")
    if any(mark in cause for mark in _DAMAGED):
        return StoreError(f"the store in the {where} is damaged ({cause}); {RECOVERY}")
    verb = "opened" if action == "open" else "read"
    return StoreError(f"the store in the {where} could not be {verb}: {cause}; {RECOVERY}")


def _disk_full(exc: BaseException, cause: str, reading: bool = False) -> bool:
    # ENOSPC / EDQUOT / EFBIG from the OS; SQLITE_FULL, or the disk I/O error sqlite reports when a write past
    # a full disk (or a file-size limit) fails (a read's I/O error may be damage: not taken as a full disk).
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    marks = ("no space left", "disk is full", "quota") + (() if reading else ("disk i/o error", "file too large"))
    return any(mark in cause.lower() for mark in marks)


# Chroma applies its log when a store is opened or read, so on a full disk reads fail with causes that do not say
# so ("Failed to apply logs to the metadata segment"). The failed reads of the tmpfs runs behind
# tests/store/test_disk_full.py left 0.2 to 1.4 MB free, and one ingest batch of 256 papers writes about 1.5 MB: below
# 4 MiB free, a failed read is taken as the full disk it most likely is.
_NEARLY_FULL = 4 << 20


def _nearly_full(storage: Path) -> bool:
    try:
        stat = os.statvfs(storage)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < _NEARLY_FULL


def _read_only_mount(storage: Path) -> bool:
    try:
        return bool(os.statvfs(storage).f_flag & os.ST_RDONLY)
    except OSError:
        return False


@contextmanager
def folder_lock(storage: Path, wait: bool = True) -> Iterator[bool]:
    """The ingest lock of a store folder (`LOCK_FILE`, across processes): yields whether it is held (False when
    another process holds it and `wait` is False); OSError when the lock file cannot be opened."""
    fd = os.open(storage / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            held = True
        except OSError:
            held = False
        yield held
    finally:
        os.close(fd)


def forget_client(settings: Settings) -> None:
    """Drop chromadb's cached in-process system for this store: after a failed write its sqlite connection can
    hang every later write, and a rebuilt store must not reuse it."""
    from chromadb.api.shared_system_client import SharedSystemClient

    path = str(settings.storage) if not settings.chroma_url else None
    for identifier in list(SharedSystemClient._identifier_to_system):
        if path is None or identifier == path:
            SharedSystemClient._identifier_to_system.pop(identifier, None)
            SharedSystemClient._identifier_to_refcount.pop(identifier, None)


class GuardedCollection:
    """A Chroma collection whose faults arrive as one-line `StoreError`s (the retriever queries it directly)."""

    def __init__(self, collection: Any, index: Any) -> None:
        self._collection = collection
        self._index = index

    @property
    def name(self) -> str:
        return str(self._collection.name)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._collection, attr)
        if attr.startswith("_") or not callable(value):
            return value
        index = self._index

        def guarded(*args: Any, **kwargs: Any) -> Any:
            write = attr in _WRITES
            try:
                result = value(*args, **kwargs)
            except STORE_FAULTS as exc:
                log.debug("Chroma %s.%s failed", self.name, attr, exc_info=True)
                if write:
                    index.write_failed = True
                raise store_error(index.settings, "write" if write else "read", exc) from exc
            if write:
                index.after_write_call()
            return result

        return guarded
