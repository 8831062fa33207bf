"""Store repair: `rag-bot ingest --rebuild` sets a damaged store aside for a fresh one.

Only the store moves: the saved conversations (kept in the store folder when RAG_BOT_DATA is unset) and the ingest
lock stay where they are, a rebuild refuses while an ingest holds that lock, and nothing is moved when the store
folder cannot be written (the fix then is its permissions, not a rebuild).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
from contextlib import ExitStack
from pathlib import Path

from chromadb.errors import NotFoundError

from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.chroma import (
    LOCK_FILE,
    STORE_FAULTS,
    folder_lock,
    forget_client,
    not_writable,
    open_client,
    store_error,
    store_label,
)
from rag_bot.store.conversations import FILE_NAME as CONVERSATIONS_FILE
from rag_bot.store.reads import SENTENCES_SUFFIX
from rag_bot.store.tuning import MODELS

log = logging.getLogger(__name__)


def _not_the_store(settings: Settings) -> set[str]:
    """Names in the store folder that are not the store, so a rebuild leaves them where they are: the ingest lock,
    the tuned models (`rag-bot tune`) and, when the conversations live in the store folder (RAG_BOT_DATA unset) or below it, their files."""
    keep = {LOCK_FILE, MODELS}  # a tuned model is not the store: the store's settings may point at it
    storage, data = Path(settings.storage).absolute(), Path(settings.data_path()).absolute()
    if data == storage:
        keep |= {CONVERSATIONS_FILE + suffix for suffix in ("", "-wal", "-shm", "-journal")}
    elif data.is_relative_to(storage):
        keep.add(data.relative_to(storage).parts[0])
    return keep


def rebuild_store(settings: Settings) -> str:
    """Set the store aside for a fresh one; returns what was done, for people.

    In a folder, the store's files are moved to `<storage>.broken-<timestamp>` (never deleted) while the ingest lock
    is held (a rebuild refuses while an ingest writes); the saved conversations and the lock stay where they are. On
    a Chroma server the collections are deleted (they hold nothing the sources cannot give back)."""
    if settings.chroma_url:
        forget_client(settings)
        return _rebuild_on_server(settings)
    storage = Path(settings.storage)
    keep = _not_the_store(settings)
    if not storage.is_dir() or not any(p.name not in keep for p in storage.iterdir()):
        return f"no store in {storage} yet; creating one"
    with ExitStack() as stack:
        try:
            held = stack.enter_context(folder_lock(storage, wait=False))
        except OSError as exc:
            raise store_error(settings, "write", exc) from exc
        if not held:
            raise StoreError(
                f"another `rag-bot ingest` is writing the store in {storage}; nothing was moved: wait for it to "
                f"finish, then run the rebuild again"
            )
        forget_client(settings)  # this process's cached connection must not outlive the files it had open
        return _move_aside(settings, storage, keep)


def _move_aside(settings: Settings, storage: Path, keep: set[str]) -> str:
    """Move the store's entries (all but `keep`) into a new `<storage>.broken-<time>` folder; on a failure, those
    moved already go back, so the store is whole either way."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = storage.with_name(f"{storage.name}.broken-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = storage.with_name(f"{storage.name}.broken-{stamp}-{n}")
    moved: list[Path] = []
    try:
        aside.mkdir()
        for entry in sorted(storage.iterdir()):
            if entry.name not in keep:
                try:
                    os.rename(entry, aside / entry.name)  # atomic: an entry is here or there, whole
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    shutil.move(str(entry), str(aside / entry.name))  # the store folder is a mount point
                moved.append(entry)
    except OSError as exc:
        for entry in reversed(moved):
            shutil.move(str(aside / entry.name), str(entry))
        if aside.is_dir() and not any(aside.iterdir()):
            aside.rmdir()
        if not_writable(exc):
            raise store_error(settings, "write", exc) from exc
        raise StoreError(f"cannot move the store {storage} aside to {aside}: {exc.strerror or exc}; nothing was "
                         f"moved") from exc
    kept = " (the saved conversations stay where they are)" if keep & {CONVERSATIONS_FILE} and \
        (storage / CONVERSATIONS_FILE).exists() else ""
    return f"moved the old store to {aside} (delete it once the new one works){kept}"


def _rebuild_on_server(settings: Settings) -> str:
    """Delete the collections on the Chroma server (a missing one is fine; an unreachable server is an error)."""
    client = open_client(settings)
    for suffix in ("_papers", "_chunks", SENTENCES_SUFFIX):
        try:
            client.delete_collection(f"{settings.collection}{suffix}")
        except (NotFoundError, ValueError) as exc:  # a missing collection is fine
            log.debug("delete_collection %s: %s", suffix, exc)
        except STORE_FAULTS as exc:
            raise store_error(settings, "write", exc) from exc
    return f"deleted the collections {settings.collection}_papers, _chunks and _sentences " \
           f"on the {store_label(settings)}"
