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
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.fit.roles import LABELS
from bench.fitting import fit_softmax, tell_shipped
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "rag_bot" / "writing" / "problem_model.json"  # written only with --write

ROLE_PENALTY = 100.0  # bench/results/roles.json: the role model's penalty, chosen there by 5-fold accuracy
PENALTY = 1.0  # the logistic regression has 6 signals and ~1,100 sentences: barely any ridge needed
CUTS = np.round(np.arange(0.05, 0.96, 0.01), 2)


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.writing.problems import SIGNALS, problem_signals
    from rag_bot.writing.roles import ROLES, role_probabilities, role_signals

    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, default=ROOT / "storage" / "bench-3000")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    engine = Engine(Settings(storage=args.store))
    by_paper: dict[str, dict[int, str]] = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        by_paper.setdefault(row["doc_id"], {})[row["i"]] = (row["role"], row["sha1"])
    papers = []  # (doc_id, sentences, vectors, labels)
    for doc_id, rows in by_paper.items():
        paper = engine.papers.get(doc_id)
        if paper is None:
            continue
        sentences, vectors = engine.sentences.of(paper)
        if len(rows) != len(sentences) or any(hashlib.sha1(sentences[i].encode()).hexdigest()[:12] != sha
                                              for i, (_, sha) in rows.items()):
            continue  # changed since labelled
        papers.append((doc_id, sentences, vectors, [rows[i][0] for i in range(len(sentences))]))
    fit = [p for p in papers if not locked(p[0])]
    folds = {p[0]: int(hashlib.sha1(p[0].encode()).hexdigest(), 16) % 5 for p in fit}
    features = {p[0]: role_signals(p[2]) for p in papers}
    x_all = np.vstack([features[p[0]] for p in fit])
    mean, scale = x_all.mean(axis=0), x_all.std(axis=0) + 1e-9
    probabilities: dict[str, np.ndarray] = {}
    for k in range(5):  # out-of-fold role probabilities for the fit part
        train = [p for p in fit if folds[p[0]] != k]
        x = (np.vstack([features[p[0]] for p in train]) - mean) / scale
        y = np.concatenate([[ROLES.index(r) for r in p[3]] for p in train])
        w = fit_softmax(x, y, len(ROLES), ROLE_PENALTY)
        for p in fit:
            if folds[p[0]] == k:
                z = np.hstack([(features[p[0]] - mean) / scale, np.ones((len(p[1]), 1))]) @ w
                e = np.exp(z - z.max(axis=1, keepdims=True))
                probabilities[p[0]] = e / e.sum(axis=1, keepdims=True)
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
