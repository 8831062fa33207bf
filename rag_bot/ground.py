"""Grounding: between retrieval and writing, decide whether the collection answers the question and which
papers become its sources. One rule for every mode and every answer writer.

The functions are pure (numbers in, decision out); `GroundingPostprocessor` applies them as a llama-index node
postprocessor in the query engine, marking the chosen papers on their nodes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import ConfigDict

from rag_bot.nodes import SOURCE_RANK, PaperQuery, scored_paper
from rag_bot.sentences import SentenceIndex
from rag_bot.settings import Settings
from rag_bot.types import Mode, Paper, ScoredPaper

log = logging.getLogger(__name__)

# How far below the best paper's similarity a paper may be and still be cited (docs/eval.md): a direct answer
# stays close to its best paper; an area summary or a comparison spans more of the collection.
ASK_MARGIN = 0.08
AREA_MARGIN = 0.15
ASK_PAPERS = 4  # most papers a direct answer cites
COMPARE_PAPERS = 4  # candidates beside the named papers of a comparison
EVIDENCE_PAPERS = 3  # top papers whose sentences and words count as evidence
MARGIN_NEIGHBOURS = 4  # papers after the best one whose mean similarity sets its margin


@dataclass(frozen=True)
class Grounding:
    """Whether the collection answers the question, how strongly, and from which papers."""

    grounded: bool
    evidence: float
    sources: list[ScoredPaper] = field(default_factory=list)


def evidence_score(
    question_vector: np.ndarray,
    papers: Sequence[ScoredPaper],
    sentence_vectors: Callable[[Paper], np.ndarray],
    settings: Settings,
) -> float:
    """How well the collection answers the question: the best sentence similarity in the top papers, plus how far
    the best paper stands out from the next ones (a near miss matches many papers a little; an answerable question
    matches one clearly), plus how many of the question's specific words the top papers contain."""
    if not papers:
        return 0.0
    sims = sorted((p.similarity for p in papers), reverse=True)
    margin = sims[0] - float(np.mean(sims[1:1 + MARGIN_NEIGHBOURS])) if len(sims) > 1 else sims[0]
    top = papers[:EVIDENCE_PAPERS]
    best_sentence = max(float((sentence_vectors(p.paper) @ question_vector).max()) for p in top)
    coverage = max(p.coverage for p in top)
    return best_sentence + settings.refusal_margin_weight * margin + settings.refusal_coverage_weight * coverage


def within_reach(papers: Sequence[ScoredPaper], margin: float, limit: int, min_score: float) -> list[ScoredPaper]:
    """Papers close enough to the best match to be cited: named ones, and those within `margin` of the best
    similarity and above `min_score`; at most `limit`, in ranking order."""
    if not papers:
        return []
    floor = max(min_score, max(p.similarity for p in papers) - margin)
    return [p for p in papers if p.named or p.similarity >= floor][:limit]


def select_sources(
    papers: Sequence[ScoredPaper], mode: Mode, settings: Settings, max_papers: int | None = None
) -> list[ScoredPaper]:
    """The papers an answer in this mode is written from (empty when none is close enough)."""
    if mode == "compare":
        named = [p for p in papers if p.named]
        rest = [p for p in within_reach(papers, AREA_MARGIN, COMPARE_PAPERS, settings.min_score) if not p.named]
        chosen = (named + rest)[: max(2, len(named))]
        # A comparison needs two sides: with one clear match, its nearest neighbour is the other.
        return chosen if len(chosen) >= 2 or len(papers) < 2 else list(papers[:2])
    if mode == "summary":
        return within_reach(papers, AREA_MARGIN, max_papers or settings.answer_papers, settings.min_score)
    return within_reach(papers, ASK_MARGIN, max_papers or ASK_PAPERS, settings.min_score)


def ground(
    question_vector: np.ndarray,
    papers: Sequence[ScoredPaper],
    mode: Mode,
    sentence_vectors: Callable[[Paper], np.ndarray],
    settings: Settings,
    max_papers: int | None = None,
) -> Grounding:
    """The grounding decision: a paper the question names, or evidence over the calibrated threshold, and at
    least one paper close enough to cite."""
    if not papers:
        return Grounding(grounded=False, evidence=0.0)
    evidence = evidence_score(question_vector, papers, sentence_vectors, settings)
    if not (papers[0].named or evidence >= settings.refusal_threshold):
        return Grounding(grounded=False, evidence=evidence)
    sources = select_sources(papers, mode, settings, max_papers)
    return Grounding(grounded=bool(sources), evidence=evidence, sources=sources)


class GroundingPostprocessor(BaseNodePostprocessor):
    """The grounding stage in the query engine: keeps the ranked nodes and marks the papers that become sources
    (node metadata `source_rank`); no mark means the question is declined."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    sentences: SentenceIndex
    settings: Settings

    @classmethod
    def class_name(cls) -> str:
        return "GroundingPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not isinstance(query_bundle, PaperQuery):
            raise TypeError("grounding needs a PaperQuery (the question, its mode and paper limit)")
        papers = [scored_paper(n) for n in nodes]
        decision = ground(
            self.sentences.query_vector(query_bundle.question), papers, query_bundle.mode,
            lambda paper: self.sentences.of(paper)[1], self.settings, query_bundle.max_papers,
        )
        log.debug("grounding: evidence %.3f, grounded %s, %d sources", decision.evidence, decision.grounded,
                  len(decision.sources))
        rank = {p.paper.doc_id: i for i, p in enumerate(decision.sources)}
        for node in nodes:
            node.node.metadata[SOURCE_RANK] = rank.get(node.node.node_id)
        return nodes
