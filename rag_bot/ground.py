"""Grounding: between retrieval and writing, decide whether the collection answers the question and which
papers become its sources. One rule for every mode and every answer writer.

The functions are pure (numbers in, decision out); `GroundingPostprocessor` applies them as a llama-index node
postprocessor in the query engine, marking the chosen papers on their nodes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import ConfigDict

from rag_bot.nodes import MISSING, SOURCE_RANK, PaperQuery, scored_paper
from rag_bot.sentences import SentenceIndex
from rag_bot.settings import Settings
from rag_bot.text import holds_acronyms, question_concepts, topic_acronyms, topic_query, topic_words, word_stems
from rag_bot.types import Mode, Paper, ScoredPaper

log = logging.getLogger(__name__)

# How far below the best paper's similarity a paper may be and still be cited (docs/eval.md): a direct answer
# stays close to its best paper; an area summary or a comparison spans more of the collection.
ASK_MARGIN = 0.08
AREA_MARGIN = 0.15
ASK_PAPERS = 4  # most papers a direct answer cites
AREA_PAPERS = 40  # most papers a summary cites (the most central ones are summarised, the rest listed)
# A paper belongs to the area a summary or comparison asks about when its relevance (similarity + best sentence
# + 1.5 x its coverage of the topic's words) is at least 0.7 of the best paper's. Chosen on the dev set's 9 area
# questions plus the 4 of issue 9 (grid of weight 0.5-1.5 x ratio 0.7-0.85; docs/eval.md): topic precision
# 0.955 at recall 0.949, against 0.86 for the old rank cut (within 0.15 of the best similarity, at most 6).
AREA_RATIO = 0.7
AREA_REACH = 0.2  # candidates more than this below the best similarity are not in the area, unless they hold every
# word of the topic (the dense model can rank a paper on the topic far down: "Speculative decoding for meshes")
AREA_COVERAGE_WEIGHT = 1.5
COMPARE_PAPERS = 4  # candidates beside the named papers of a comparison
EVIDENCE_PAPERS = 3  # top papers whose sentences and words count as evidence
MARGIN_NEIGHBOURS = 4  # papers after the best one whose mean similarity sets its margin
QUALIFIED_MIN = 2  # papers of an area holding the topic's acronyms (LLM, RL) for the others to be left out
# A short question names what it is about: when at least FOCUS_UNHELD of its words, and FOCUS_SHARE of them, appear
# in none of the top papers, its evidence must reach `settings.focus_threshold` (docs/eval.md, "Refusal, calibrated").
FOCUS_WORDS = 16
FOCUS_UNHELD = 2
FOCUS_SHARE = 0.4


@dataclass(frozen=True)
class Grounding:
    """Whether the collection answers the question, how strongly, and from which papers."""

    grounded: bool
    evidence: float
    sources: list[ScoredPaper] = field(default_factory=list)
    missing: str = ""  # what the collection lacks of the question ("No paper in the collection combines X with Y")


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
    sentence = max(best_sentence(p, question_vector, sentence_vectors) for p in top)
    coverage = max(p.coverage for p in top)
    return sentence + settings.refusal_margin_weight * margin + settings.refusal_coverage_weight * coverage


def best_sentence(paper: ScoredPaper, vector: np.ndarray, sentence_vectors: Callable[[Paper], np.ndarray]) -> float:
    """The best cosine similarity between a vector (the question's, the topic's) and a sentence of the paper."""
    return float((sentence_vectors(paper.paper) @ vector).max())


def within_reach(papers: Sequence[ScoredPaper], margin: float, limit: int, min_score: float) -> list[ScoredPaper]:
    """Papers close enough to the best match to be cited: named ones, and those within `margin` of the best
    similarity and above `min_score`; at most `limit`, in ranking order."""
    if not papers:
        return []
    floor = max(min_score, max(p.similarity for p in papers) - margin)
    return [p for p in papers if p.named or p.similarity >= floor][:limit]


def relevance(paper: ScoredPaper, topic_vector: np.ndarray, sentence_vectors: Callable[[Paper], np.ndarray]) -> float:
    """How much a paper is about the question's topic: its similarity, its best sentence's, and its coverage of the
    topic's words (weighted: an area is named by its words, "federated", "speculative")."""
    sentence = best_sentence(paper, topic_vector, sentence_vectors)
    return paper.similarity + sentence + AREA_COVERAGE_WEIGHT * paper.coverage


def area_candidates(papers: Sequence[ScoredPaper], settings: Settings) -> list[ScoredPaper]:
    """The papers an area (summary, comparison by topic) may include: not named, above `min_score`, and within
    AREA_REACH of the best similarity or holding every word of the topic."""
    best_similarity = max((p.similarity for p in papers), default=0.0)
    return [p for p in papers if not p.named and p.similarity >= settings.min_score
            and (p.similarity >= best_similarity - AREA_REACH or p.coverage >= 0.999)]


def in_reach(
    papers: Sequence[ScoredPaper],
    candidates: Sequence[ScoredPaper],
    topic_vector: np.ndarray,
    sentence_vectors: Callable[[Paper], np.ndarray],
) -> list[ScoredPaper]:
    """An area's candidates within AREA_REACH of the best similarity, and those holding every word of the topic
    whose best sentence is within AREA_REACH of the best such sentence of the others: the whole abstract of
    "speculative decoding for mesh generation" is far from "speculative decoding", one of its sentences is not
    (a paper that only shares common words, "evaluating" and "models", has no such sentence)."""
    reach = max((p.similarity for p in papers), default=0.0) - AREA_REACH
    near = [p for p in candidates if p.similarity >= reach]
    if not near or len(near) == len(candidates):
        return list(candidates)
    floor = max(best_sentence(p, topic_vector, sentence_vectors) for p in near) - AREA_REACH
    return [p for p in candidates
            if p.similarity >= reach or best_sentence(p, topic_vector, sentence_vectors) >= floor]


def on_topic(
    papers: Sequence[ScoredPaper],
    topic_vector: np.ndarray,
    sentence_vectors: Callable[[Paper], np.ndarray],
    settings: Settings,
    limit: int,
    acronyms: Sequence[str] = (),
    concepts: Sequence[AbstractSet[str]] = (),
) -> list[ScoredPaper]:
    """The papers about the question's topic, most relevant first: a decision per paper (relevance at least
    AREA_RATIO of the best paper's), so two papers when two are on topic and forty when forty are. When the topic
    is qualified by acronyms ("compressing LLM weights") and at least QUALIFIED_MIN of those papers mention what
    they stand for, the others (the technique on other systems) are left out."""
    if not papers:
        return []
    candidates = in_reach(papers, area_candidates(papers, settings), topic_vector, sentence_vectors)
    scores = {p.paper.doc_id: relevance(p, topic_vector, sentence_vectors) for p in candidates}
    top = max(scores.values(), default=0.0)
    kept = sorted((p for p in candidates if scores[p.paper.doc_id] >= AREA_RATIO * top),
                  key=lambda p: -scores[p.paper.doc_id])
    if acronyms:
        kept = qualified(kept, lambda p: holds_acronyms(f"{p.paper.title} {p.paper.text}", acronyms))
    if len(concepts) >= 2:
        kept = joined_area(kept, concepts)
    return ([p for p in papers if p.named] + kept)[:limit]


def qualified(kept: list[ScoredPaper], holds: Callable[[ScoredPaper], bool]) -> list[ScoredPaper]:
    """The papers of an area that hold what qualifies it, when at least QUALIFIED_MIN do; else the area as it is."""
    holders = [p for p in kept if holds(p)]
    return holders if len(holders) >= QUALIFIED_MIN else kept


def joined_area(kept: list[ScoredPaper], concepts: Sequence[AbstractSet[str]]) -> list[ScoredPaper]:
    """The papers of an area whose topic joins concepts ("safety for audio-language models") that hold them all,
    when at least QUALIFIED_MIN do. When fewer do but some paper does (the combination exists; a word check is
    brittle: "unsafe content" for "safety"), those holding the concept the fewest papers hold, when at least
    QUALIFIED_MIN do (the safety papers on text-only LLMs are left out, the audio ones kept)."""
    joined = [p for p in kept if all(covers(p.paper, stems) for stems in concepts)]
    if not joined:
        return kept  # no paper combines them: grounding says which part the collection lacks
    if len(joined) >= QUALIFIED_MIN:
        return joined
    holders = sorted((h for h in ([p for p in kept if covers(p.paper, stems)] for stems in concepts)
                      if len(h) >= QUALIFIED_MIN), key=len)
    if not holders or (len(holders) > 1 and len(holders[0]) == len(holders[1])):
        return kept  # no concept, or two, held by the fewest: nothing says which one qualifies the area
    return holders[0]


def select_sources(
    papers: Sequence[ScoredPaper],
    mode: Mode,
    settings: Settings,
    max_papers: int | None = None,
    topic_vector: np.ndarray | None = None,
    sentence_vectors: Callable[[Paper], np.ndarray] | None = None,
    topic: str = "",
) -> list[ScoredPaper]:
    """The papers an answer in this mode is written from (empty when none is close enough). Summaries and
    comparisons by topic take the papers on topic (with a topic vector and sentence vectors), else those within
    reach of the best match."""
    by_topic = topic_vector is not None and sentence_vectors is not None

    def area(limit: int) -> list[ScoredPaper]:
        assert topic_vector is not None and sentence_vectors is not None
        # A question that names a paper is about it: its acronyms may be names (CAT) and qualify nothing.
        named = any(p.named for p in papers)
        acronyms = [] if named else topic_acronyms(topic)
        concepts = [] if named else [stems for _, stems, _ in question_concepts(topic)]
        return on_topic(papers, topic_vector, sentence_vectors, settings, limit, acronyms, concepts)

    if mode == "compare":
        named = [p for p in papers if p.named]
        if len(named) >= 2:
            return named
        if by_topic:  # one paper on topic: the comparison says so and describes it
            return (named + [p for p in area(COMPARE_PAPERS) if not p.named])[:COMPARE_PAPERS]
        rest = [p for p in within_reach(papers, AREA_MARGIN, COMPARE_PAPERS, settings.min_score) if not p.named]
        chosen = (named + rest)[:max(2, len(named))]
        return chosen if len(chosen) >= 2 or len(papers) < 2 else list(papers[:2])
    if mode == "summary":
        if by_topic:
            return area(max_papers or AREA_PAPERS)
        return within_reach(papers, AREA_MARGIN, max_papers or settings.answer_papers, settings.min_score)
    return within_reach(papers, ASK_MARGIN, max_papers or ASK_PAPERS, settings.min_score)


def ground(
    question_vector: np.ndarray,
    papers: Sequence[ScoredPaper],
    mode: Mode,
    sentence_vectors: Callable[[Paper], np.ndarray],
    settings: Settings,
    max_papers: int | None = None,
    topic_vector: np.ndarray | None = None,
    topic: str = "",
) -> Grounding:
    """The grounding decision: a paper the question names, or evidence over the calibrated threshold, and at
    least one paper close enough to cite (with `topic_vector`, areas are chosen paper by paper)."""
    if not papers:
        return Grounding(grounded=False, evidence=0.0)
    evidence = evidence_score(question_vector, papers, sentence_vectors, settings)
    if not (papers[0].named or evidence >= settings.refusal_threshold):
        return Grounding(grounded=False, evidence=evidence)
    # A join of concepts ("X for Y") is left to `missing_combination`, which says which part the collection lacks.
    if not papers[0].named and evidence < settings.focus_threshold and len(question_concepts(topic)) < 2:
        unheld, share = unheld_words(topic, papers[:EVIDENCE_PAPERS])
        if len(unheld) >= FOCUS_UNHELD and share >= FOCUS_SHARE:
            words = " or ".join(f"“{w}”" for w in unheld[:4])
            return Grounding(grounded=False, evidence=evidence,
                             missing=f"None of the closest papers mentions {words}.")
    sources = select_sources(papers, mode, settings, max_papers, topic_vector,
                             sentence_vectors if topic_vector is not None else None, topic)
    missing = ""
    if topic and sources and mode != "compare" and not any(p.named for p in papers):
        missing, sources = missing_combination(topic, sources, papers)
    return Grounding(grounded=bool(sources), evidence=evidence, sources=sources, missing=missing)


@lru_cache(maxsize=8192)
def _paper_stems(doc_id: str, text: str) -> frozenset[str]:
    return frozenset(word_stems(text))


def _stems_of(paper: Paper) -> frozenset[str]:
    """The stemmed words of a paper's title and abstract (cached per paper)."""
    return _paper_stems(paper.doc_id, f"{paper.title} {paper.text}")


def _holds(have: frozenset[str], stem: str) -> bool:
    # A stem of five letters or more is also held by a word that begins with it: abstracts have typos and cut
    # words ("Speculative Decodin").
    return stem in have or (len(stem) >= 5 and any(h.startswith(stem) for h in have))


def covers(paper: Paper, stems: AbstractSet[str]) -> bool:
    """Whether a paper holds a concept: all of its distinctive stems (two thirds of them when it has three or
    more)."""
    have = _stems_of(paper)
    need = len(stems) if len(stems) <= 2 else -(-2 * len(stems) // 3)
    return sum(1 for s in stems if _holds(have, s)) >= need


def unheld_words(topic: str, papers: Sequence[ScoredPaper]) -> tuple[list[str], float]:
    """The words of a short topic (at most FOCUS_WORDS) that none of the papers holds, in any spelling ("debate",
    "multilingual" when the closest papers are about agents and tokenizers in general), and their share of the
    topic's words; none for a longer topic, which describes its need in many words of its own."""
    words = topic_words(topic) if topic and len(topic.split()) <= FOCUS_WORDS else []
    if not words:
        return [], 0.0
    haves = [_stems_of(p.paper) for p in papers]
    unheld = [word for word, stems in words if not any(_holds(have, s) for have in haves for s in stems)]
    return unheld, len(unheld) / len(words)


def missing_combination(
    topic: str, sources: Sequence[ScoredPaper], ranked: Sequence[ScoredPaper]
) -> tuple[str, list[ScoredPaper]]:
    """For a question that joins concepts ("X for Y") no source holds together: the sentence saying so, and the
    sources completed with the best-ranked paper of each concept they lack (no source at all when the collection
    holds none of the question's distinctive concepts). ("", sources) when nothing is missing."""
    concepts = question_concepts(topic)
    if len(concepts) < 2 or any(all(covers(p.paper, stems) for _, stems, _ in concepts) for p in sources):
        return "", list(sources)
    chosen = list(sources)
    for _, stems, _ in concepts:
        if not any(covers(p.paper, stems) for p in chosen):
            # The concept's own words are the evidence here: a paper holding them is cited for that part.
            extra = next((p for p in ranked if covers(p.paper, stems)), None)
            if extra is not None:
                chosen.append(extra)
    held = [(name, general) for name, stems, general in concepts if any(covers(p.paper, stems) for p in chosen)]
    lacking = [name for name, _, _ in concepts if name not in {n for n, _ in held}]
    if lacking and all(general for _, general in held):
        # Only general words ("large language models") are held: nothing covers what the question is about.
        return f"No paper in the collection covers {' or '.join(lacking)}.", []
    if lacking:
        return (f"No paper in the collection covers {' or '.join(lacking)}; the papers below are about "
                f"{' and '.join(n for n, _ in held)} only.", chosen)
    return (f"No paper in the collection combines {concepts[0][0]} with "
            f"{' and '.join(name for name, _, _ in concepts[1:])}; the papers below cover one or the other.", chosen)


class GroundingPostprocessor(BaseNodePostprocessor):
    """The grounding stage in the query engine: keeps the ranked nodes and marks the papers that become sources
    (node metadata `source_rank`); no mark means the question is declined."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    sentences: SentenceIndex
    settings: Settings

    @classmethod
    def class_name(cls) -> str:
        return "GroundingPostprocessor"

    def decide(self, query: PaperQuery, papers: Sequence[ScoredPaper]) -> Grounding:
        """The grounding decision for a question's ranked papers (the question's topic, without the words that ask
        for a mode, is what evidence and relevance are measured against)."""
        topic_vector = self.sentences.query_vector(topic_query(query.question))
        # Papers whose sentences are scored are embedded together, a group at its first use: the evidence score's top
        # papers, then (when grounded) an area's candidates.
        sentence_vectors = self.sentences.batched(
            [p.paper for p in papers[:EVIDENCE_PAPERS]],
            [p.paper for p in area_candidates(papers, self.settings)] if query.mode != "ask" else [])
        return ground(topic_vector, papers, query.mode, sentence_vectors, self.settings,
                      query.max_papers, topic_vector=topic_vector, topic=topic_query(query.question))

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not isinstance(query_bundle, PaperQuery):
            raise TypeError("grounding needs a PaperQuery (the question, its mode and paper limit)")
        decision = self.decide(query_bundle, [scored_paper(n) for n in nodes])
        log.debug("grounding: evidence %.3f, grounded %s, %d sources", decision.evidence, decision.grounded,
                  len(decision.sources))
        rank = {p.paper.doc_id: i for i, p in enumerate(decision.sources)}
        for node in nodes:
            node.node.metadata[SOURCE_RANK] = rank.get(node.node.node_id)
            node.node.metadata[MISSING] = decision.missing
        return nodes
