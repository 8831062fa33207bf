"""The relevance step before an LLM writes: one batched call judges which retrieved papers answer the question.

The grounding decision (rag_bot/grounding/decide.py) decides offline, from similarities and words, which papers become
the sources. With an LLM writer, `RelevanceJudge` then shows the model the marked sources and the next ranked papers
close enough to cite (at most `JUDGE_CANDIDATES`, each abstract cut to `JUDGE_ABSTRACT_CHARS` characters) and asks,
in one non-streaming call of at most `JUDGE_MAX_TOKENS` tokens, which of them are relevant: the evidence step of
PaperQA2, bounded to one call and a token budget. The reply is strict JSON (`{"relevant": [1, 3]}`); the marks are
rewritten so that the sources are the papers the model judged relevant, in the grounding order, followed by the
ones it adds (it returns the judged `Grounding`). A tentative or declined decision is not judged. Papers the question names are always kept, and a paper the grounding stage placed below
`min_score` is never added. A well-formed empty list declines the question. When the call fails, or its reply is
malformed, empty or out of range, the offline decision stands and the cause is logged. The judge is handed the
call itself (`generate`: messages and a token budget to the whole reply), not a writer: the engine builds it from
the LLM writer, so grounding never imports writing.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from llama_index.core.llms import ChatMessage
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import NodeWithScore

from rag_bot.errors import WriterUnavailable
from rag_bot.grounding.decide import ASK_PAPERS, COMPARE_PAPERS
from rag_bot.nodes import PaperQuery, scored_paper
from rag_bot.prompts import RELEVANCE_TEMPLATE, relevance_messages
from rag_bot.settings import Settings
from rag_bot.types import Grounding

log = logging.getLogger(__name__)

JUDGE_CANDIDATES = 8  # most papers one call judges (the marked sources first, then the next ranked papers)
JUDGE_ABSTRACT_CHARS = 700  # of each abstract: its opening states the topic, which is what is judged
JUDGE_MAX_TOKENS = 200  # the reply is one line of JSON

# The judge's one model call: the messages and a token budget to the whole reply; raises `WriterUnavailable` with the
# one-line reason when the model cannot answer.
Generate = Callable[[Sequence[ChatMessage], int], str]

_JSON_OBJECT = re.compile(r"\{[^{}]*\}")
_RELEVANT_LINE = re.compile(r"^\s*relevant\s*:\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_relevant(reply: str, count: int) -> list[int] | None:
    """The paper numbers (1..count, in reply order, without repeats) a judge's reply names as relevant; [] when it
    says none is; None when the reply is malformed (no `{"relevant": [...]}` object or `RELEVANT: 1, 3` line, an
    item that is not a whole number, or a number that is no candidate's)."""
    items: list[object] | None = None
    for match in _JSON_OBJECT.finditer(reply):  # also inside a ```json fence or after a preamble
        try:
            obj = json.loads(match.group())
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("relevant"), list):
            items = obj["relevant"]
            break
    if items is None:
        line = _RELEVANT_LINE.search(reply)
        if line is None:
            return None
        body = line.group(1).strip("[]. ")
        items = [] if body.lower() in ("", "none") else re.split(r"\s*,\s*|\s+", body)
    numbers: list[int] = []
    for item in items:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item)
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= count:
            return None
        if item not in numbers:
            numbers.append(item)
    return numbers


@dataclass
class RelevanceJudge:
    """After grounding, with an LLM writer: one call decides which candidate papers become the sources (it returns
    the judged `Grounding`); the grounding stage's decision stands when the call or its reply fails."""

    generate: Generate
    settings: Settings
    max_candidates: int = JUDGE_CANDIDATES
    abstract_chars: int = JUDGE_ABSTRACT_CHARS
    max_tokens: int = JUDGE_MAX_TOKENS

    def get_prompts(self) -> dict[str, PromptTemplate]:
        """The prompt this step sends, by name (as llama-index's prompt mixin names them)."""
        return {"relevance": RELEVANCE_TEMPLATE}

    def eligible(self, node: NodeWithScore) -> bool:
        """Whether a paper may be cited at all: the question names it, or it is close enough (`min_score`)."""
        paper = scored_paper(node)
        return paper.named or paper.similarity >= self.settings.min_score

    @staticmethod
    def marked(nodes: Sequence[NodeWithScore], grounding: Grounding) -> list[NodeWithScore]:
        """The nodes of grounding's sources, in its order."""
        by_id = {n.node.node_id: n for n in nodes}
        return [by_id[p.paper.doc_id] for p in grounding.sources if p.paper.doc_id in by_id]

    def candidates(self, nodes: list[NodeWithScore], marked: list[NodeWithScore]) -> tuple[list[NodeWithScore], bool]:
        """The papers to judge (grounding's sources, `marked`, in its order, then the next ranked papers close
        enough to cite, at most `max_candidates`) and whether papers may be added (not when the question names
        papers: then it chose them)."""
        chosen = {n.node.node_id for n in marked}
        may_add = not any(scored_paper(n).named for n in marked)
        extra = [n for n in nodes if n.node.node_id not in chosen and self.eligible(n)] if may_add else []
        return (marked + extra)[: self.max_candidates], may_add

    def _limit(self, query: PaperQuery, marked: int) -> int:
        """Most sources after judging: the question's paper limit, else the mode's (never fewer than grounding's)."""
        if query.max_papers:
            return max(query.max_papers, 1)
        mode_limit = {"ask": ASK_PAPERS, "compare": COMPARE_PAPERS}.get(query.mode, self.settings.answer_papers)
        return max(marked, mode_limit)

    def review(self, query_bundle: PaperQuery, nodes: list[NodeWithScore], grounding: Grounding) -> Grounding:
        """The grounding decision after the model has judged its candidates (`nodes`: grounding's ranking): the
        papers it judged relevant become the sources; the decision stands when the call fails or nothing is to be
        judged (a tentative or declined answer, or only named papers)."""
        if grounding.certainty != "confident":
            return grounding  # nothing is claimed of a tentative answer's papers: nothing to judge
        marked = self.marked(nodes, grounding)
        candidates, may_add = self.candidates(nodes, marked)
        if not marked or all(scored_paper(n).named for n in candidates):
            return grounding  # only named papers: nothing to judge
        chosen = self.judge(query_bundle, candidates)
        if chosen is None:
            return grounding  # the offline decision stands
        relevant = [n for i, n in enumerate(candidates, start=1) if i in chosen or scored_paper(n).named]
        sources: list[NodeWithScore] = []
        if relevant:  # else the model found none relevant, in a well-formed reply: the question is declined
            relevant_ids = {n.node.node_id for n in relevant}
            judged_ids = {n.node.node_id for n in candidates}
            # Marked sources beyond the call's budget were not judged: they stay.
            sources = [n for n in marked if n.node.node_id in relevant_ids or n.node.node_id not in judged_ids]
            if may_add:
                marked_ids = {n.node.node_id for n in marked}
                added = [n for n in relevant if n.node.node_id not in marked_ids]
                sources += added[: max(0, self._limit(query_bundle, len(marked)) - len(sources))]
        kept = {n.node.node_id for n in sources}
        judged = replace(grounding, certainty="confident" if sources else "none",
                         sources=[scored_paper(n) for n in sources],
                         related=[p for p in grounding.related if p.paper.doc_id not in kept] if sources else [])
        log.info("relevance judge: %d of %d candidates relevant; %d sources (grounding had %d)", len(chosen),
                 len(candidates), len(sources), len(marked))
        return judged

    def judge(self, query: PaperQuery, candidates: list[NodeWithScore]) -> set[int] | None:
        """The numbers (1-based) of the candidates the model judges relevant; None when the call fails or its
        reply is malformed (the cause is logged)."""
        messages = relevance_messages(query.question, [scored_paper(n).paper for n in candidates],
                                      self.abstract_chars)
        try:
            reply = self.generate(messages, self.max_tokens)
        except WriterUnavailable as exc:
            log.warning("the relevance judge could not run (%s); the grounding stage's sources stand", exc,
                        exc_info=log.isEnabledFor(logging.DEBUG))
            return None
        numbers = parse_relevant(reply, len(candidates))
        if numbers is None:
            # The reply itself only at DEBUG: a model may echo the question, which is kept out of warnings.
            log.warning("the relevance judge's reply is malformed (%d characters, not a JSON list of paper numbers "
                        "1-%d); the grounding stage's sources stand", len(reply), len(candidates))
            log.debug("the relevance judge replied %r", reply[:300])
            return None
        return set(numbers)
