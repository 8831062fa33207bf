"""Grounding: between retrieval and writing, decide whether the collection answers the question and which
papers become its sources. One fitted decision for every mode and every answer writer.

Each candidate paper gets the probability that it belongs to the answer (rag_bot/grounding/relevance.py: one logistic
model over its signals, fitted on labelled pairs by bench/fit/relevance.py); the sources are the papers over the
mode's fitted cut. When a question joins concepts ("X for Y") and no paper answers it, grounding finds
which part the collection lacks, in the question's own phrases (a `Missing`; writing says it in words).
How sure the decision is (its `certainty`: confident, the collection answers it; tentative, the closest papers may;
none) is the certainty model's (rag_bot/grounding/certainty.py), fitted with its cuts per collection size by
bench/fit/certainty.py.
`GroundingStage` is the stage the engine calls: it returns the typed `Grounding`, which the engine hands to the
writer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
from llama_index.core.schema import NodeWithScore

from rag_bot.grounding import relevance
from rag_bot.grounding.calibration_file import model_for
from rag_bot.grounding.certainty import load as certainty_model
from rag_bot.grounding.certainty import question_signals
from rag_bot.grounding.relevance import RelevanceModel, Topic, covers
from rag_bot.nodes import PaperQuery, scored_paper
from rag_bot.settings import Settings, SettingsError, variable
from rag_bot.store.sentences import SentenceIndex
from rag_bot.topics import is_request, question_concepts, topic_acronyms, topic_phrase, topic_query, topic_words
from rag_bot.types import DECLINED, Certainty, Grounding, Missing, Mode, ScoredPaper

log = logging.getLogger(__name__)

# How many papers an answer may cite (what a reader takes in, not a relevance decision).
ASK_PAPERS = 4  # a direct answer
AREA_PAPERS = 40  # a summary (the most central are summarised, the rest listed)
COMPARE_PAPERS = 4  # a comparison by topic
TENTATIVE_PAPERS = 3  # the closest papers a tentative answer shows (as a refusal names its nearest topics)
# A summary's possibly related papers: at most ten (a reader's list; with a paper limit, what the close ones leave of
# it). At 3,000 papers the close list holds 2.2 papers on average, and the relevant papers close + related recall
# reach 0.9 on the fit part only with up to ten listed (0.80 with three; bench/fit/certainty.py, docs/eval.md).
RELATED_LIMIT = 10


def topic_of(topic: str, vector: np.ndarray, embed: Callable[[list[str]], np.ndarray]) -> Topic:
    """What the relevance signals need of a question's topic (its concepts embedded in one call)."""
    concepts = question_concepts(topic)
    vectors = embed([name for name, _, _ in concepts]) if len(concepts) >= 2 else np.zeros((0, len(vector)))
    return Topic(vector=vector, words=[stems for _, stems in topic_words(topic)],
                 concepts=[(stems, v) for (_, stems, _), v in zip(concepts, vectors)] if len(concepts) >= 2 else [],
                 acronyms=topic_acronyms(topic))


def candidates(papers: Sequence[ScoredPaper], mode: Mode, ask_candidates: int) -> list[ScoredPaper]:
    """The papers whose probability is computed: retrieval's top `ask_candidates` for a direct answer, all it
    found for an area (it retrieves more for one)."""
    return list(papers[:ask_candidates]) if mode == "ask" else list(papers)


def candidate_mismatch(settings: Settings, model: RelevanceModel) -> str | None:
    """Why the settings' candidate counts cannot be grounded with this model (one line naming the variable, the
    fitted count and the fix), or None when they are the ones it was fitted with."""
    for family, name, what in (("ask", "ask_candidates", "a direct answer"),
                               ("area", "area_candidates", "a summary or a comparison")):
        count, fitted = getattr(settings, name), model.candidates.get(family)
        if fitted is not None and count != fitted:
            return (f"{variable(name)}={count}, but the relevance model was fitted with {fitted} candidates for "
                    f"{what}: its signals (a paper's rank, gap, margin and shares among them) would mean something "
                    f"else; unset {variable(name)}, or refit the model with it set (python -m bench.fit.relevance "
                    f"--write)")
    return None


def certainty_of(best: float, mode: Mode, model: RelevanceModel, collection_size: int,
                 confident_cut: float | None = None) -> Certainty:
    """Two-valued, from the relevance model alone (no certainty model given): confident when the best probability
    reaches the answer cut, else none."""
    cut = model.cut(mode, "answer", collection_size) if confident_cut is None else confident_cut
    return "confident" if best >= cut else "none"


def ground(
    papers: Sequence[ScoredPaper],
    probabilities: Sequence[float],
    mode: Mode,
    model: RelevanceModel,
    topic: str = "",
    max_papers: int | None = None,
    answer_cut: float | None = None,
    collection_size: int = 0,
    certainty: Certainty | None = None,
    related_cut: float | None = None,
) -> Grounding:
    """The grounding decision from the candidates' probabilities (in ranking order) and the question's `certainty`
    (the certainty model's, rag_bot/grounding/certainty.py; without it, `certainty_of`: the relevance model's answer
    cut, or `answer_cut`): the papers it answers from (cuts fitted per collection size are read at
    `collection_size`), a summary's possibly related papers from `related_cut` (none without it). A paper the
    question names makes it confident."""
    if not papers:
        return DECLINED
    prob = {p.paper.doc_id: float(x) for p, x in zip(papers, probabilities)}
    best = max(prob.values())
    source_cut = model.cut(mode, "source", collection_size)
    named = [p for p in papers if p.named]
    # The probability ranks the candidates (the answer's `retrieved`, a refusal's nearest papers): the most
    # probable is the paper asked for more often than retrieval's first, on every set and part measured
    # (bench/eval/decision_order.py, docs/eval.md "Which paper leads").
    # A paper the question names is taken whatever its signals (below): it ranks first, at 1.
    ranking = sorted(((p.paper.doc_id, 1.0 if p.named else prob[p.paper.doc_id]) for p in papers),
                     key=lambda item: -item[1])
    by_probability = sorted((p for p in papers if not p.named), key=lambda p: -prob[p.paper.doc_id])
    if named:
        certainty = "confident"
    elif certainty is None:
        certainty = certainty_of(best, mode, model, collection_size, answer_cut)
    if certainty == "none":
        missing, sources = missing_part(topic, papers)
        return Grounding("none", best, sources=sources, missing=missing, ranking=ranking)
    if certainty == "tentative":
        # Shown as the closest matches, most probable first, for the reader to judge: nothing is claimed of them. A
        # summary's are the papers a confident one would list as close or possibly related.
        closest = by_probability[:TENTATIVE_PAPERS]
        if mode == "summary" and related_cut is not None:
            closest = [p for p in by_probability if prob[p.paper.doc_id] >= related_cut][:RELATED_LIMIT] or closest[:1]
        return Grounding("tentative", best, closest, ranking=ranking)
    if mode == "compare":
        if len(named) >= 2:
            return Grounding("confident", best, named, ranking=ranking)
        on_topic = [p for p in by_probability if prob[p.paper.doc_id] >= source_cut]
        # One paper on topic (or one named): the comparison says so and describes it.
        chosen = (named + on_topic)[:COMPARE_PAPERS] or by_probability[:1]
        return Grounding("confident", best, chosen, ranking=ranking)
    if mode == "summary":
        on_topic = [p for p in by_probability if prob[p.paper.doc_id] >= source_cut]
        # Answerable with none over the source cut: its best paper (a question naming papers is about them).
        on_topic = on_topic or ([] if named else by_probability[:1])
        close = (named + on_topic)[:max_papers or AREA_PAPERS]
        # A paper limit (the chat's "Papers to use") bounds the close and the possibly related papers together.
        related = [] if related_cut is None else related_papers(close, by_probability, prob, related_cut)
        related = related[:max(0, max_papers - len(close))] if max_papers else related
        return Grounding("confident", best, close, related=related, ranking=ranking)
    # A direct answer cites the papers over its cut in retrieval's order: by probability its first citation is the
    # paper asked for about as often, not more on every set (bench/eval/decision_order.py, docs/eval.md).
    answering = [p for p in papers if not p.named and prob[p.paper.doc_id] >= source_cut]
    answering = answering or ([] if named else by_probability[:1])
    return Grounding("confident", best, (named + answering)[:max_papers or ASK_PAPERS], ranking=ranking)


def related_papers(close: Sequence[ScoredPaper], by_probability: Sequence[ScoredPaper], prob: dict[str, float],
                   cut: float) -> list[ScoredPaper]:
    """A summary's papers that may be related: not among the close ones, at or over the fitted related cut, most
    probable first, at most RELATED_LIMIT."""
    chosen = {p.paper.doc_id for p in close}
    return [p for p in by_probability if p.paper.doc_id not in chosen and prob[p.paper.doc_id] >= cut][:RELATED_LIMIT]


def missing_part(topic: str, ranked: Sequence[ScoredPaper]) -> tuple[Missing | None, list[ScoredPaper]]:
    """For a question no paper answers that joins concepts ("X for Y"): which part the collection lacks, and the
    closest paper on each part it holds (none when it holds none of the question's distinctive concepts).
    (None, []) for a question of one concept: it is declined."""
    # A part that is only the request ("What has been published" on X) is no concept a paper could hold.
    concepts = tuple(c for c in question_concepts(topic) if not is_request(c[0]))
    if len(concepts) < 2:
        return None, []
    closest = {name: next((p for p in ranked if covers(p.paper, stems)), None) for name, stems, _ in concepts}
    # Each concept named in the question's words less its request ("there graph neural networks" -> "graph neural
    # networks", "What machine learning work exists" -> "machine learning"): rag_bot/topics.py `topic_phrase`.
    said = {name: topic_phrase(name) or name for name, _, _ in concepts}
    held = [(said[name], general) for name, _, general in concepts if closest[name] is not None]
    lacking = [said[name] for name, _, _ in concepts if closest[name] is None]
    chosen = list({p.paper.doc_id: p for p in closest.values() if p is not None}.values())
    if not held or all(general for _, general in held):
        # Only general words ("large language models") are held: nothing covers what the question is about. When
        # nothing is held, that is said as the question's topic (a part split off with its request, "What machine
        # learning work exists", is not one of its concepts).
        phrase, joined = topic_phrase(topic), " or ".join(lacking)
        said_all = (joined or phrase if held else phrase or joined) or topic
        return Missing(lacking=(said_all,)), []
    if lacking:
        return Missing(lacking=tuple(lacking), held=tuple(n for n, _ in held)), chosen
    return Missing(held=tuple(said[name] for name, _, _ in concepts)), chosen


class GroundingStage:
    """The grounding stage the engine calls between retrieval and writing: it returns its decision (a `Grounding`,
    with its certainty) and the candidates it weighed in the order of their probability; it writes nothing on the
    query."""

    def __init__(self, sentences: SentenceIndex, settings: Settings, collection_size: Callable[[], int]) -> None:
        self.sentences = sentences
        self.settings = settings
        self.collection_size = collection_size  # papers in the collection now (the cuts are fitted per size)

    def signals(self, query: PaperQuery, papers: Sequence[ScoredPaper], text: str = ""
                ) -> tuple[list[ScoredPaper], np.ndarray]:
        """The candidates of a question and their rows of relevance signals, measured against the question's topic
        (`text`: the question without the words that ask for a mode, `topic_query`)."""
        text = text or topic_query(query.question)
        topic = topic_of(text, self.sentences.query_vector(text), self.sentences.embedder.embed)
        chosen = candidates(papers, query.mode, self.settings.ask_candidates)
        # The candidates' sentence vectors are made ready together (one model call for those not yet stored).
        vectors = self.sentences.batched([p.paper for p in chosen])
        return chosen, relevance.signals(chosen, topic, vectors)

    def decide(self, query: PaperQuery, papers: Sequence[ScoredPaper]) -> Grounding:
        """The grounding decision for a question's ranked papers; SettingsError when the settings' candidate
        counts are not the ones the model was fitted with (`candidate_mismatch`)."""
        model, _ = model_for(self.settings)  # calibrated to the store's model when it is not MiniLM
        problem = candidate_mismatch(self.settings, model)
        if problem:
            raise SettingsError(problem)
        text = topic_query(query.question)
        chosen, rows = self.signals(query, papers, text)
        probabilities = model.probabilities(rows, query.mode)
        size = self.collection_size()
        graded = certainty_model()
        covered = graded.covered(question_signals(model.calibrated(rows), probabilities), query.mode)
        certainty = graded.certainty(covered, query.mode, size, self.settings.answer_confidence)
        return ground(chosen, probabilities.tolist(), query.mode, model, text, query.max_papers,
                      collection_size=size, certainty=certainty,
                      related_cut=graded.cut(query.mode, "related", size) if query.mode == "summary" else None)

    def run(self, query: PaperQuery, nodes: list[NodeWithScore]) -> tuple[Grounding, list[NodeWithScore]]:
        """The decision for a question's retrieved nodes, and the nodes ranked by it (`ranked`)."""
        decision = self.decide(query, [scored_paper(n) for n in nodes])
        log.debug("grounding: confidence %.3f, %s, %d sources, %d related", decision.evidence, decision.certainty,
                  len(decision.sources), len(decision.related))
        return decision, ranked(nodes, decision.ranking)


def ranked(nodes: list[NodeWithScore], ranking: Sequence[tuple[str, float]]) -> list[NodeWithScore]:
    """The nodes in grounding's order: the candidates it weighed, most probable first, each scored by its
    probability (as a llama-index reranker rescores its nodes), then the rest as retrieved."""
    probability = dict(ranking)
    place = {doc_id: i for i, (doc_id, _) in enumerate(ranking)}
    out = sorted(nodes, key=lambda n: place.get(n.node.node_id, len(place)))
    return [NodeWithScore(node=n.node, score=round(probability[n.node.node_id], 6)) if n.node.node_id in probability
            else n for n in out]

