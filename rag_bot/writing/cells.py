"""Which sentence fills a comparison's Approach and Reported results cells: a fitted choice.

Each sentence of an abstract gets its signals (its role probabilities, rag_bot/writing/roles.py; its place; whether
it reads alone; whether it holds a figure; and three cue words of what a contribution, an approach and a finding
say) and, per cell, a logistic regression's score of it having the cell's role (method, result), fitted by
bench/fit/cells.py on the labelled roles' fit part (bench/data/sentence_roles.jsonl, role probabilities from role
models that did not see the abstract). The cell takes the best-scoring sentence not already used.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_bot import fitted
from rag_bot.writing.quotes import clean_quote, reads_alone
from rag_bot.writing.roles import ROLES

MODEL_FILE = Path(__file__).with_name("cells_model.json")
CELLS = {"Approach": "approach", "Reported results": "result"}  # a comparison's row -> its fitted function

# The sentence that states the contribution ("we propose X", "by introducing X").
CONTRIBUTION = re.compile(
    r"\b(we (?:propose|introduce|present|develop|design|build)|introduc(?:e|es|ing)|propos(?:e|es|ing)|"
    r"this (?:paper|work) (?:presents|proposes|introduces))\b",
    re.IGNORECASE,
)
_APPROACH = re.compile(
    r"\b(we (?:propose|introduce|present|develop|design|build|study|formulate|use)|our (?:method|approach|"
    r"framework)|called|named|framework|approach|methods?|introduc\w+|propos\w+|presents?|leverag\w+|"
    r"reformulat\w+|via|by (?:using|learning|modeling|training))\b",
    re.IGNORECASE,
)
_FINDING = re.compile(
    r"\b(outperform\w*|improv\w*|achiev\w*|reduc\w*|speed\w*|surpass\w*|gains?|state-of-the-art|"
    r"results? show\w*|experiments? (?:show|demonstrate)\w*|demonstrat\w*|yield\w*|boost\w*|match\w*)\b",
    re.IGNORECASE,
)
SIGNALS = (*ROLES, "position", "first", "last", "reads alone", "figure", "contribution", "approach", "finding")


def cell_signals(sentences: Sequence[str], roles: np.ndarray) -> np.ndarray:
    """One row of `SIGNALS` per sentence of one abstract (`roles`: its role probabilities, in `ROLES` order)."""
    n = len(sentences)
    if not n:
        return np.zeros((0, len(SIGNALS)))
    position = np.arange(n) / max(n - 1, 1)
    words = [[reads_alone(clean_quote(s)), any(c.isdigit() for c in s), bool(CONTRIBUTION.search(s)),
              bool(_APPROACH.search(s)), bool(_FINDING.search(s))] for s in sentences]
    return np.hstack([roles, np.stack([position, position == 0, position == position[-1]], axis=1),
                      np.asarray(words, dtype=float)]).astype(float)


@lru_cache(maxsize=2)
def _model(path: Path = MODEL_FILE) -> fitted.Fitted:
    return fitted.load(path, SIGNALS, tuple(CELLS.values()))


def cell_orders(sentences: Sequence[str], roles: np.ndarray) -> dict[str, list[int]]:
    """For each fitted row, the abstract's sentences (their indexes) likeliest first (signals computed once)."""
    rows, model = cell_signals(sentences, roles), _model()
    orders = {}
    for row, function in CELLS.items():
        scores = model.probabilities(rows, function)
        orders[row] = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
    return orders


def cell_order(sentences: Sequence[str], roles: np.ndarray, row: str) -> list[int]:
    """The abstract's sentences (their indexes) for one row's cell, likeliest first."""
    return cell_orders(sentences, roles)[row]
