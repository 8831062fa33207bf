"""Which sentence of an abstract states the problem it addresses: the comparison's Problem cell.

The role model (rag_bot/writing/roles.py) calls a sentence problem when that is its likeliest role; an abstract whose
problem sentence reads background- or method-likelier ("SAEs decompose …, yet existing methods require …", "However,
existing methods often process …") then had no Problem cell. Here a few signals of each sentence (its role
probabilities, a contrast or difficulty word, its place) are combined by a logistic regression fitted by
bench/fit/problem_cell.py on the labelled abstracts' fit part, with role probabilities from role models that did not
see the abstract; the most problem-like sentence fills the cell when its score reaches the fitted cut.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_bot import fitted
from rag_bot.writing.roles import ROLES

MODEL_FILE = Path(__file__).with_name("problem_model.json")
SIGNALS = ("background", "problem", "method", "result", "cue", "position")

PROBLEM_CUES = re.compile(
    r"\b(however|yet|but|challeng\w*|limit\w*|fail\w*|suffer\w*|problem\w*|gap|costly|expensive|"
    r"bottleneck\w*|struggl\w*|remain\w*|lack\w*|difficult\w*|hinder\w*|issue\w*)\b",
    re.IGNORECASE,
)


def problem_signals(sentences: Sequence[str], probabilities: np.ndarray) -> np.ndarray:
    """One row per sentence: its background, problem, method and result probabilities, whether it holds a contrast
    or difficulty word, and its relative position (0 first, 1 last)."""
    n = len(sentences)
    roles = np.asarray(probabilities, dtype=float)[:, [ROLES.index(r) for r in SIGNALS[:4]]] if n else np.zeros((0, 4))
    cue = np.array([[bool(PROBLEM_CUES.search(s))] for s in sentences], dtype=float).reshape(n, 1)
    position = (np.arange(n) / max(n - 1, 1)).reshape(n, 1)
    return np.hstack([roles, cue, position])


@lru_cache(maxsize=2)
def _model(path: Path = MODEL_FILE) -> fitted.Fitted:
    return fitted.load(path, SIGNALS, ("problem",))


def problem_scores(sentences: Sequence[str], probabilities: np.ndarray) -> np.ndarray:
    """How likely each sentence states the abstract's problem (0..1), by the fitted model."""
    return _model().probabilities(problem_signals(sentences, probabilities), "problem")


def problem_sentence(sentences: Sequence[str], probabilities: np.ndarray, taken: Collection[str] = ()) -> str:
    """The sentence that states the abstract's problem ("" when none scores the fitted cut), other than `taken`."""
    if not len(sentences):
        return ""
    scores = problem_scores(sentences, probabilities)
    free = [i for i, s in enumerate(sentences) if s not in taken]
    best = max(free, key=lambda i: scores[i], default=None)
    return sentences[best] if best is not None and scores[best] >= _model().cut("problem", "cell") else ""
