"""Derived caches: what can be computed again from the store, each kind in its own folder, keyed by what it is
derived from, versioned by its format, and saved whole.

Three kinds: the lexical side of retrieval (`lexicon`, rag_bot/retrieval/lexical/), the collection map (`map`,
rag_bot/surfaces/collection_map.py) and the answer-time sentence vectors (`sentences`, rag_bot/store/sentence_file.py).
Each kind has a folder beside the store (`<storage>/<kind>/<collection>/`) or, for a Chroma server, in the user's
cache folder (`$XDG_CACHE_HOME/rag-bot/<kind>/<server+collection>/`).

A `DerivedCache` names a kind and its format version (bumped when what is saved, or how it is computed, changes).
The lexicon and the map are folders named by a key, a hash of what they derive from (the collection's state,
`PaperIndex.state()`) and of the format, so a cache of another state or format is never read: it is computed again,
saved, and the others are removed. Such a folder is saved whole (`stage`): written into a temporary folder beside
its place, every file fsynced, then renamed into place, so a reader never sees half of one, and a process killed
while writing leaves the previous cache as it was. The sentence file is one SQLite file that several processes
write a row at a time: SQLite's transactions keep each write whole, and a file of another format is emptied.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rag_bot.settings import Settings
    from rag_bot.store.chroma import GuardedCollection

log = logging.getLogger(__name__)

DONE = "done"  # written last into a saved folder: caches saved before the rename was fsynced are checked by it
_TEMP = re.compile(r"\.tmp-(\d+)-")  # a temporary folder's name holds its writer's process id


class CacheOwner(Protocol):
    """What a cache needs of a `PaperIndex` (not imported: store/index.py imports this module)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def papers(self) -> GuardedCollection: ...


def cache_root(index: CacheOwner, kind: str) -> Path:
    """The folder of a collection's caches of one kind (`lexicon`, `map`, `sentences`), given its `PaperIndex`
    (not imported: store/index.py imports this module): beside the store, or for a Chroma server in the user's
    cache folder, named by the collection's own id (a server reached at another address, or restarted on another
    port, keeps its caches: at 100,000 papers a lexicon rebuild over HTTP took 111 s)."""
    settings = index.settings
    if settings.chroma_url:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag-bot" / kind
        server = hashlib.sha256(f"{index.papers.id}\x1f{settings.collection}".encode()).hexdigest()[:16]
        return base / server
    return Path(settings.storage) / kind / settings.collection


@dataclass(frozen=True)
class DerivedCache:
    """One kind of derived cache: the name of its folder and the version of its format."""

    kind: str
    format: int

    def root(self, index: CacheOwner) -> Path:
        """The folder of this kind's caches of a `PaperIndex`'s collection."""
        return cache_root(index, self.kind)

    def key(self, source: Mapping[str, object]) -> str:
        """The key of a cache derived from `source` (the collection's state, JSON data) in this format."""
        payload = json.dumps(dict(source) | {"format": self.format}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]

    def folder(self, index: CacheOwner, source: Mapping[str, object]) -> Path:
        """Where the cache derived from `source` is saved."""
        return self.root(index) / self.key(source)

    @staticmethod
    def saved(folder: Path) -> bool:
        """Whether a cache was saved whole in `folder`."""
        return (folder / DONE).exists()

    @contextmanager
    def stage(self, folder: Path, keep: bool = True) -> Iterator[Path]:
        """An empty folder to write the cache of `folder` into. When `keep` and the block ends without an error, it
        is fsynced and renamed to `folder` (replacing a save there, which the caller could not read), and the other
        caches of its kind are removed; otherwise it is removed. Where `folder` cannot be written (a read-only
        store), a private temporary folder: the cache is used, never kept."""
        tmp: Path | None = None
        if keep:
            try:
                folder.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-{os.getpid()}-", dir=folder.parent))
                tmp.chmod(0o755)  # mkdtemp's folder is the owner's alone; a cache is readable like the store beside it
            except OSError as exc:  # a read-only store still serves, computing its caches at each start
                log.warning("could not save the %s cache in %s: %s", self.kind, folder, exc)
        if tmp is None:
            keep, tmp = False, Path(tempfile.mkdtemp(prefix=f"rag-bot-{self.kind}-"))
        try:
            yield tmp
            if keep:
                try:
                    (tmp / DONE).write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
                    _sync(tmp)
                    _replace(tmp, folder)
                except OSError as exc:  # the cache was made and is used; only its save failed
                    log.warning("could not save the %s cache in %s: %s", self.kind, folder, exc)
                else:
                    _remove_others(folder)
                    log.info("%s cache saved in %s", self.kind, folder)
        finally:
            # What the caller loaded from a private folder stays readable: its files are mapped or read already.
            shutil.rmtree(tmp, ignore_errors=True)


def _sync(folder: Path) -> None:
    """fsync every file and folder under `folder`, so the rename never publishes a folder whose files a power cut
    could leave empty."""
    for path in [*folder.rglob("*"), folder]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _replace(tmp: Path, folder: Path) -> None:
    """Rename `tmp` to `folder`; a folder already there (unreadable, or an equal one another process just saved) is
    moved aside first and removed, so a reader finds the old folder, none, or the new one, never a mix."""
    try:
        os.rename(tmp, folder)
    except OSError:
        if not folder.exists():
            raise
        aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-{os.getpid()}-old-", dir=folder.parent))
        os.rename(folder, aside / "old")
        os.rename(tmp, folder)
        shutil.rmtree(aside, ignore_errors=True)
    fd = os.open(folder.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_others(folder: Path) -> None:
    """Remove the caches of other keys beside `folder`, and the temporary folders of writers no longer running."""
    for other in folder.parent.iterdir():
        if other == folder:
            continue
        if other.name.startswith("."):
            writer = _TEMP.search(other.name)
            if writer is None or process_running(int(writer.group(1))):
                continue
        shutil.rmtree(other, ignore_errors=True)


def process_running(pid: int) -> bool:
    """Whether a process of this id runs on this machine (a writer's temporary files are its own until it ends)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
