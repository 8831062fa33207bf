"""The engine every surface calls: ingest files, answer a question, report stats.

A question runs through stages that never call back up, each returning what it decides:
retrieve (llama-index's query engine over `PaperRetriever` and, when set, the reranker: question -> ranked paper
nodes) -> ground (`GroundingStage`: a typed `Grounding`, its certainty and sources; with an LLM writer its relevance
judge reviews it) -> compose (the writer, a `PaperSynthesizer`, handed that decision: streamed text and a checked
`Answer` that carries the certainty). The engine is built from parts passed in, with defaults from `Settings`; when an
LLM writer cannot answer, the engine has the offline writer answer from the same decision.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore

from rag_bot import answer_words as words
from rag_bot.errors import NoIndexError, WriterUnavailable
from rag_bot.grounding.calibration_file import model_for
from rag_bot.grounding.decide import GroundingStage
from rag_bot.interfaces import Writer
from rag_bot.nodes import PaperQuery, scored_paper
from rag_bot.question import checked_question, clean_question, detect_mode, is_follow_up
from rag_bot.reading.corpus import ReadResult, scan_paths
from rag_bot.retrieval.lexical import LexicalCache
from rag_bot.retrieval.retrieve import PaperRetriever
from rag_bot.settings import Settings
from rag_bot.store.chroma import store_label
from rag_bot.store.index import IngestReport, PaperIndex
from rag_bot.store.sentences import SentenceIndex, stored_count
from rag_bot.types import Answer, Filters, Grounding, Mode, Paper, Stats, Turn, final_answer
from rag_bot.writing.compose import PaperSynthesizer
from rag_bot.writing.llm import default_writer, judge_call
from rag_bot.writing.offline import OfflineComposer

if TYPE_CHECKING:
    from rag_bot.grounding.judge import RelevanceJudge
    from rag_bot.retrieval.rerank import RerankPostprocessor

log = logging.getLogger(__name__)

REWRITE_TURNS = 3  # earlier turns the model sees when it rewrites a follow-up


class Engine:
    """One object behind the CLI, the chat and the tests: index, retriever, grounding and writers."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        index: PaperIndex | None = None,
        retriever: PaperRetriever | None = None,
        writer: PaperSynthesizer | None = None,
        fallback: Writer | None = None,
        sentences: SentenceIndex | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.index = index or PaperIndex(self.settings)
        self._retriever = retriever
        self._writer = writer
        self._fallback = fallback
        self._sentences = sentences
        self._query_engine: RetrieverQueryEngine | None = None
        self._grounding: GroundingStage | None = None
        self._reranker: RerankPostprocessor | None = None
        self._building = threading.Lock()

    # --- parts (built on first use: opening the store for stats needs no model) ----------------------------
    @property
    def sentences(self) -> SentenceIndex:
        """The shared sentence index (grounding, the offline writer, quotes)."""
        if self._sentences is None:
            self._sentences = SentenceIndex(self.index.embedder, store=self.index)
        return self._sentences

    @property
    def retriever(self) -> PaperRetriever:
        """The paper retriever (it reads the collection for BM25 and names when built). Built under a lock: an ingest
        that ends while a question is building it reloads it after (else it would keep the collection before)."""
        if self._retriever is None:
            with self._building:
                if self._retriever is None:
                    self._retriever = PaperRetriever(self.index, self.settings)
        return self._retriever

    @property
    def writer(self) -> PaperSynthesizer:
        """The answer writer: an LLM when the settings ask for one, else the offline writer."""
        if self._writer is None:
            self._writer = default_writer(self.settings, self.sentences)
        return self._writer

    @property
    def fallback(self) -> Writer:
        """The writer that answers when the main one cannot (the offline writer)."""
        if self._fallback is None:
            self._fallback = self.writer if isinstance(self.writer, OfflineComposer) \
                else OfflineComposer(self.sentences, self.settings)
        return self._fallback

    @property
    def grounding(self) -> GroundingStage:
        """The grounding stage (over the pure rules of grounding/decide.py): returns its decision."""
        if self._grounding is None:
            self._grounding = GroundingStage(sentences=self.sentences, settings=self.settings,
                                             collection_size=lambda: len(self.retriever.papers))
        return self._grounding

    @property
    def reranker(self) -> RerankPostprocessor | None:
        """The reranker stage (rag_bot/retrieval/rerank.py) when RAG_BOT_RERANK_URL sets one, else None."""
        if self._reranker is None and self.settings.rerank_url:
            from rag_bot.retrieval.rerank import RerankPostprocessor

            self._reranker = RerankPostprocessor(settings=self.settings)
        return self._reranker

    def steps(self) -> list[BaseNodePostprocessor]:
        """What reorders retrieval's nodes before grounding weighs them: the reranker, when RAG_BOT_RERANK_URL sets
        one (its order is one of grounding's signals)."""
        return [self.reranker] if self.reranker is not None else []

    @property
    def judge(self) -> RelevanceJudge | None:
        """With an LLM writer, its relevance judge (rag_bot/grounding/judge.py), which reviews grounding's decision;
        None with the offline writer."""
        from rag_bot.grounding.judge import RelevanceJudge
        from rag_bot.writing.llm import LLMComposer

        if isinstance(self.writer, LLMComposer):
            return RelevanceJudge(generate=judge_call(self.writer), settings=self.settings)
        return None

    @property
    def query_engine(self) -> RetrieverQueryEngine:
        """The llama-index query engine: retriever -> `steps` (the reranker) -> writer; the engine grounds between
        its retrieve and its synthesize (`decide`)."""
        if self._query_engine is None:
            self._query_engine = RetrieverQueryEngine(
                retriever=self.retriever,
                response_synthesizer=self.writer,
                node_postprocessors=self.steps(),
            )
        return self._query_engine

    def decide(self, query: PaperQuery, judged: bool = True) -> tuple[Grounding, list[NodeWithScore]]:
        """Retrieval, the reranker, grounding and (with an LLM writer, when `judged`) its judge: the decision an
        answer is written from, and the nodes in grounding's order."""
        nodes = self.query_engine.retrieve(query)
        decision, nodes = self.grounding.run(query, nodes)
        judge = self.judge if judged else None
        if judge is not None:
            decision = judge.review(query, nodes, decision)
        return decision, nodes

    @property
    def papers(self) -> Mapping[str, Paper]:
        """The collection, by doc_id (as the retriever holds it; refreshed by every ingest)."""
        return self.retriever.papers

    @property
    def writer_name(self) -> str:
        """Who writes the answers: "offline" or the model's name."""
        return self.writer.name

    def require_index(self) -> None:
        """Raise `NoIndexError` with the fix when nothing is indexed."""
        if self.index.count() == 0:
            raise NoIndexError(
                f"No papers are indexed yet in the {store_label(self.settings)}: run `rag-bot ingest` first."
            )

    # --- ingest ---------------------------------------------------------------------------------------------
    def ingest(
        self,
        paths: Iterable[Path],
        prune: bool = False,
        progress: Callable[[int], None] | None = None,
        on_read: Callable[[ReadResult], None] | None = None,
        sentence_progress: Callable[[int], None] | None = None,
        replace: bool = True,
    ) -> tuple[IngestReport, ReadResult]:
        """Read files, index the new and changed papers, and refresh retrieval; without `replace`, a stored paper
        whose id a file gives again with other content is kept as it is (the chat's uploads).

        The files are scanned first (every problem and the number of papers are known before anything is written:
        `on_read` gets them), then read again as a stream while the index embeds and writes bounded batches, so
        memory does not grow with the input. The returned `ReadResult.papers` is that stream (`len()` gives its
        size; iterating reads the files again)."""
        result = scan_paths(paths, max_chars=self.settings.max_abstract_chars)
        if on_read:
            on_read(result)
        if prune and (result.problems or not result.papers):
            # Pruning after a partial read would drop the papers of the files that failed to read.
            log.warning("--prune skipped: %d problems while reading, %d papers read", len(result.problems),
                        len(result.papers))
            prune = False
        report = self.index.ingest(result.papers, prune=prune, progress=progress, replace=replace)
        log.info("ingested %d files: %s", result.files, report)
        with self._building:  # a retriever being built now is reloaded once built
            retriever = self._retriever
        if retriever is not None:
            retriever.reload()
        if self.settings.sentences_at_ingest() and report.written:
            self.embed_sentences(report.written, progress=sentence_progress)
        return report, result

    def embed_sentences(self, doc_ids: Sequence[str] | None = None, progress: Callable[[int], None] | None = None,
                        batch: int = 64) -> int:
        """Embed and persist the sentences of these papers (None: every stored paper) where the store lacks them
        (what an answer's first use of a paper would do), `batch` papers per model call; how many papers were
        embedded. Resumable: what an interrupted run wrote is not embedded again."""
        embedded = 0
        for papers in self._paper_batches(doc_ids, batch):
            embedded += self.sentences.fill(papers, batch=batch)
            if progress:
                progress(len(papers))
        return embedded

    def _paper_batches(self, doc_ids: Sequence[str] | None, batch: int) -> Iterator[list[Paper]]:
        if doc_ids is not None:
            for start in range(0, len(doc_ids), batch):
                yield self.index.papers_by_id(list(doc_ids[start:start + batch]))
            return
        papers: list[Paper] = []
        for paper in self.index.iter_papers():  # a page of records at a time
            papers.append(paper)
            if len(papers) == batch:
                yield papers
                papers = []
        if papers:
            yield papers

    def prepare(self) -> None:
        """Make retrieval's lexical side ready for the collection as it is now (built and saved beside the store
        when its state has none: rag_bot/retrieval/lexical/), so the first question after a write does not
        wait for it."""
        if self._retriever is None:
            self.retriever  # noqa: B018 - built on first use
        else:
            self._retriever.reload()

    def calibrate(self) -> str:
        """Fit the relevance decision to the store's embedding model when it is not the one the decision was fitted
        on (rag_bot/grounding/calibrate.py); one line saying what was done (CalibrationFailed when it cannot)."""
        from rag_bot.grounding.calibrate import calibrate

        self.require_index()
        return calibrate(self.settings, lambda q: [scored_paper(n) for n in self.retriever.retrieve(self.query(q, "ask"))],
                         self.grounding, self.retriever.papers)

    # --- questions ------------------------------------------------------------------------------------------
    def ask(self, question: str, mode: Mode | None = None, history: Sequence[Turn] | None = None,
            max_papers: int | None = None, filters: Filters | None = None) -> Answer:
        """A cited answer (or a plain refusal) to a question, in the context of earlier turns, drawn only from the
        papers that pass `filters`."""
        return final_answer(self._answer(question, mode, history, max_papers, stream=False, filters=filters))

    def stream(self, question: str, mode: Mode | None = None, history: Sequence[Turn] | None = None,
               max_papers: int | None = None, filters: Filters | None = None) -> Iterator[str | Answer]:
        """Text deltas of the answer as it is written, then the final (citation-checked) `Answer`.

        With an LLM the deltas are its tokens, already citation-checked; the final `Answer` is authoritative (if the
        model fails mid-answer, it is the offline writer's answer, with a notice)."""
        yield from self._answer(question, mode, history, max_papers, stream=True, filters=filters)

    def query(self, question: str, mode: Mode | None = None, history: Sequence[Turn] | None = None,
              max_papers: int | None = None, stream: bool = False, filters: Filters | None = None) -> PaperQuery:
        """The question as the query engine takes it: what to search with, what to answer, in which mode."""
        question = checked_question(question)  # empty or over the limit: one line the surface shows
        correction = self.retriever.corrected(question)
        searched = correction.text if correction else question
        history = list(history or [])
        rewritten = self.rewrite_question(searched, history) if history else None
        previous = history[-1] if history else None
        return PaperQuery(
            query_str=rewritten or self.standalone_question(searched, history),
            question=rewritten or searched,
            # The mode follows what the user typed, not the rewrite.
            mode=mode or detect_mode(searched),
            max_papers=max_papers,
            stream=stream,
            carry_over=tuple(c.doc_id for c in previous.answer.citations) if previous and previous.answer else (),
            carry_over_question=previous.question if previous else "",
            filters=filters if filters is not None and not filters.empty else None,
            filter_note=self._filter_note(filters),
            searched_for=clean_question(searched) if correction else "",
        )

    def _filter_note(self, filters: Filters | None) -> str:
        """What an answer says about its filter: which, and how many papers pass it."""
        if filters is None or filters.empty:
            return ""
        matching = self.retriever.count_matching(filters)
        if not matching:
            return ""
        total = len(self.papers)
        return words.FILTER_NOTE.format(filters=filters.describe(), matching=matching, total=total)

    def ground(self, question: str, mode: Mode | None = None, judged: bool = False) -> Grounding:
        """Retrieval and grounding without writing: the decision an answer would be written from (for calibration
        and evaluation); the LLM's relevance judge only when `judged`."""
        self.require_index()
        return self.decide(self.query(question, mode), judged)[0]

    def _answer(
        self,
        question: str,
        mode: Mode | None,
        history: Sequence[Turn] | None,
        max_papers: int | None,
        stream: bool,
        filters: Filters | None = None,
    ) -> Iterator[str | Answer]:
        start = time.perf_counter()
        query = self.query(question, mode, history, max_papers, stream, filters)
        self.require_index()
        log.debug("question %r (mode %s)", query.question, query.mode)
        decision, nodes = self.decide(query)  # retrieve, then ground
        retrieved = time.perf_counter()
        try:
            answer = yield from self._drain(self.writer.synthesize(query, nodes, grounding=decision))
        except WriterUnavailable as exc:
            # The cause in one line; its traceback too at DEBUG (on the CLI, stderr is also the user's screen).
            log.warning("%s could not answer (%s); the offline writer answers instead", self.writer_name, exc,
                        exc_info=log.isEnabledFor(logging.DEBUG))
            answer = yield from self._drain(self.fallback.synthesize(query, nodes, grounding=decision))
            answer.notice = words.WRITER_FAILED.format(writer=self.writer_name, reason=exc)
        uncalibrated = model_for(self.settings)[1]  # the store's model is not the decision's, and not calibrated
        if uncalibrated:
            answer.notice = f"{answer.notice} {uncalibrated}" if answer.notice else uncalibrated
        done = time.perf_counter()
        answer.question = clean_question(question)
        answer.searched_for = query.searched_for or None
        answer.timings_ms = {
            "retrieve": round((retrieved - start) * 1000, 1),
            "compose": round((done - retrieved) * 1000, 1),
            "total": round((done - start) * 1000, 1),
        }
        log.info("answered (%s, %s, %d citations) in %.0f ms", answer.mode, "grounded" if answer.grounded else
                 "declined", len(answer.citations), answer.timings_ms["total"])
        yield answer

    @staticmethod
    def _drain(response: Any) -> Generator[str, None, Answer]:
        """Yield a synthesizer's text deltas; return its checked `Answer`."""
        yield from response.response_gen
        answer: Answer = response.metadata["answer"]
        return answer

    def rewrite_question(self, question: str, history: Sequence[Turn]) -> str | None:
        """With an LLM, the question rewritten into a standalone one from the conversation (llama-index's
        condense-question step); None with the offline writer or when the model cannot."""
        if not history:
            return None
        turns = [(t.question, t.answer.answer if t.answer else "") for t in history[-REWRITE_TURNS:]]
        return self.writer.rewrite_question(question, turns)

    def standalone_question(self, question: str, history: Sequence[Turn]) -> str:
        """The question to retrieve with: a follow-up ("and which of them is fastest?") gets the terms of
        the previous question carried over."""
        if not history or not is_follow_up(question):
            return question
        return f"{history[-1].question} {question}"

    def stats(self) -> Stats:
        """Size and location of the index."""
        # From the lexical cache's columns when the collection is as it was saved (no record is read), else a pass
        # over every record.
        lexicon = self._retriever if self._retriever is not None else LexicalCache(self.index).cached()
        if lexicon is not None and lexicon.columns is not None:
            sources = lexicon.columns.counts("source")
        else:
            sources = {}
            for paper in self.index.all_papers():
                sources[paper.source] = sources.get(paper.source, 0) + 1
        return {
            "papers": self.index.count(),
            "chunks": self.index.chunk_count(),
            "store": store_label(self.settings),
            "embedding": self.index.stored_index_version(),  # the model that made the vectors, whatever the settings
            "sources": dict(sorted(sources.items())),
            "sentence_vectors": stored_count(self.index),  # papers no answer has to embed (`ingest --sentences`)
        }
