"""The engine every surface calls: ingest files, answer a question (retrieve -> compose), report stats."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rag_bot.corpus import ReadResult, read_paths
from rag_bot.errors import EmptyQuestionError, NoIndexError
from rag_bot.index import IngestReport, PaperIndex, store_label
from rag_bot.settings import Settings
from rag_bot.types import Answer, Mode, Paper, ScoredPaper, Turn, final_answer

_FOLLOW_UP = re.compile(
    r"^(?:and|but|also|what about|how about|which of (?:them|these|those)|do any|does any|of these|"
    r"among (?:them|these))\b|\b(?:they|them|these|those|it|its|their|each of)\b",
    re.IGNORECASE,
)


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
        """The answer writer: an LLM (`LLMComposer`) when settings.llm asks for one, else the offline composer."""
        if self._composer is None:
            from rag_bot.compose import OfflineComposer
            from rag_bot.llm import LLMComposer, uses_llm

            offline = OfflineComposer(self.index.embedder, self.settings)
            self._composer = LLMComposer(offline, self.settings) if uses_llm(self.settings) else offline
        return self._composer

    @property
    def papers(self) -> dict[str, Paper]:
        """The collection, by doc_id (as the retriever holds it; refreshed by every ingest)."""
        papers: dict[str, Paper] = self.retriever.papers
        return papers

    @property
    def writer_name(self) -> str:
        """Who writes the answers: "offline" or the model's name."""
        from rag_bot.llm import LLMComposer

        composer = self.composer
        return composer.model_name if isinstance(composer, LLMComposer) else "offline"

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

    def ask(
        self,
        question: str,
        mode: Mode | None = None,
        history: Sequence[Turn] | None = None,
        max_papers: int | None = None,
    ) -> Answer:
        """A cited answer (or a plain refusal) to a question, in the context of earlier turns."""
        return final_answer(self._answer(question, mode, history, max_papers, stream=False))

    def stream(
        self,
        question: str,
        mode: Mode | None = None,
        history: Sequence[Turn] | None = None,
        max_papers: int | None = None,
    ) -> Iterator[str | Answer]:
        """Text deltas of the answer as it is written, then the final (citation-checked) `Answer`.

        With an LLM the deltas are its tokens, already citation-checked; the final `Answer` is authoritative (if the
        model fails mid-answer, it is the offline composer's answer, with a notice)."""
        yield from self._answer(question, mode, history, max_papers, stream=True)

    def _answer(
        self,
        question: str,
        mode: Mode | None,
        history: Sequence[Turn] | None,
        max_papers: int | None,
        stream: bool,
    ) -> Iterator[str | Answer]:
        question = " ".join((question or "").split())
        if not question:
            raise EmptyQuestionError("the question is empty")
        self.require_index()
        start = time.perf_counter()
        composer = self.composer
        rewritten = self.rewrite_question(question, history) if history else None
        search = rewritten or self.standalone_question(question, history or [])
        papers = self.retriever.retrieve_papers(search)
        if history:
            papers = self._carry_over(papers, history)
        retrieved = time.perf_counter()
        answer: Answer | None = None
        if hasattr(composer, "compose_stream"):
            from rag_bot.compose import detect_mode

            # The model is asked the standalone question; the mode follows what the user typed.
            mode = mode or detect_mode(question)
            events = composer.compose_stream(rewritten or question, papers, mode=mode, max_papers=max_papers) \
                if stream else iter([composer.compose(rewritten or question, papers, mode=mode, max_papers=max_papers)])
            for event in events:
                if isinstance(event, Answer):
                    answer = event
                else:
                    yield event
            assert answer is not None
            answer.question = question
        else:
            answer = composer.compose(question, papers, mode=mode, max_papers=max_papers)
            # The offline composer writes the whole answer at once; it is streamed in word-sized deltas
            # so that every surface handles one kind of answer stream.
            yield from re.findall(r"\S+\s*|\s+", answer.answer)
        done = time.perf_counter()
        answer.timings_ms = {
            "retrieve": round((retrieved - start) * 1000, 1),
            "compose": round((done - retrieved) * 1000, 1),
            "total": round((done - start) * 1000, 1),
        }
        yield answer

    def rewrite_question(self, question: str, history: Sequence[Turn]) -> str | None:
        """With an LLM, the question rewritten into a standalone one from the conversation (llama-index's
        condense-question step); None with the offline composer or when the model cannot."""
        composer = self.composer
        if not history or not hasattr(composer, "rewrite_question"):
            return None
        turns = [(t.question, t.answer.answer if t.answer else "") for t in history[-3:]]
        rewritten: str | None = composer.rewrite_question(question, turns)
        return rewritten

    def standalone_question(self, question: str, history: Sequence[Turn]) -> str:
        """The question to retrieve with: a follow-up ("and which of them is fastest?") gets the terms of
        the previous question carried over."""
        if not history or not _FOLLOW_UP.search(question):
            return question
        return f"{history[-1].question} {question}"

    def _carry_over(self, papers: list[ScoredPaper], history: Sequence[Turn]) -> list[ScoredPaper]:
        """Papers cited in the previous turn stay candidates for a follow-up question."""
        previous = [c.doc_id for c in history[-1].answer.citations] if history[-1].answer else []
        have = {p.paper.doc_id for p in papers}
        extra = [d for d in previous if d not in have and d in self.retriever.papers]
        if not extra:
            return papers
        sims = self.retriever.similarities(history[-1].question, extra)
        return papers + [
            ScoredPaper(paper=self.retriever.papers[d], score=0.0, similarity=sims.get(d, 0.0)) for d in extra
        ]

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
