"""The relevance decision: how likely a retrieved paper is to belong to the answer, from one fitted function.

Each candidate paper of a question gets a row of signals (`FEATURES`: its dense similarity, its best sentence's,
word coverage, concepts held by meaning and by words, where it stands among the other candidates), and a logistic
function fitted on labelled pairs (bench/fit/relevance.py, docs/eval.md) turns the row into a probability: one
for a direct answer, one for an area (summary, comparison). Grounding reads two cuts per family, fitted with it:
whether the collection answers at all (the best paper's probability), and which papers are sources (an area's
fitted per collection size). The model file records the data and the commit it was fitted on, the embedding model
whose vectors it was fitted on, and that model's statistics on generated known items (`reference`), which another
model's `Calibration` is fitted to match (rag_bot/grounding/calibrate.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import cast

import numpy as np

from rag_bot import fitted
from rag_bot.fitted import Cut, Fitted, Provenance, Weights, cut_at
from rag_bot.topics import holds_acronyms, word_stems
from rag_bot.types import Paper, ScoredPaper

MODEL_FILE = Path(__file__).with_name("relevance_model.json")
# The signals of a (question, paper) pair, in the model's order.
MEASURED = ("similarity", "sentence", "coverage", "weakest", "held", "joined", "acronyms", "gap", "margin", "rank")
# Each paper's similarity, best sentence and coverage as a share of the best candidate's: an area is judged against
# what the question's best papers reach (measured: recall +0.05 to +0.10 at the same topic precision on the locked
# part at 3,000 and 22,000 papers; docs/eval.md).
SHARES = ("similarity", "sentence", "coverage")
FEATURES = MEASURED + tuple(f"{name} share" for name in SHARES)
# The candidates a model file from before they were recorded was fitted among: retrieval's top 10 for a direct
# answer, its top 40 for an area (then the fixed counts; now RAG_BOT_ASK_CANDIDATES and RAG_BOT_AREA_CANDIDATES).
CANDIDATES_BEFORE_RECORD = {"ask": 10, "area": 40}
MARGIN_NEIGHBOURS = 4  # papers below a paper (by similarity) whose mean similarity sets its margin
# The signals that are cosines of another model's vectors (`Calibration` maps them): a paper's similarity, and its
# sentences' (the best sentence's, and the weakest concept's best).
PAPER_COSINES = ("similarity",)
SENTENCE_COSINES = ("sentence", "weakest")


@dataclass(frozen=True)
class Calibration:
    """Affine maps that put another embedding model's cosines on the scale the model was fitted on: a paper's
    similarity by `paper`, its sentences' by `sentence` (each (slope, intercept)); the gap and margin, differences of
    similarities, scale with the paper's slope, and the shares are taken again from the mapped values."""

    paper: tuple[float, float] = (1.0, 0.0)
    sentence: tuple[float, float] = (1.0, 0.0)
    embedder: str = ""  # the model whose cosines these maps take

    def apply(self, rows: np.ndarray) -> np.ndarray:
        """Rows of `FEATURES` of this model's cosines, as the fitted model's embedder would have given them."""
        if rows.size == 0:
            return rows
        measured = np.array(rows[:, :len(MEASURED)], dtype=float)
        for names, (slope, intercept) in ((PAPER_COSINES, self.paper), (SENTENCE_COSINES, self.sentence)):
            for name in names:
                column = measured[:, MEASURED.index(name)]
                # 0 is "not measured" (a paper found by its words only): it stays 0.
                measured[:, MEASURED.index(name)] = np.where(column == 0, 0.0,
                                                             np.clip(slope * column + intercept, -1.0, 1.0))
        for name in ("gap", "margin"):
            measured[:, MEASURED.index(name)] *= self.paper[0]
        return with_shares(measured)


@dataclass(frozen=True)
class RelevanceModel:
    """The fitted relevance decision: a logistic function of a paper's signals for a direct answer (`ask`: does
    it answer the question?) and one for an area (`area`, summaries and comparisons: is it on the topic?), each
    with its cuts: the collection answers when the best paper's probability reaches `answer`, and the papers
    over `source` are the answer's sources."""

    ask: Weights
    area: Weights
    # {"ask": {"answer": .., "source": ..}, "area": {...}}; a cut is a number, or [[papers, cut], ...] fitted at
    # several collection sizes (read between them on a log scale, held beyond them).
    cuts: Mapping[str, Mapping[str, Cut]]
    provenance: Provenance = field(default_factory=Provenance)
    embedder: str = ""  # the model whose vectors the signals were measured with
    # That model's statistics on generated known items and near misses (calibrate.measure), for other models'
    # calibration; empty in a model file from before them.
    reference: dict = field(default_factory=dict)
    # How many candidates the signals were measured among, per family (Settings ask_candidates, area_candidates):
    # a paper's rank, gap, margin and shares mean something else among another number.
    candidates: dict[str, int] = field(default_factory=lambda: dict(CANDIDATES_BEFORE_RECORD))
    calibration: Calibration | None = None  # set for another embedder's store (calibration_file.model_for)

    @property
    def fitted_on(self) -> str:
        """What the model was fitted on, in words."""
        return self.provenance.fitted_on

    @staticmethod
    def family(mode: str) -> str:
        """"ask" for a direct answer, "area" for a summary or a comparison."""
        return "ask" if mode == "ask" else "area"

    def calibrated(self, rows: np.ndarray) -> np.ndarray:
        """Rows of signals on the scale the model was fitted on (another embedder's through its `calibration`)."""
        return self.calibration.apply(rows) if self.calibration is not None else rows

    def probabilities(self, rows: np.ndarray, mode: str = "ask") -> np.ndarray:
        """The probability that each paper belongs to an answer in this mode, one per row of signals."""
        return (self.ask if self.family(mode) == "ask" else self.area).probabilities(self.calibrated(rows))

    def cut(self, mode: str, which: str, collection_size: int = 0) -> float:
        """A fitted cut of the mode's family ("answer" or "source") for a collection of this many papers."""
        return cut_at(self.cuts[self.family(mode)][which], collection_size)

    def to_json(self) -> str:
        """The model as the file `load` reads (rag_bot/fitted.py's format)."""
        return fitted.to_json(Fitted(features=FEATURES, functions={"ask": self.ask, "area": self.area},
                                     cuts=self.cuts, provenance=self.provenance,
                                     notes={"candidates": self.candidates, "embedder": self.embedder,
                                            "reference": self.reference}))


@lru_cache(maxsize=4)
def load(path: Path = MODEL_FILE) -> RelevanceModel:
    """The fitted model shipped with rag-bot (or another file of the same form)."""
    model = fitted.load(path, FEATURES, ("ask", "area"))
    candidates = cast(dict, model.notes.get("candidates", CANDIDATES_BEFORE_RECORD))
    return RelevanceModel(ask=model.functions["ask"], area=model.functions["area"], cuts=model.cuts,
                          provenance=model.provenance, embedder=str(model.notes.get("embedder", "")),
                          reference=dict(cast(dict, model.notes.get("reference", {}))),
                          candidates={k: int(v) for k, v in candidates.items()})


@dataclass(frozen=True)
class Topic:
    """What a question is about, as the signals need it: its vector, its words, its concepts (each with its
    distinctive stems and its vector) and its acronyms."""

    vector: np.ndarray
    words: Sequence[frozenset[str]] = ()  # per word of the topic, the stems that hold it
    concepts: Sequence[tuple[frozenset[str], np.ndarray]] = ()  # only when the topic joins two or more
    acronyms: Sequence[str] = ()


@lru_cache(maxsize=8192)
def _paper_stems(doc_id: str, text: str) -> frozenset[str]:
    return frozenset(word_stems(text))


def stems_of(paper: Paper) -> frozenset[str]:
    """The stemmed words of a paper's title and abstract (cached per paper)."""
    return _paper_stems(paper.doc_id, f"{paper.title} {paper.text}")


def holds(have: frozenset[str], stem: str) -> bool:
    """Whether a paper's stems hold a stem; one of five letters or more is also held by a word that begins with
    it (abstracts have typos and cut words: "Speculative Decodin")."""
    return stem in have or (len(stem) >= 5 and any(h.startswith(stem) for h in have))


def covers(paper: Paper, stems: frozenset[str]) -> bool:
    """Whether a paper holds a concept's words: all of them (two thirds when it has three or more)."""
    have = stems_of(paper)
    need = len(stems) if len(stems) <= 2 else -(-2 * len(stems) // 3)
    return sum(1 for s in stems if holds(have, s)) >= need


def signals(
    papers: Sequence[ScoredPaper], topic: Topic, sentence_vectors: Callable[[Paper], np.ndarray]
) -> np.ndarray:
    """One row of `FEATURES` per paper, in the papers' (ranking) order."""
    if not papers:
        return np.zeros((0, len(FEATURES)))
    sims = np.array([p.similarity for p in papers])
    order = np.sort(sims)[::-1]
    best = float(order[0])
    rows = []
    for rank, paper in enumerate(papers):
        vectors = sentence_vectors(paper.paper)
        sentence = float((vectors @ topic.vector).max())
        if len(topic.concepts) >= 2:
            weakest = min(float((vectors @ vector).max()) for _, vector in topic.concepts)
            joined = sum(covers(paper.paper, stems) for stems, _ in topic.concepts) / len(topic.concepts)
        else:
            weakest, joined = sentence, 1.0
        have = stems_of(paper.paper)
        held = (sum(any(holds(have, s) for s in stems) for stems in topic.words) / len(topic.words)
                if topic.words else 1.0)
        acronyms = 1.0 if not topic.acronyms or holds_acronyms(f"{paper.paper.title} {paper.paper.text}",
                                                                  topic.acronyms) else 0.0
        below = order[order < paper.similarity][:MARGIN_NEIGHBOURS]
        margin = paper.similarity - float(below.mean()) if below.size else 0.0
        rows.append([paper.similarity, sentence, paper.coverage, weakest, held, joined, acronyms,
                     best - paper.similarity, margin, math.log1p(rank)])
    return with_shares(np.asarray(rows, dtype=float))


def with_shares(measured: np.ndarray) -> np.ndarray:
    """The rows of `MEASURED` signals of one question's candidates, with the `SHARES` columns appended."""
    if measured.size == 0:
        return np.zeros((0, len(FEATURES)))
    columns = [MEASURED.index(name) for name in SHARES]
    shares = measured[:, columns] / np.maximum(measured[:, columns].max(axis=0), 1e-6)
    return np.hstack([measured, shares])
