"""The store's base: a connection to the two Chroma collections of a collection name (papers and chunks), the
embedder and chunker it writes with (loaded on first use), what identifies its content (`state`), and the record
of which model and which ingest last wrote it. `PaperReads` (reads.py) reads through one, and `PaperIndex` (index.py)
holds one of each."""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from llama_index.core.node_parser import SentenceSplitter

from rag_bot.errors import StoreError
from rag_bot.interfaces import Embedder
from rag_bot.settings import Settings
from rag_bot.store.caches import process_running
from rag_bot.store.chroma import (
    GuardedCollection,
    folder_lock,
    forget_client,
    open_client,
    store_error,
)
from rag_bot.store.embedders import EMBEDDER_URL, RecordedModel, embedder_name, make_embedder, served_record
from rag_bot.store.embedding import DIMENSIONS, MODEL_NAME
from rag_bot.store.local_embedding import folder_mismatch, weights_digest
from rag_bot.store.segments import SavedVectors, damage, segment_folders

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import GetResult

log = logging.getLogger(__name__)


# The papers collection's metadata: a generation that changes with every ingest that writes ("writing-..."
# while it runs), and the paper/chunk totals a finished ingest left (open skips its orphan scan when they hold).
GENERATION = "rag_bot_generation"


EMBEDDER = "rag_bot_embedder"  # the model the collection's vectors were made by
# A model folder's vectors are also recorded by the folder's path and the sha256 of its weights (weights_digest in
# rag_bot/store/local_embedding.py): the name alone let two folders of one name mix their vectors (issue 35).
EMBEDDER_FOLDER, EMBEDDER_WEIGHTS = "rag_bot_embedder_folder", "rag_bot_embedder_weights"


TOTALS = ("rag_bot_papers", "rag_bot_chunks")


# Candidates Chroma's HNSW search explores (its `ef_search`; Chroma's default is 100). At 100 a question's 40 nearest
# chunks were not the same from one process to the next for 7 % of 1,925 questions on 3,201 papers: Chroma re-adds
# the vectors written since its last save (every 1,000) when a store opens, in an order that changes, and the graph
# and what an approximate search misses change with it. It found 0.97-0.99 of the exact 40 on average, 0.18 for
# the worst question at 22,166 papers. At 1,000: 0.999 of them, the same 40 in both processes for every question,
# at both sizes, for 3-4 ms more a search (2,000 and 4,000 gain less than a thousandth for 9 and 18 ms more;
# bench/eval/hnsw_search.py, docs/benchmarks.md).
EF_SEARCH = 1000


# What an import replaces is saved in rag-bot-import-<pid>-<random>.backup.jsonl.gz (rag_bot/store/portable.py):
# one whose process is gone (killed) is deleted by the next import or open.
BACKUP_GLOB = "rag-bot-import-*.backup.jsonl.gz"


def backup_folder(settings: Settings) -> Path:
    """Where an import's backup goes: the store folder (a folder store), else the temporary folder."""
    return Path(settings.storage) if not settings.chroma_url else Path(tempfile.gettempdir())


def remove_stale_backups(settings: Settings) -> list[Path]:
    """Delete the backups of imports whose process is gone (killed); returns them."""
    gone = []
    for path in backup_folder(settings).glob(BACKUP_GLOB):
        pid = path.name.split("-")[3]
        if pid.isdigit() and not process_running(int(pid)):
            path.unlink(missing_ok=True)
            gone.append(path)
    return gone


READ_BATCH = 2000


def search_widely(collection: Collection) -> None:
    """Set a collection's HNSW search to explore `EF_SEARCH` candidates (a store made before this, or by Chroma's
    defaults, explores 100), so a question's nearest records are all but exactly the true ones and the same in every
    process. Leaves a wider setting alone, and a collection that cannot be changed as it is."""
    hnsw = collection.configuration.get("hnsw") or {}
    if not hnsw or int(hnsw.get("ef_search") or 0) >= EF_SEARCH:
        return
    try:
        collection.modify(configuration={"hnsw": {"ef_search": EF_SEARCH}})
    except Exception:  # noqa: BLE001 - answering still works at the narrower search
        log.warning("could not widen the vector search of %s (questions may rank near neighbours differently "
                    "from one run to the next)", collection.name, exc_info=log.isEnabledFor(logging.DEBUG))


class StoreState(TypedDict):
    """What identifies a collection's content (`PaperIndex.state`), the key of every cache derived from it."""

    papers_id: str
    chunks_id: str
    papers: int
    chunks: int
    generation: str | int | float | bool | None  # of the last ingest that wrote (a Chroma metadata value)


class ChromaStore:
    """Two Chroma collections, `<name>_papers` and `<name>_chunks`, guarded so their faults are one line."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        self.write_failed = False
        self._splitter: SentenceSplitter | None = None
        # Part of every paper's fingerprint: a change of model or chunking re-indexes everything.
        self.index_version = f"{embedder_name(settings)}/{settings.max_tokens}/{settings.chunk_size}/" \
            f"{settings.chunk_overlap}/v2" \
            + ("-mean" if settings.paper_vector == "mean" else "")
        # A folder store's vector files are copied aside before a write and put back if it damages them
        # (rag_bot/store/segments.py); `repaired` says what an open put back.
        self.saved = None if settings.chroma_url else SavedVectors(Path(settings.storage))
        self._saving = False
        self.repaired = self._repair_vectors()
        self._open()
        self.checked_read(self.count)

    def checked_read(self, read: Callable[[], object]) -> None:
        """A first read of the store (its count, or what its owner does once the collections answer): a damaged
        store can fail in odd ways while first read, reported as one StoreError."""
        try:
            read()
        except StoreError:
            raise
        except Exception as exc:
            log.debug("first read of the store failed", exc_info=True)
            raise store_error(self.settings, "open", exc) from exc

    def _open(self) -> None:
        self.client = open_client(self.settings)
        try:
            space = {"hnsw:space": "cosine"}
            papers = self.client.get_or_create_collection(
                f"{self.settings.collection}_papers", metadata=space, embedding_function=None
            )
            chunks = self.client.get_or_create_collection(
                f"{self.settings.collection}_chunks", metadata=space, embedding_function=None
            )
        except Exception as exc:
            log.debug("opening the collections failed", exc_info=True)
            raise store_error(self.settings, "open", exc) from exc
        for collection in (papers, chunks):
            search_widely(collection)
        self.papers = GuardedCollection(papers, self)
        self.chunks = GuardedCollection(chunks, self)
        self.write_failed = False

    def reopen(self) -> None:
        """A fresh connection to the store (after a failed write, chromadb's old one can hang)."""
        forget_client(self.settings)
        self._open()

    @property
    def splitter(self) -> SentenceSplitter:
        """The chunker, made on first use (it loads a tokenizer: a question never needs it)."""
        if self._splitter is None:
            self._splitter = SentenceSplitter(
                chunk_size=self.settings.chunk_size, chunk_overlap=self.settings.chunk_overlap
            )
        return self._splitter

    @property
    def embedder(self) -> Embedder:
        """The embedding model, loaded on first use (opening the store for stats needs none)."""
        if self._embedder is None:
            self.check_embedder()
            self._embedder = make_embedder(self.settings, self._stored_dimension())
        return self._embedder

    def _stored_dimension(self) -> int | None:
        """The size of the collection's vectors, for a served model only (a server can change the model behind its
        URL, and its first reply tells the size); None when empty. One vector tells: Chroma fixes the size."""
        if not self.settings.embed_url or self.count() == 0:
            return None
        got = self.papers.get(include=["embeddings"], limit=1)["embeddings"]
        return len(got[0]) if got is not None and len(got) else None

    def dimensions(self) -> int:
        """The size of the vectors the chosen model makes (the shipped model's without loading it)."""
        return DIMENSIONS if embedder_name(self.settings) == MODEL_NAME else int(self.embedder.dimensions)

    def model_record(self) -> dict[str, object]:
        """The collection's metadata: the model its vectors were made by (a store from before the record holds
        the shipped model's), and for a model folder its path and weights (absent in a store from before those)."""
        try:
            return dict(self.client.get_collection(self.papers.name).metadata or {})
        except Exception as exc:
            raise store_error(self.settings, "read", exc) from exc

    def recorded_model(self) -> RecordedModel:
        """The model the collection's vectors were made by, as the store records it (the settings' when empty)."""
        if self.count() == 0:
            return RecordedModel(embedder_name(self.settings))
        meta = self.model_record()
        return RecordedModel(str(meta.get(EMBEDDER) or MODEL_NAME), str(meta.get(EMBEDDER_URL) or ""),
                             str(meta.get(EMBEDDER_FOLDER) or ""))

    def stored_index_version(self) -> str:
        """`index_version` with the recorded model in place of the settings' (what the papers' fingerprints hold)."""
        return self.recorded_model().name + self.index_version.removeprefix(embedder_name(self.settings))

    def embedder_mismatch(self) -> str | None:
        """Why the settings' model must not embed for this collection (another model, or another model folder of
        the same name), as one line with the fix; None when it may, or the collection is empty."""
        if self.count() == 0:
            return None
        meta, recorded = self.model_record(), self.recorded_model()
        stored, chosen = recorded.name, embedder_name(self.settings)
        if stored != chosen:
            return (f"the collection {self.settings.collection!r} was embedded with {recorded}, but the "
                    f"settings choose {chosen}: to use it as it is, {recorded.settings()}; to move it to the "
                    f"settings' model, run `rag-bot ingest --reembed`; or index into a new collection "
                    f"(RAG_BOT_COLLECTION=...)")
        if self.settings.embed_path and meta.get(EMBEDDER_WEIGHTS):
            return folder_mismatch(self.settings.collection, str(meta.get(EMBEDDER_FOLDER, "")),
                                   str(meta[EMBEDDER_WEIGHTS]), self.settings.embed_path)
        return None

    def check_embedder(self) -> None:
        """Refuse to embed with another model than the collection's: its vectors and a question's (or new
        papers') would not be comparable."""
        problem = self.embedder_mismatch()
        if problem:
            raise StoreError(problem)

    def _folder_record(self) -> dict[str, object]:
        """The model folder's path and weights, for the metadata a write records (none for a served or the
        shipped model)."""
        if not self.settings.embed_path:
            return {}
        if self.count() and not self.model_record().get(EMBEDDER_WEIGHTS):
            return {}  # a store from before the record: recording this folder would vouch for vectors of unknown origin
        digest = weights_digest(self.settings.embed_path)
        folder = str(Path(self.settings.embed_path).expanduser().resolve())
        return {EMBEDDER_FOLDER: folder, EMBEDDER_WEIGHTS: digest} if digest else {}

    def count(self) -> int:
        """Papers in the index."""
        return int(self.papers.count())

    def chunk_count(self) -> int:
        """Chunks in the index."""
        return int(self.chunks.count())

    def state(self) -> StoreState:
        """What identifies the collection's content, cheaply (no record is read): both collections' ids and
        counts and the generation of the last ingest that wrote. Keys the derived caches (rag_bot/store/caches.py)."""
        try:
            meta = self.client.get_collection(self.papers.name).metadata or {}
        except Exception as exc:
            log.debug("reading the collection metadata failed", exc_info=True)
            raise store_error(self.settings, "read", exc) from exc
        return {
            "papers_id": str(self.papers.id), "chunks_id": str(self.chunks.id),
            "papers": self.count(), "chunks": self.chunk_count(), "generation": meta.get(GENERATION),
        }

    def record_write(self) -> None:
        """Mark the collection as changed by a finished write (an import): lexical caches keyed by it rebuild."""
        self._mark(uuid.uuid4().hex, totals=True)

    def mark_writing(self) -> None:
        """A write begins: the vector files are copied aside (`begin_write`) and the generation marked as being
        written, so a reader's cache keyed by this collection (rag_bot/store/caches.py) is stale from now on."""
        self._mark(f"writing-{uuid.uuid4().hex}", writing=True)

    def _mark(self, generation: str, totals: bool = False, writing: bool = False) -> None:
        """Record a new generation in the papers collection's metadata (with the totals when finished) and the
        model that writes; a write by another model than the collection's is refused first."""
        self.check_embedder()
        if writing:
            self.begin_write()
        meta: dict[str, object] = {GENERATION: generation, EMBEDDER: embedder_name(self.settings), **self._folder_record(),
                                **served_record(self.settings)}
        if totals:
            meta |= dict(zip(TOTALS, (self.count(), self.chunk_count())))
        self.papers.modify(metadata=meta)

    def _repair_vectors(self) -> list[str]:
        """Put back vector files a failed or killed write damaged, from the copy saved before it, when no
        ingest is running; one line per collection repaired. StoreError when one is damaged beyond that."""
        if self.saved is None or not Path(self.settings.storage).is_dir():
            return []
        with self.writer_lock(wait=False) as held:
            if not held:
                return []  # another process writes (its own failure handling restores), or a read-only store
            try:
                remove_stale_backups(self.settings)
                restored, left = self.saved.restore_damaged()
                if not restored and not left:
                    self.saved.discard()  # a copy a killed ingest left, of files that are whole
            except OSError as exc:
                raise store_error(self.settings, "open", exc) from exc
        if left:
            raise StoreError(f"the vector index of {'; '.join(left)} in the folder {self.settings.storage} is "
                             f"damaged and no copy saved before the write can be put back; run `rag-bot ingest "
                             f"--rebuild` to rebuild it from the sources")
        if restored:
            forget_client(self.settings)  # this process's Chroma must read the files put back
        lines = [f"put back the vector index of {what} from the copy saved before the last write; Chroma replays "
                 f"what was written since" for what in restored]
        for line in lines:
            log.warning("%s", line)
        return lines

    def begin_write(self) -> None:
        """Before a write's first change: copy the vector files aside (once per write). StoreError, with
        nothing written, when the copy cannot be made."""
        if self.saved is None or self._saving:
            return
        try:
            self.saved.save()
        except OSError as exc:
            raise store_error(self.settings, "write", exc) from exc
        self._saving = True

    def after_write_call(self) -> None:
        """After each write call that succeeded: copy again what Chroma has rewritten whole since the copy."""
        if self.saved is not None and self._saving:
            try:
                self.saved.refresh()
            except OSError as exc:  # that collection's copy stays the older one, which is never put back
                log.debug("could not refresh the saved vectors: %s", exc)

    def recover_vectors(self) -> None:
        """After a failed write: put back the vector files it damaged (under the caller's ingest lock)."""
        if self.saved is None or not self._saving:
            return
        forget_client(self.settings)
        try:
            restored, left = self.saved.restore_damaged()
        except OSError as exc:
            log.warning("could not put back the damaged vector files: %s", exc)
            return
        for what in restored:
            log.warning("put back the vector index of %s from the copy saved before this ingest", what)
        for what in left:
            log.warning("the vector index of %s is damaged and no copy can be put back", what)

    def end_write(self) -> None:
        """A write is over: its copy goes, unless vector files are still damaged (the next open puts them back)."""
        if self.saved is None or not self._saving:
            return
        self._saving = False
        if not any(damage(folder) for folder in segment_folders(Path(self.settings.storage))):
            self.saved.discard()

    @contextmanager
    def writer_lock(self, wait: bool = True) -> Iterator[bool]:
        """Ingests of one store folder take turns (across processes), so orphan cleaning never removes the
        chunks of another ingest's unfinished batch; yields whether the lock is held (a read-only store, or a
        server, gets none and yields True for a server)."""
        if self.settings.chroma_url:
            yield True
            return
        with ExitStack() as stack:
            try:
                held = stack.enter_context(folder_lock(Path(self.settings.storage), wait))
            except OSError:  # the lock file cannot be made: a read-only store
                held = False
            yield held

    def iter_records(self, include: list[str]) -> Iterator[GetResult]:
        """The papers collection's records (`include`: what of them), a page of `READ_BATCH` at a time."""
        total = self.count()
        for offset in range(0, total, READ_BATCH):
            yield self.papers.get(include=include, limit=READ_BATCH, offset=offset)  # type: ignore[arg-type]
