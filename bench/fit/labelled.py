"""The labelled abstracts the comparison-cell fitters share (bench/fit/problem_cell.py, bench/fit/cells.py): every
paper of bench/data/sentence_roles.jsonl still in the store as labelled, and role probabilities that never saw the
abstract they describe."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np

from bench.fit.roles import LABELS
from bench.fitting import fit_softmax

ROLE_PENALTY = 100.0  # bench/results/roles.json: the role model's penalty, chosen there by 5-fold accuracy

Labelled = tuple[str, list[str], np.ndarray, list[str]]  # (doc_id, sentences, vectors, labels)


def fold(doc_id: str) -> int:
    """A paper's fold of five (by its id's hash)."""
    return int(hashlib.sha1(doc_id.encode()).hexdigest(), 16) % 5


def labelled_abstracts(engine: object) -> list[Labelled]:
    """The labelled papers the store holds with the sentences they were labelled on (a changed one is left out)."""
    by_paper: dict[str, dict[int, tuple[str, str]]] = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        by_paper.setdefault(row["doc_id"], {})[row["i"]] = (row["role"], row["sha1"])
    papers = []
    for doc_id, rows in by_paper.items():
        paper = engine.papers.get(doc_id)  # type: ignore[attr-defined]
        if paper is None:
            continue
        sentences, vectors = engine.sentences.of(paper)  # type: ignore[attr-defined]
        if len(rows) != len(sentences) or any(hashlib.sha1(sentences[i].encode()).hexdigest()[:12] != sha
                                              for i, (_, sha) in rows.items()):
            continue  # changed since labelled
        papers.append((doc_id, sentences, vectors, [rows[i][0] for i in range(len(sentences))]))
    return papers


def out_of_fold_roles(fit: Sequence[Labelled]) -> dict[str, np.ndarray]:
    """Role probabilities for the fit part from role models refitted without the abstract's own paper (5 folds by
    paper), so they are as sure as on an unseen abstract."""
    from rag_bot.writing.roles import ROLES, role_signals

    features = {p[0]: role_signals(p[2]) for p in fit}
    x_all = np.vstack([features[p[0]] for p in fit])
    mean, scale = x_all.mean(axis=0), x_all.std(axis=0) + 1e-9
    probabilities: dict[str, np.ndarray] = {}
    for k in range(5):
        train = [p for p in fit if fold(p[0]) != k]
        x = (np.vstack([features[p[0]] for p in train]) - mean) / scale
        y = np.concatenate([[ROLES.index(r) for r in p[3]] for p in train])
        w = fit_softmax(x, y, len(ROLES), ROLE_PENALTY)
        for p in fit:
            if fold(p[0]) == k:
                z = np.hstack([(features[p[0]] - mean) / scale, np.ones((len(p[1]), 1))]) @ w
                e = np.exp(z - z.max(axis=1, keepdims=True))
                probabilities[p[0]] = e / e.sum(axis=1, keepdims=True)
    return probabilities
