"""Fit which sentence fills a comparison's Approach and Reported results cells (rag_bot/writing/cells.py); report it
beside the hand-weighted choice it replaces, on the fit part (5-fold) and on the locked part and the seeds.

    python -m bench.fit.cells [--store storage/bench-3000] [--write]   # a store holding the labelled papers

Labels: bench/data/sentence_roles.jsonl. The seeds and the locked part (`locked`, rag_bot.evaluation.split) are never fitted on;
the fit part's role probabilities come from role models refitted without the abstract's own paper (5 folds by
paper, as bench/fit/problem_cell.py makes them). Per cell, a logistic regression (is the sentence labelled method /
result?) over the signals of rag_bot/writing/cells.py; its penalty is chosen by 5-fold accuracy of the cells on the
fit part. A cell is right when its sentence has the cell's role; abstracts with no sentence of that role are not
counted. Writes bench/results/cells.json; only with --write the model rag_bot/writing/cells_model.json (writes a
SHIPPED model).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from bench.fit.labelled import fold, labelled_abstracts, out_of_fold_roles
from bench.fit.roles import LABELS
from bench.fitting import fit_logistic, tell_shipped
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "rag_bot" / "writing" / "cells_model.json"  # written only with --write

PENALTIES = (0.3, 3.0, 30.0)
TARGET = {"Approach": "method", "Reported results": "result"}
# The hand-weighted choice the fitted one replaced (rag_bot/writing/offline.py before): a row's cue-word sentences of
# the row's role, ranked by 3·contribution + approach − 2·(finding with a figure) for Approach and
# 2·finding + figure − 2·limitation for results, a sentence that does not read alone last.
RESULT_CUES = re.compile(
    r"(\d|%|×|\b(outperform\w*|improv\w*|achiev\w*|reduc\w*|speed\w*|surpass\w*|gain\w*|state-of-the-art|"
    r"better|consistent\w*|significant\w*|results? show\w*|experiments? show\w*|demonstrat\w*)\b)",
    re.IGNORECASE,
)

LIMITATION = re.compile(r"\b(however|limitation\w*|fail\w*|suffer\w*|challenge\w*)\b", re.IGNORECASE)

def hand_weighted(sentences: list[str], roles: np.ndarray) -> dict[str, int | None]:
    """The cells as the hand-weighted rule chose them (Approach first, then Reported results)."""
    from rag_bot.writing import cells
    from rag_bot.writing.quotes import clean_quote, reads_alone
    from rag_bot.writing.roles import ROLES

    def approach(s: str) -> int:
        return (3 * bool(cells.CONTRIBUTION.search(s)) + bool(cells._APPROACH.search(s))
                - 2 * bool(cells._FINDING.search(s) and re.search(r"\d", s)))

    def strength(s: str) -> int:
        return (2 * bool(cells._FINDING.search(s)) + bool(re.search(r"\d", s))
                - 2 * bool(LIMITATION.search(s)))

    used: set[str] = set()
    pick: dict[str, int | None] = {}
    for row, cues, pool, key in (("Approach", cells._APPROACH, sentences, approach),
                                 ("Reported results", RESULT_CUES, sentences[::-1], strength)):
        k = ROLES.index(TARGET[row])
        of_role = [s for i, s in enumerate(sentences) if s not in used and int(np.argmax(roles[i])) == k]
        cued = [s for s in pool if cues.search(s) and s not in used] or [s for s in sentences if s not in used]
        candidates = [s for s in cued if s in of_role] or sorted(
            of_role, key=lambda s: -roles[sentences.index(s)][k]) or cued
        candidates = sorted(sorted(candidates, key=key, reverse=True), key=lambda s: not reads_alone(clean_quote(s)))
        pick[row] = sentences.index(candidates[0]) if candidates else None
        used.add(candidates[0] if candidates else "")
    return pick



def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.writing.cells import CELLS, SIGNALS, cell_signals
    from rag_bot.writing.roles import role_probabilities

    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, default=ROOT / "storage" / "bench-3000")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    engine = Engine(Settings(storage=args.store))
    seeds = {p.doc_id for p in engine.papers.values() if not p.source.startswith("ml_abstracts")}
    papers = labelled_abstracts(engine)
    fit = [p for p in papers if not locked(p[0]) and p[0] not in seeds]
    # Out-of-fold role probabilities on the fit part (the role model saw these abstracts), the shipped model's
    # elsewhere (the locked part it never saw; the seeds as a user's collection has them).
    roles: dict[str, np.ndarray] = {p[0]: role_probabilities(p[2]) for p in papers} | out_of_fold_roles(fit)
    signals = {p[0]: cell_signals(p[1], roles[p[0]]) for p in papers}

    def train_cells(part: list, penalty: float) -> dict:
        out = {}
        for row, role in TARGET.items():
            x = np.vstack([signals[p[0]] for p in part])
            y = np.concatenate([[r == role for r in p[3]] for p in part]).astype(float)
            mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
            w, b = fit_logistic((x - mu) / sd, y, penalty)
            out[row] = (mu, sd, w, b)
        return out

    def picks(model: dict | None, part: list) -> list[dict[str, int | None]]:
        """Each abstract's Approach then Reported results sentence (the hand-weighted choice when no model)."""
        out = []
        for p in part:
            if model is None:
                out.append(hand_weighted(p[1], roles[p[0]]))
                continue
            used: set[int] = set()
            pick: dict[str, int | None] = {}
            for row in TARGET:
                mu, sd, w, b = model[row]
                score = ((signals[p[0]] - mu) / sd) @ w + b
                order = [i for i in np.argsort(-score, kind="stable") if i not in used]
                pick[row] = int(order[0]) if order else None
                used.add(pick[row] if pick[row] is not None else -1)
            out.append(pick)
        return out

    def right(part: list, chosen: list) -> dict[str, list]:
        return {row: [p[3][c[row]] == role for p, c in zip(part, chosen) if role in p[3] and c[row] is not None]
                for row, role in TARGET.items()}

    def share(hits: dict[str, list]) -> dict[str, object]:
        return {row: [round(float(np.mean(h)), 3) if h else None, len(h)] for row, h in hits.items()}

    cv = {}
    for penalty in PENALTIES:
        hits: dict[str, list] = {row: [] for row in TARGET}
        for k in range(5):
            test = [p for p in fit if fold(p[0]) == k]
            for row, h in right(test, picks(train_cells([p for p in fit if fold(p[0]) != k], penalty), test)).items():
                hits[row] += h
        cv[penalty] = share(hits)
    penalty = max(PENALTIES, key=lambda c: sum(v[0] for v in cv[c].values()))
    model = train_cells(fit, penalty)
    parts = {"fit (5-fold)": fit, "locked": [p for p in papers if locked(p[0]) and p[0] not in seeds],
             "seeds": [p for p in papers if p[0] in seeds]}
    result = {"penalty": penalty, "fit part, 5-fold, by penalty": {str(c): v for c, v in cv.items()},
              "before": {name: share(right(part, picks(None, part))) for name, part in parts.items()},
              "after": {"fit (5-fold)": cv[penalty],
                        **{name: share(right(part, picks(model, part))) for name, part in parts.items()
                           if name != "fit (5-fold)"}},
              "abstracts": {name: len(part) for name, part in parts.items()}}
    print(json.dumps(result, indent=1))
    (ROOT / "bench" / "results" / "cells.json").write_text(json.dumps(result, indent=1) + "\n")
    if args.write:
        from rag_bot.fitted import Fitted, Weights, record, save
        save(SHIPPED, Fitted(
            features=SIGNALS, functions={CELLS[row]: Weights(np.round(mu, 6), np.round(sd, 6), np.round(w, 6),
                                                             round(float(b), 6))
                                         for row, (mu, sd, w, b) in model.items()},
            notes={"locked": result["after"]["locked"]},
            provenance=record("bench/fit/cells.py", [LABELS], f"bench/fit/cells.py on sentence_roles.jsonl's fit "
                              f"part without the seeds ({len(fit)} abstracts), penalty {penalty}")))
    tell_shipped(SHIPPED, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
