"""How sure an answer is: one fitted, question-level decision over what grounding measured of its candidates.

The relevance model (rag_bot/grounding/relevance.py) scores each candidate against the others (its shares, gap and
rank make the best candidate look likely even when every abstract is far from the question). Whether anything in the
collection is close is a question about the absolute evidence: a logistic function (one per family, a direct answer
and an area) of the question's `QUESTION_FEATURES` (the best candidate's probability, and the best similarity,
sentence, word coverage and words held among its candidates) gives the probability that the collection answers the
question. Two cuts per family and collection size turn it into the answer's certainty: "confident" from the
confident cut, "tentative" from the tentative cut, "none" below. The cuts are a risk-coverage choice on the fit part
(bench/fit/certainty.py): at most 2 % of the answerable questions told none, at most 2 % of the unanswerable ones told
confident, and confident answers' first source right at least 95 % of the time; a summary's `related` cut (on the
papers' own probability) lists the papers that may be related under its close ones. The file records the
measurement that chose them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_bot import fitted
from rag_bot.fitted import Cut, Fitted, Provenance, Weights, cut_at
from rag_bot.grounding.relevance import MEASURED
from rag_bot.types import Certainty

MODEL_FILE = Path(__file__).with_name("certainty_model.json")
QUESTION_FEATURES = ("best probability", "best similarity", "best sentence", "best coverage", "best held")
_COLUMNS = [MEASURED.index(name) for name in ("similarity", "sentence", "coverage", "held")]


def question_signals(rows: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """The question's row of `QUESTION_FEATURES` from its candidates' signal rows (as the relevance model read
    them, calibrated) and their probabilities."""
    if len(rows) == 0:
        return np.zeros(len(QUESTION_FEATURES))
    best = np.asarray(rows, dtype=float)[:, _COLUMNS].max(axis=0)
    return np.concatenate([[float(np.max(probabilities))], best])


@dataclass(frozen=True)
class CertaintyModel:
    """The fitted certainty decision: a logistic per family over `QUESTION_FEATURES` and its cuts per collection size
    ({"ask": {"confident": .., "tentative": ..}, "area": {.., "related": ..}})."""

    ask: Weights
    area: Weights
    cuts: dict[str, dict[str, Cut]]
    provenance: Provenance = field(default_factory=Provenance)
    measured: dict = field(default_factory=dict)  # the figures that chose the cuts, per size and family (fit part)

    @staticmethod
    def family(mode: str) -> str:
        """"ask" for a direct answer, "area" for a summary or a comparison."""
        return "ask" if mode == "ask" else "area"

    def covered(self, signals: np.ndarray, mode: str) -> float:
        """The probability that the collection answers a question, from its row of `QUESTION_FEATURES`."""
        weights = self.ask if self.family(mode) == "ask" else self.area
        return float(weights.probabilities(np.asarray(signals, dtype=float)[None, :])[0])

    def cut(self, mode: str, which: str, collection_size: int = 0) -> float:
        """A cut of the mode's family ("confident", "tentative", an area's "related") at this collection size."""
        return cut_at(self.cuts[self.family(mode)][which], collection_size)

    def certainty(self, covered: float, mode: str, collection_size: int, confident_cut: float | None = None
                  ) -> Certainty:
        """The certainty of a question whose probability of being answered is `covered` (`confident_cut`, a
        setting, overrides the fitted confident cut)."""
        confident = self.cut(mode, "confident", collection_size) if confident_cut is None else confident_cut
        if covered >= confident:
            return "confident"
        return "tentative" if covered >= min(self.cut(mode, "tentative", collection_size), confident) else "none"

    def to_json(self) -> str:
        """The model as `load` reads it (rag_bot/fitted.py's format)."""
        return fitted.to_json(Fitted(features=QUESTION_FEATURES, functions={"ask": self.ask, "area": self.area},
                                     cuts=self.cuts, provenance=self.provenance, notes={"measured": self.measured}))


@lru_cache(maxsize=4)
def load(path: Path = MODEL_FILE) -> CertaintyModel:
    """The fitted certainty model shipped with rag-bot (or another file of the same form)."""
    model = fitted.load(path, QUESTION_FEATURES, ("ask", "area"))
    return CertaintyModel(ask=model.functions["ask"], area=model.functions["area"],
                          cuts={k: dict(v) for k, v in model.cuts.items()}, provenance=model.provenance,
                          measured=dict(model.notes.get("measured", {})))  # type: ignore[call-overload]
