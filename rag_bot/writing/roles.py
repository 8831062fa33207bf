"""What each sentence of an abstract does: background, problem, method, result, or other.

A sentence's signals are its MiniLM vector (its own words, by meaning) and its place in the abstract; one softmax
regression, fitted on labelled sentences by bench/fit/roles.py (accuracy per role in docs/eval.md; loaded by
rag_bot/fitted.py), gives its role.
The vectors are the sentence index's (rag_bot/store/sentences.py), so roles cost no extra model call.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_bot import fitted

ROLES = ("background", "problem", "method", "result", "other")
MODEL_FILE = Path(__file__).with_name("roles_model.json")
PLACE = ("position", "first", "last")


@lru_cache(maxsize=4)
def role_features(dimensions: int) -> tuple[str, ...]:
    """The names of `role_signals`' columns for sentence vectors of this many dimensions."""
    return tuple(f"vector {i}" for i in range(dimensions)) + PLACE


def role_signals(vectors: np.ndarray) -> np.ndarray:
    """One row per sentence: its vector, its relative position (0 first, 1 last), and whether it is the first or
    the last sentence."""
    n = len(vectors)
    position = np.arange(n) / max(n - 1, 1)
    place = np.stack([position, position == 0, position == position[-1]], axis=1).astype(float) if n else \
        np.zeros((0, 3))
    return np.hstack([np.asarray(vectors, dtype=float), place])


@lru_cache(maxsize=2)
def _model(dimensions: int, path: Path = MODEL_FILE) -> fitted.Fitted:
    return fitted.load(path, role_features(dimensions), ("role",), classes=ROLES)


def role_probabilities(vectors: np.ndarray) -> np.ndarray:
    """For each sentence of one abstract (its sentence vectors, in order), the probability of each role (columns
    in `ROLES` order)."""
    if len(vectors) == 0:
        return np.zeros((0, len(ROLES)))
    return _model(np.shape(vectors)[1]).probabilities(role_signals(vectors), "role")


def sentence_roles(vectors: np.ndarray) -> list[str]:
    """The role of each sentence of one abstract, from its sentence vectors (in order)."""
    return [ROLES[int(k)] for k in role_probabilities(vectors).argmax(axis=1)]
