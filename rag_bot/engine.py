"""The engine every surface calls: ingest files, answer a question (retrieve -> compose), report stats."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rag_bot.corpus import ReadResult, read_paths
from rag_bot.errors import EmptyQuestionError, NoIndexError
from rag_bot.index import IngestReport, PaperIndex, store_label
from rag_bot.settings import Settings
from rag_bot.types import Answer, Mode


class Engine:
    """One object behind the CLI, the chat and the tests: the index, the retriever and the composer."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.index = PaperIndex(self.settings)
        self._retriever: Any = None
        self._composer: Any = None

    @property
    def retriever(self) -> Any:
        """The paper retriever, built on first use (it reads the collection for BM25 and names)."""
        if self._retriever is None:
            from rag_bot.retrieve import PaperRetriever

            self._retriever = PaperRetriever(self.index, self.settings)
        return self._retriever

    @property
    def composer(self) -> Any:
        """The answer writer (the offline composer)."""
        if self._composer is None:
            from rag_bot.compose import OfflineComposer

            self._composer = OfflineComposer(self.index.embedder, self.settings)
        return self._composer

    def require_index(self) -> None:
        """Raise `NoIndexError` with the fix when nothing is indexed."""
        if self.index.count() == 0:
            raise NoIndexError(
                f"No papers are indexed yet in the {store_label(self.settings)}: run `rag-bot ingest` first."
            )

    def ingest(
        self,
        paths: Iterable[Path],
        prune: bool = False,
        progress: Callable[[int], None] | None = None,
        on_read: Callable[[ReadResult], None] | None = None,
    ) -> tuple[IngestReport, ReadResult]:
        """Read files, index the new and changed papers, and refresh retrieval."""
        result = read_paths(paths)
        if on_read:
            on_read(result)
        if prune and result.problems:
            # Pruning after a partial read would drop the papers of the files that failed to read.
            prune = False
        report = self.index.ingest(result.papers, prune=prune, progress=progress)
        if self._retriever is not None:
            self._retriever.reload()
        return report, result

    def ask(self, question: str, mode: Mode | None = None) -> Answer:
        """A cited answer (or a plain refusal) to a question."""
        question = " ".join((question or "").split())
        if not question:
            raise EmptyQuestionError("the question is empty")
        self.require_index()
        start = time.perf_counter()
        papers = self.retriever.retrieve_papers(question)
        retrieved = time.perf_counter()
        answer = self.composer.compose(question, papers, mode=mode)
        done = time.perf_counter()
        answer.timings_ms = {
            "retrieve": round((retrieved - start) * 1000, 1),
            "compose": round((done - retrieved) * 1000, 1),
            "total": round((done - start) * 1000, 1),
        }
        return answer

    def stats(self) -> dict[str, Any]:
        """Size and location of the index."""
        sources: dict[str, int] = {}
        for paper in self.index.all_papers():
            sources[paper.source] = sources.get(paper.source, 0) + 1
        return {
            "papers": self.index.count(),
            "chunks": self.index.chunk_count(),
            "store": store_label(self.settings),
            "embedding": self.index.index_version,
            "sources": dict(sorted(sources.items())),
        }
