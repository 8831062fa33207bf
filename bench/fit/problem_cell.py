"""Fit which sentence fills a comparison's Problem cell (rag_bot/writing/problems.py); report it on locked papers.

    python -m bench.fit.problem_cell [--store storage/bench-3000] [--write]   # a store holding the labelled papers

Labels: bench/data/sentence_roles.jsonl. A sentence's signals are its role probabilities, a contrast or difficulty
word, and its place (rag_bot/writing/problems.py). On the fit part (papers not `locked`) the role probabilities
come from role models refitted without the sentence's own paper (5 folds by paper, as bench/fit/roles.py fits
them), so they are as sure as on an unseen abstract; on the locked part they are the shipped model's. A logistic
regression over the signals (is the sentence labelled problem?) is fitted on the fit part; the cut is the score
whose Problem cells are right most often there. A cell is right when its sentence is labelled problem, or when it
is "—" and no sentence of the abstract is. The cell takes the abstract's sentences the role model calls problem
first (rag_bot/writing/offline.py), the fitted model only when there are none. Only with --write is the model saved to
rag_bot/writing/problem_model.json (writes a SHIPPED model).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.fit.labelled import labelled_abstracts, out_of_fold_roles
from bench.fit.roles import LABELS
from bench.fitting import fit_softmax, tell_shipped
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "rag_bot" / "writing" / "problem_model.json"  # written only with --write

PENALTY = 1.0  # the logistic regression has 6 signals and ~1,100 sentences: barely any ridge needed
CUTS = np.round(np.arange(0.05, 0.96, 0.01), 2)


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.writing.problems import SIGNALS, problem_signals
    from rag_bot.writing.roles import ROLES, role_probabilities

    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, default=ROOT / "storage" / "bench-3000")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    engine = Engine(Settings(storage=args.store))
    papers = labelled_abstracts(engine)
    fit = [p for p in papers if not locked(p[0])]
    probabilities = out_of_fold_roles(fit)
    for p in papers:
        if locked(p[0]):
            probabilities[p[0]] = role_probabilities(p[2])
    signals = {p[0]: problem_signals(p[1], probabilities[p[0]]) for p in papers}
    xs = np.vstack([signals[p[0]] for p in fit])
    ys = np.concatenate([[r == "problem" for r in p[3]] for p in fit]).astype(int)
    s_mean, s_scale = xs.mean(axis=0), xs.std(axis=0) + 1e-9
    w2 = fit_softmax((xs - s_mean) / s_scale, ys, 2, PENALTY)
    weights, bias = w2[:-1, 1] - w2[:-1, 0], float(w2[-1, 1] - w2[-1, 0])
    k_problem = ROLES.index("problem")

    def cell(p: tuple, cut: float | None) -> int | None:
        prob = probabilities[p[0]]
        of_role = [i for i in range(len(p[1])) if int(np.argmax(prob[i])) == k_problem]
        if of_role:
            return max(of_role, key=lambda i: prob[i][k_problem])
        if cut is None:
            return None  # the rule before: no problem-argmax sentence, "—"
        score = 1 / (1 + np.exp(-(((signals[p[0]] - s_mean) / s_scale) @ weights + bias)))
        best = int(np.argmax(score))
        return best if score[best] >= cut else None

    def report(part: list, cut: float | None) -> dict:
        chosen = [(cell(p, cut), {i for i, r in enumerate(p[3]) if r == "problem"}) for p in part]
        stated = [(i, g) for i, g in chosen if g]
        unstated = [i for i, g in chosen if not g]
        return {"abstracts": len(chosen),
                "cell right": round(sum((i in g) if i is not None else not g for i, g in chosen) / len(chosen), 3),
                "stated problem: cell filled": round(sum(i is not None for i, _ in stated) / max(len(stated), 1), 3),
                "stated problem: cell is a problem sentence": round(sum(i in g for i, g in stated)
                                                                    / max(len(stated), 1), 3),
                "no stated problem: cell —": round(sum(i is None for i in unstated) / max(len(unstated), 1), 3)}

    lock = [p for p in papers if locked(p[0])]
    right = {float(c): report(fit, float(c))["cell right"] for c in CUTS}
    cut = max(right, key=lambda c: (right[c], c))  # ties: the higher cut, the fewer cells a guess fills
    result = {"cut": cut, "weights": dict(zip(SIGNALS, np.round(weights, 4).tolist())),
              "cell right by cut (fit / locked)": {c: (right[c], report(lock, c)["cell right"]) for c in right
                                                   if round(c * 100) % 2 == 0},
              "before (argmax only)": {"fit": report(fit, None), "locked": report(lock, None)},
              "after": {"fit": report(fit, cut), "locked": report(lock, cut)}}
    print(json.dumps(result, indent=1))
    (ROOT / "bench" / "results" / "problem_cell.json").write_text(json.dumps(result, indent=1) + "\n")
    if args.write:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        from rag_bot.fitted import Fitted, Weights, record, save
        save(ROOT / "rag_bot" / "writing" / "problem_model.json", Fitted(
            features=SIGNALS, functions={"problem": Weights(np.round(s_mean, 6), np.round(s_scale, 6),
                                                            np.round(weights, 6), round(bias, 6))},
            cuts={"problem": {"cell": cut}}, notes={"locked": result["after"]["locked"]},
            provenance=record("bench/fit/problem_cell.py", [LABELS], f"bench/fit/problem_cell.py at {commit} on "
                              f"sentence_roles.jsonl's fit part ({len(fit)} abstracts, {len(ys)} sentences)")))
    tell_shipped(SHIPPED, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
