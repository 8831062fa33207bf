"""Answer writers: sources -> streamed text and a checked, cited `Answer`. They never touch the store.

`PaperSynthesizer` is the contract of every writer (the offline one here, the LLM one in rag_bot/writing/llm.py): the
llama-index response synthesizer both writers implement; it reads the ranked
paper nodes and grounding's typed decision (handed in by the engine as `grounding=`), and by its certainty lets the
writer write from its sources (confident), shows the closest papers for the reader to judge (tentative), or declines
(none). Every sentence it writes itself is a template of rag_bot/answer_words.py.
The offline writer is extractive, deterministic and cited: no network and no LLM.
"""

from __future__ import annotations

import logging
import re
from abc import abstractmethod
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.base.response.schema import StreamingResponse
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper
from llama_index.core.llms.mock import MockLLM
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.response_synthesizers.base import BaseSynthesizer
from llama_index.core.schema import NodeWithScore

from rag_bot import answer_words as words
from rag_bot.errors import WriterUnavailable
from rag_bot.nodes import PaperQuery, scored_paper
from rag_bot.settings import Settings
from rag_bot.store.sentences import SentenceIndex
from rag_bot.text import clean_markup
from rag_bot.topics import topic_phrase, topic_query
from rag_bot.types import DECLINED, Answer, Citation, Filters, Grounding, Missing, Mode, Paper, ScoredPaper
from rag_bot.writing.citations import support_scores
from rag_bot.writing.quotes import quoted

if TYPE_CHECKING:
    from llama_index.core.schema import QueryType

log = logging.getLogger(__name__)

QUOTED_TOPIC_WORDS = 12  # a refusal quotes the question's topic back when it is at most this long (not a pasted abstract)
# ... and when it says what the question is about: its cosine to the question's topic (the shipped embedder) reaches
# this cut, the best accuracy on the fit part of 489 labelled quotes (bench/fit/quoted_topic.py, docs/eval.md).
QUOTED_TOPIC_COSINE = 0.72


def word_deltas(text: str) -> list[str]:
    """A whole text as word-sized stream deltas, so every surface handles one kind of answer stream."""
    return re.findall(r"\S+\s*|\s+", text)


def missing_sentence(missing: Missing) -> str:
    """What the collection lacks of a question joining concepts, said plainly: nothing of it is covered, or some
    parts are not (the closest papers, on the parts it holds, follow), or each part is but none combines them."""
    if not missing.held:
        return words.LACKS_ALL.format(lacking=" or ".join(missing.lacking))
    if missing.lacking:
        return words.LACKS_PART.format(lacking=" or ".join(missing.lacking), held=" and ".join(missing.held))
    return words.LACKS_COMBINATION.format(first=missing.held[0], rest=" and ".join(missing.held[1:]))


def decline(question: str, mode: Mode, ranked: Sequence[ScoredPaper], filters: Filters | None = None,
            missing: str = "", sentences: SentenceIndex | None = None) -> Answer:
    """The plain refusal for a question nothing in the collection is close to: what it lacks (grounding's sentence,
    or the question's own topic when short enough to quote and, given the embedder, close enough to the question to
    say what it is about), and the nearest topics it covers."""
    if filters is not None and not ranked:
        text = words.NO_PAPER_MATCHES_FILTER.format(filters=filters.describe())
        return Answer(question=question, mode=mode, answer=text, grounded=False, citations=[], retrieved=[])
    nearest = ", ".join(f"*{clean_markup(p.paper.title)}*" for p in ranked[:3])
    topic = topic_phrase(question)  # "Can you recommend a paper about baking bread?" -> "baking bread"
    what = f"“{topic}”" if topic and len(topic.split()) <= QUOTED_TOPIC_WORDS and says_topic(question, topic, sentences) \
        else words.NOT_COVERED_THIS
    text = missing or words.NOT_COVERED.format(what=what)
    if nearest:
        text += words.NEAREST_TOPICS.format(titles=nearest)
    return Answer(question=question, mode=mode, answer=text, grounded=False, citations=[], retrieved=[])


def best_sentence(sentences: SentenceIndex, topic: np.ndarray, paper: Paper) -> tuple[str, str]:
    """(quote, shown) of a paper's sentence closest to the question's topic (its vector), led by the sentence before
    it when it points back (rag_bot/writing/quotes.py): what a tentative answer or a possibly related paper is shown
    by."""
    texts, vectors = sentences.of(paper)
    if not texts:
        return clean_markup(paper.title), clean_markup(paper.title)
    i = int(np.argmax(vectors @ topic))
    return quoted(texts[i], texts[i - 1] if i > 0 else "")


def tentative(question: str, mode: Mode, closest: Sequence[ScoredPaper], sentences: SentenceIndex) -> Answer:
    """A tentative answer: it says so first, then the closest papers with their best-matching sentences, cited,
    for the reader to judge; nothing is claimed of them."""
    citations: list[Citation] = []
    lines: list[str] = []
    topic = sentences.query_vector(topic_query(question))
    for n, paper in enumerate(closest, start=1):
        quote, shown = best_sentence(sentences, topic, paper.paper)
        citations.append(Citation(n=n, doc_id=paper.paper.doc_id, title=clean_markup(paper.paper.title),
                                  source=paper.paper.source, quote=quote))
        template = words.TENTATIVE_LEAD if n == 1 else words.TENTATIVE_OTHER
        lines.append(template.format(title=clean_markup(paper.paper.title), ref=f"[{n}]", sentence=f"“{shown}”"))
    text = lines[0] if lines else ""
    if len(lines) > 1:
        text += "\n\n" + words.TENTATIVE_OTHERS + "\n" + "\n".join(lines[1:])
    text += "\n\n" + words.TENTATIVE_CHECK
    return Answer(question=question, mode=mode, answer=text.strip(), grounded=True, certainty="tentative",
                  citations=citations, retrieved=[])


def with_related(answer: Answer, related: Sequence[ScoredPaper], grounding: Grounding, question: str,
                 sentences: SentenceIndex) -> None:
    """A summary's possibly related papers appended as the answer's last block, each cited (numbered after the
    answer's own citations) and shown with its probability."""
    rows = []
    cited = {c.doc_id for c in answer.citations}
    topic = sentences.query_vector(topic_query(question))
    for paper in related:
        if paper.paper.doc_id in cited:
            continue
        n = len(answer.citations) + 1
        answer.citations.append(Citation(n=n, doc_id=paper.paper.doc_id, title=clean_markup(paper.paper.title),
                                         source=paper.paper.source, related=True,
                                         quote=best_sentence(sentences, topic, paper.paper)[0]))
        rows.append(words.RELATED_LINE.format(title=clean_markup(paper.paper.title),
                                              probability=grounding.probability(paper.paper.doc_id) or 0.0,
                                              ref=f"[{n}]"))
    if rows:
        answer.answer += "\n\n" + words.RELATED_HEADING + "\n" + "\n".join(rows)


def says_topic(question: str, phrase: str, sentences: SentenceIndex | None) -> bool:
    """Whether a phrase of the question says what it is about ("predicting wine quality"), not a fragment of it
    ("principled" in "Is there a principled, theory-driven way to decide which cached past tokens to throw away?"):
    its cosine to the question's topic reaches QUOTED_TOPIC_COSINE (the question's vector is the one grounding
    cached; the phrase's joins the phrase cache). Without the shipped embedder's index, it is taken to."""
    if sentences is None:
        return True
    question_vector = sentences.query_vector(topic_query(question))
    return float(sentences.phrase_vectors([phrase])[0] @ question_vector) >= QUOTED_TOPIC_COSINE


def retrieved_list(ranked: Sequence[ScoredPaper], limit: int) -> list[dict[str, float | str]]:
    """The first `limit` of the ranking (RAG_BOT_RETRIEVED_IN_ANSWER) as the JSON contract's `retrieved`."""
    return [{"doc_id": p.paper.doc_id, "score": p.score} for p in ranked[:limit]]


class PaperSynthesizer(BaseSynthesizer):
    """The llama-index response synthesizer of the query engine: from grounding's sources, the writer's
    streamed answer (a `StreamingResponse` whose metadata["answer"] holds the checked `Answer` once the stream
    is drained), or the refusal when grounding chose no source."""

    def __init__(self, sentences: SentenceIndex, settings: Settings) -> None:
        # The writers call their model themselves; the base class only needs an LLM and prompt helpers that they
        # never use: llama-index's no-op model, and helpers counting words (their default loads tiktoken's
        # vocabulary, a third of a second of every cold start).
        super().__init__(llm=MockLLM(), streaming=True, prompt_helper=PromptHelper(tokenizer=str.split),
                         chat_prompt_helper=ChatPromptHelper(tokenizer=str.split))
        self.sentences = sentences
        self.settings = settings

    @property
    @abstractmethod
    def name(self) -> str:
        """"offline", or the model that writes (reported as the answer's `llm`)."""

    @abstractmethod
    def write(self, question: str, mode: Mode, sources: Sequence[ScoredPaper], stream: bool,
              related: int = 0) -> Iterator[str | Answer]:
        """Text deltas of a cited answer from the sources, then the checked `Answer` (its `retrieved` is filled in
        by the caller; a summary's `related` papers, listed after it by the caller, are only counted here); raises
        `WriterUnavailable` when it cannot."""

    def rewrite_question(self, question: str, history: Sequence[tuple[str, str]]) -> str | None:
        """A follow-up rewritten into a standalone question, or None when the writer cannot (no model)."""
        return None

    def synthesize(self, query: QueryType, nodes: list[NodeWithScore],
                   additional_source_nodes: Sequence[NodeWithScore] | None = None,
                   **response_kwargs: Any) -> StreamingResponse:
        """The answer to a `PaperQuery` from its ranked, grounded nodes."""
        if not isinstance(query, PaperQuery):
            raise TypeError("rag-bot writers answer a PaperQuery (the question, its mode and paper limit)")
        grounding = response_kwargs.get("grounding")
        if grounding is None:  # no grounding ran (llama-index's own query path): nothing may be cited
            grounding = DECLINED
        if not isinstance(grounding, Grounding):
            raise TypeError("grounding= must be the grounding stage's `Grounding`")
        metadata: dict[str, object] = {}
        return StreamingResponse(response_gen=self._events(query, nodes, grounding, metadata), source_nodes=nodes,
                                 metadata=metadata)

    def _events(
        self, query: PaperQuery, nodes: Sequence[NodeWithScore], grounding: Grounding, metadata: dict[str, object]
    ) -> Generator[str, None, None]:
        ranked = [scored_paper(n) for n in nodes]
        sources = grounding.sources
        answer: Answer | None = None
        if query.filter_note:  # the answer says which filter it used, first
            yield from word_deltas(f"_{query.filter_note}_\n\n")
        missing = missing_sentence(grounding.missing) if grounding.missing else ""
        measured = self.quote_index()
        said = " or ".join(grounding.missing.lacking) if grounding.missing and not grounding.missing.held else ""
        if said and said == topic_phrase(query.question) and not says_topic(query.question, said, measured):
            missing = ""  # nothing of it held, and the question's topic phrase is a fragment of it: not named
        if grounding.certainty == "tentative":
            answer = tentative(query.question, query.mode, sources, self.sentences)
            yield from word_deltas(answer.answer)
            missing = ""
        elif not sources:
            answer = decline(query.question, query.mode, ranked, query.filters, missing, measured)
            yield from word_deltas(answer.answer)
            missing = ""
        else:
            if missing:  # what the collection lacks of the question leads; the closest papers follow, plainly
                yield from word_deltas(f"{missing}\n\n")
            for event in self.write(query.question, "ask" if missing else query.mode, sources, query.stream,
                                    related=len(grounding.related)):
                if isinstance(event, Answer):
                    answer = event
                else:
                    yield event
            if answer is not None and answer.citations:  # the writer's claims; a tentative answer only quotes
                self._check_support(answer, sources)
            if answer is not None and grounding.related and not missing:  # listed, not claimed: not checked
                before = answer.answer
                with_related(answer, grounding.related, grounding, query.question, self.sentences)
                yield from word_deltas(answer.answer[len(before):])
        if answer is None:
            raise WriterUnavailable("the writer ended without an answer")
        if missing:
            answer.answer = f"{missing}\n\n{answer.answer}"
            answer.mode = query.mode
        if query.filter_note:
            answer.answer = f"_{query.filter_note}_\n\n{answer.answer}"
        # An answer its writer could not ground (a model's that cites no source) claims nothing: certainty none.
        answer.certainty = grounding.certainty if answer.grounded else "none"
        answer.grounded = answer.certainty != "none" or bool(answer.citations)
        for citation in answer.citations:
            citation.probability = grounding.probability(citation.doc_id)
        answer.filters = query.filters
        answer.retrieved = retrieved_list(ranked, self.settings.retrieved_in_answer)
        metadata["answer"] = answer

    def quote_index(self) -> SentenceIndex | None:
        """What a refusal's quoted topic is measured with: the shipped embedder's cosines set its cut, so another
        model's (another scale) quotes as before (None)."""
        from rag_bot.store.embedders import MODEL_NAME, embedder_name

        return self.sentences if embedder_name(self.settings) == MODEL_NAME else None

    def _check_support(self, answer: Answer, sources: Sequence[ScoredPaper]) -> None:
        """Each citation's `support`; a notice names the claims their cited abstract does not back."""
        papers = {p.paper.doc_id: p.paper for p in sources}
        scores = support_scores(answer, papers, self.sentences.of, self.sentences.embedder.embed)
        for citation in answer.citations:
            citation.support = scores.get(citation.n, 1.0)
        weak = [c.n for c in answer.citations if c.support < self.settings.support_threshold]
        if weak:
            marks = ", ".join(f"[{n}]" for n in weak)
            log.info("weakly supported citations: %s", marks)
            note = words.WEAK_SUPPORT.format(marks=marks)
            answer.notice = f"{answer.notice} {note}" if answer.notice else note

    def get_response(self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any) -> str:
        """Not used: rag-bot answers from paper nodes (`synthesize`), never from bare text chunks."""
        raise NotImplementedError("rag-bot writers answer from paper nodes; call synthesize()")

    async def aget_response(self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any) -> str:
        """Not used (see `get_response`)."""
        raise NotImplementedError("rag-bot writers answer from paper nodes; call synthesize()")

    def _get_prompts(self) -> PromptDictType:
        return {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        return None


