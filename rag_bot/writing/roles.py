"""What each sentence of an abstract does: background, problem, method, result, or other.

A sentence's signals are its MiniLM vector (its own words, by meaning) and its place in the abstract; one softmax
regression, fitted on labelled sentences by bench/roles_fit.py (accuracy per role in docs/eval.md), gives its role.
The vectors are the sentence index's (rag_bot/store/sentences.py), so roles cost no extra model call.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

ROLES = ("background", "problem", "method", "result", "other")
MODEL_FILE = Path(__file__).with_name("roles_model.npz")


def role_signals(vectors: np.ndarray) -> np.ndarray:
    """One row per sentence: its vector, its relative position (0 first, 1 last), and whether it is the first or
    the last sentence."""
    n = len(vectors)
    position = np.arange(n) / max(n - 1, 1)
    place = np.stack([position, position == 0, position == position[-1]], axis=1).astype(float) if n else \
        np.zeros((0, 3))
    return np.hstack([np.asarray(vectors, dtype=float), place])


@lru_cache(maxsize=2)
def _model(path: Path = MODEL_FILE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = np.load(path)
    if tuple(str(r) for r in data["roles"]) != ROLES:
        raise ValueError(f"{path}: fitted on roles {list(data['roles'])}, this version has {list(ROLES)}")
    return data["mean"], data["scale"], data["weights"]


def role_probabilities(vectors: np.ndarray) -> np.ndarray:
    """For each sentence of one abstract (its sentence vectors, in order), the probability of each role (columns
    in `ROLES` order)."""
    if len(vectors) == 0:
        return np.zeros((0, len(ROLES)))
    mean, scale, weights = _model()
    rows = (role_signals(vectors) - mean) / scale
    scores = np.hstack([rows, np.ones((len(rows), 1))]) @ weights
    scores -= scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    return np.asarray(p / p.sum(axis=1, keepdims=True))


def sentence_roles(vectors: np.ndarray) -> list[str]:
    """The role of each sentence of one abstract, from its sentence vectors (in order)."""
    return [ROLES[int(k)] for k in role_probabilities(vectors).argmax(axis=1)]
