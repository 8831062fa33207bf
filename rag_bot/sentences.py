"""The sentences of each abstract with their vectors, computed once and shared by grounding, the offline writer
and quote matching."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

from rag_bot.embedding import MiniLMEmbedding
from rag_bot.text import clean_markup, split_sentences
from rag_bot.types import Paper

log = logging.getLogger(__name__)

CACHE_PAPERS = 5000  # papers whose sentence vectors are kept (a few MB); cleared when full
CACHE_PHRASES = 20000  # theme-label phrases whose vectors are kept


class SentenceIndex:
    """Clean sentences of papers and their unit vectors, cached by paper and text."""

    def __init__(self, embedder: MiniLMEmbedding) -> None:
        self.embedder = embedder
        self._cache: dict[tuple[str, int], tuple[list[str], np.ndarray]] = {}
        self._phrases: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def of(self, paper: Paper) -> tuple[list[str], np.ndarray]:
        """The cleaned sentences of a paper and their embeddings."""
        key = (paper.doc_id, hash(paper.text))
        if key in self._cache:
            return self._cache[key]
        with self._lock:  # concurrent first questions on one paper embed it once
            return self._embed_paper(key, paper)

    def _embed_paper(self, key: tuple[str, int], paper: Paper) -> tuple[list[str], np.ndarray]:
        if key not in self._cache:
            clean = clean_markup(paper.text)
            sentences = split_sentences(clean) or [clean or paper.title or paper.doc_id]
            if len(self._cache) >= CACHE_PAPERS:
                log.debug("sentence cache full (%d papers): cleared", len(self._cache))
                self._cache.clear()
            self._cache[key] = (sentences, self.embedder.embed(sentences))
        return self._cache[key]

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
