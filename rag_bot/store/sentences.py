"""The sentences of each abstract with their vectors, computed once and shared by grounding, the offline writer
and quote matching.

Embedding a paper's sentences is most of an offline answer's time (about 0.1 s of CPU per abstract, with MiniLM on
two cores; docs/benchmarks.md), so it is done once per paper ever: vectors are kept in memory and, given the
paper index, persisted in an SQLite file beside the store (rag_bot/store/sentence_file.py; for a Chroma server, in the
user's cache folder), filled as papers are first used (or ahead of time by `SentenceIndex.fill`). A row holds one
paper: its doc_id, the key of what was embedded (model and sentences) and the vectors, 8 bits a number with one
scale per sentence (the file's format, `SENTENCES.format`: 388 bytes a sentence, 2.4 KB a paper on average,
against 38 KB as float32 beside a 384-number mean). Every vector an answer uses is so rounded, computed or cached
alike, so an answer never depends on what is cached. A row whose key does not match the paper's current sentences is recomputed and overwritten; a
file of another format is emptied. Stores written before the file kept the vectors in a `<name>_sentences` Chroma
collection: they are moved into the file once. The store is a cache: any fault reading or writing it is logged
and the vectors are computed instead.

`prefetch(papers)` embeds every missing paper of a question in one model call (length-sorted batches across
papers, a third less CPU than one call per paper).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from rag_bot.interfaces import Embedder
from rag_bot.store.embedding import MODEL_NAME
from rag_bot.store.index import PaperIndex
from rag_bot.store.reads import SENTENCES_SUFFIX
from rag_bot.store.sentence_file import SentenceFile, sentence_file
from rag_bot.text import clean_markup, split_sentences
from rag_bot.types import Paper

log = logging.getLogger(__name__)

CACHE_PAPERS = 5000  # papers whose sentence vectors are kept in memory (about 50 MB); cleared when full
CACHE_PHRASES = 20000  # theme-label phrases whose vectors are kept
READ_BATCH = 1000  # records read per request when a `<name>_sentences` collection is moved into the file

Entry = tuple[list[str], np.ndarray]


# A number in square brackets in an abstract ("Silver et al. [2014]", "as in [3]") would read as one of the
# answer's citation markers; the sentences carry it in round brackets.
_BRACKETED_NUMBER = re.compile(r"\[(\d[\d,;\s–-]*)\]")


def paper_sentences(paper: Paper) -> list[str]:
    """The cleaned sentences of a paper's abstract (its title, or id, when it has no text), numbers in square
    brackets put in round ones."""
    clean = _BRACKETED_NUMBER.sub(r"(\1)", clean_markup(paper.text))
    return split_sentences(clean) or [clean or paper.title or paper.doc_id]


def sentence_key(sentences: Sequence[str], max_tokens: int, model: str = MODEL_NAME) -> str:
    """What identifies a paper's sentence vectors: the model, its input limit and the exact sentences."""
    payload = "\x1f".join([model, str(max_tokens), *sentences])
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


LEGACY = "int8-scaled-v1"  # the same packing in base64, as `<name>_sentences` Chroma collections held it


def _quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 codes and its scale (the row's largest magnitude / 127)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    scales = np.maximum(np.abs(vectors).max(axis=1, keepdims=True), 1e-12) / 127.0 if vectors.size \
        else np.ones((len(vectors), 1), dtype=np.float32)
    return np.clip(np.rint(vectors / scales), -127, 127).astype(np.int8), scales.astype("<f4")


def _restore(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Unit rows back from their codes and scales."""
    rows = codes.astype(np.float32) * scales
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def pack_and_restore(vectors: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Vectors as the file keeps them (the scales, then the codes) and as `unpack` reads them back."""
    codes, scales = _quantize(vectors)
    return scales.tobytes() + codes.tobytes(), _restore(codes, scales)


def unpack(raw: bytes, rows: int) -> np.ndarray | None:
    # The key names the model, so the size is the model's: rows scales (4 bytes), then rows x dim codes.
    if rows <= 0 or len(raw) <= rows * 4 or (len(raw) - rows * 4) % rows:
        return None
    scales = np.frombuffer(raw[:rows * 4], dtype="<f4").reshape(rows, 1)
    codes = np.frombuffer(raw[rows * 4:], dtype=np.int8).reshape(rows, -1)
    return _restore(codes, scales)


def stored_count(index: PaperIndex) -> int:
    """Papers whose sentence vectors the index's file holds (0 without a file, none is made; a fault is logged)."""
    file = sentence_file(index)
    if not file.path.exists():
        return 0
    try:
        return file.count()
    except Exception as exc:  # a cache: stats go on without it
        log.warning("the sentence-vector cache %s could not be read (%s: %s)", file.path, type(exc).__name__, exc)
        return 0
    finally:
        file.close()


class SentenceStore:
    """The persisted sentence vectors of a paper index (rag_bot/store/sentence_file.py's `SentenceFile`, beside the
    store or in the user's cache folder for a Chroma server); a cache, so faults are not errors."""

    def __init__(self, index: PaperIndex) -> None:
        self.index = index
        self.legacy = f"{index.settings.collection}{SENTENCES_SUFFIX}"  # where stores before the file kept them
        self._file: SentenceFile | None = None
        self.failed = False  # set after a fault: the store is not used again by this process

    @property
    def file(self) -> SentenceFile:
        if self._file is None:
            file = sentence_file(self.index)
            self._adopt(file)
            self._file = file
        return self._file

    def _adopt(self, file: SentenceFile) -> None:
        """Move the vectors of a store written before the file (a `<name>_sentences` collection) into it, once:
        the collection is deleted after. Left for a later process while an ingest writes the store."""
        client = self.index.client
        if self.legacy not in {c if isinstance(c, str) else c.name for c in client.list_collections()}:
            return
        with self.index.writer_lock(wait=False) as held:
            if not held:
                return
            old = client.get_collection(self.legacy, embedding_function=None)
            moved = 0
            if (old.metadata or {}).get("layout") == LEGACY:  # an older packing is not moved: refilled as used
                for start in range(0, old.count(), READ_BATCH):
                    got = old.get(include=["metadatas"], limit=READ_BATCH, offset=start)
                    rows = [(doc_id, str(meta.get("key", "")), int(meta.get("n", 0) or 0),
                             base64.b64decode(str(meta.get("vectors", ""))))
                            for doc_id, meta in zip(got["ids"], got["metadatas"] or []) if meta]
                    moved += file.put(rows)
            client.delete_collection(self.legacy)
            log.info("%d papers' sentence vectors moved from the collection %s to %s", moved, self.legacy, file.path)

    def get(self, wanted: dict[str, str]) -> dict[str, np.ndarray]:
        """Stored vectors of papers (doc_id -> key of their current sentences), those whose key matches only."""
        if self.failed or not wanted:
            return {}
        out: dict[str, np.ndarray] = {}
        try:
            for doc_id, (key, n, raw) in self.file.get(list(wanted)).items():
                if key != wanted.get(doc_id):
                    continue  # the abstract (or the model) changed since: recomputed
                vectors = unpack(raw, n)
                if vectors is not None:
                    out[doc_id] = vectors
        except Exception as exc:  # a cache: the answer goes on without it
            self._fault("read", exc)
        return out

    def put(self, entries: dict[str, tuple[str, bytes, int]]) -> int:
        """Persist papers' packed vectors (doc_id -> (key, `pack_and_restore`'s bytes, rows)); how many were
        written. SQLite lets several processes write the file, so an ingest writing the store does not stop it."""
        if self.failed or not entries:
            return 0
        try:
            return self.file.put((doc_id, key, rows, raw) for doc_id, (key, raw, rows) in entries.items())
        except Exception as exc:
            self._fault("write", exc)
            return 0

    def count(self) -> int:
        """Papers with persisted vectors (0 when the store cannot be read)."""
        try:
            return self.file.count()
        except Exception as exc:
            self._fault("read", exc)
            return 0

    def _fault(self, action: str, exc: Exception) -> None:
        log.warning("the sentence-vector cache %s could not be %s (%s: %s); vectors are computed instead",
                    self._file.path if self._file else self.legacy, "read" if action == "read" else "written",
                    type(exc).__name__, exc)
        log.debug("sentence-vector cache fault", exc_info=True)
        self.failed = True


class SentenceIndex:
    """Clean sentences of papers and their unit vectors, cached by paper and text (in memory, and in the store's
    sentence-vector file when built with `store`)."""

    def __init__(self, embedder: Embedder, store: PaperIndex | None = None) -> None:
        self.embedder = embedder
        self.store = SentenceStore(store) if store is not None else None
        self._cache: dict[tuple[str, int], Entry] = {}
        self._phrases: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(paper: Paper) -> tuple[str, int]:
        return paper.doc_id, hash(paper.text)

    def of(self, paper: Paper) -> Entry:
        """The cleaned sentences of a paper and their embeddings."""
        found = self._cache.get(self._key(paper))
        if found is not None:
            return found
        return self._fill([paper])[self._key(paper)]

    def prefetch(self, papers: Iterable[Paper]) -> None:
        """Make the sentence vectors of these papers ready: those not in memory are read from the store, the rest
        embedded together in one model call. Call it with a question's candidates before scoring them."""
        missing = {self._key(p): p for p in papers if self._key(p) not in self._cache}
        if missing:
            self._fill(list(missing.values()))

    def batched(self, *groups: Sequence[Paper]) -> Callable[[Paper], np.ndarray]:
        """A paper's sentence vectors (as grounding takes them) for one question: the first use of a paper of a
        group makes the whole group ready at once (`prefetch`), so its missing papers go through one model call;
        a paper of no group is made ready alone."""
        members = [{self._key(p) for p in group} for group in groups]

        def vectors(paper: Paper) -> np.ndarray:
            key = self._key(paper)
            if key not in self._cache:
                group = next((g for g, keys in zip(groups, members) if key in keys), [paper])
                self.prefetch(group)
            return self.of(paper)[1]

        return vectors

    def fill(self, papers: Sequence[Paper], batch: int = 64) -> int:
        """Compute and persist the sentence vectors of every paper that the store lacks (ahead of questions, e.g.
        after an ingest); how many papers were embedded. Memory is bounded: the vectors are not kept."""
        embedded = 0
        for start in range(0, len(papers), batch):
            embedded += self._vectors([(p, paper_sentences(p)) for p in papers[start:start + batch]])[1]
        return embedded

    def _fill(self, papers: Sequence[Paper]) -> dict[tuple[str, int], Entry]:
        # One lock: concurrent first questions on one paper embed it once.
        with self._lock:
            out: dict[tuple[str, int], Entry] = {}
            todo: dict[tuple[str, int], tuple[Paper, list[str]]] = {}
            for paper in papers:
                key = self._key(paper)
                if key in self._cache:
                    out[key] = self._cache[key]
                else:
                    todo[key] = (paper, paper_sentences(paper))
            if not todo:
                return out
            vectors, _ = self._vectors(list(todo.values()))
            if len(self._cache) + len(todo) > CACHE_PAPERS:
                log.debug("sentence cache full (%d papers): cleared", len(self._cache))
                self._cache.clear()
            for key, (paper, sentences) in todo.items():
                self._cache[key] = out[key] = (sentences, vectors[paper.doc_id])
            return out

    def _vectors(self, todo: Sequence[tuple[Paper, list[str]]]) -> tuple[dict[str, np.ndarray], int]:
        """The sentence vectors of papers (with their sentences): read from the store where it holds them for
        exactly these sentences, the rest embedded in one model call and persisted; also how many were embedded."""
        keys = {paper.doc_id: sentence_key(s, self.embedder.max_tokens, self.embedder.name) for paper, s in todo}
        vectors = self.store.get(keys) if self.store is not None else {}
        missing = [(p, s) for p, s in todo if p.doc_id not in vectors or vectors[p.doc_id].shape[0] != len(s)]
        computed: dict[str, tuple[str, bytes, int]] = {}
        if missing:
            for (paper, _), found in zip(missing, self._embed([s for _, s in missing])):
                # as the store keeps them, whether this answer computed them or a later one reads them back
                raw, vectors[paper.doc_id] = pack_and_restore(found)
                computed[paper.doc_id] = (keys[paper.doc_id], raw, len(found))
            if self.store is not None:
                self.store.put(computed)
        return vectors, len(missing)

    def _embed(self, groups: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Vectors of several papers' sentences, from one model call (batches sorted by length across papers)."""
        flat = [s for group in groups for s in group]
        vectors = self.embedder.embed(flat)
        bounds = np.cumsum([len(g) for g in groups])[:-1]
        return list(np.split(vectors, bounds))

    def phrase_vectors(self, phrases: Sequence[str]) -> np.ndarray:
        """Vectors of short phrases (theme label candidates), cached: the same phrases recur across answers."""
        missing = [t for t in dict.fromkeys(phrases) if t not in self._phrases]
        if missing:
            if len(self._phrases) >= CACHE_PHRASES:
                self._phrases.clear()
            self._phrases.update(zip(missing, self.embedder.embed(missing)))
        return np.stack([self._phrases[t] for t in phrases]) if phrases else np.zeros((0, 0))

    def query_vector(self, text: str) -> np.ndarray:
        """A question's vector (the embedder caches recent questions)."""
        return np.asarray(self.embedder.get_query_embedding(text))

    def best_quote(self, paper: Paper, claims: Sequence[str]) -> str:
        """The sentence of the paper's abstract that best supports the claims citing it (the first without claims)."""
        sentences, vectors = self.of(paper)
        if not claims:
            return sentences[0]
        similarity = vectors @ self.embedder.embed(list(claims)).T  # unit vectors: cosine similarity
        return sentences[int(np.argmax(similarity.max(axis=1)))]
