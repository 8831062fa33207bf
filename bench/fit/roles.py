"""Fit the sentence-role classifier (rag_bot/writing/roles.py) on labelled sentences; report accuracy per role.

    python -m bench.fit.roles [--write]        # needs storage/bench-3000 (bench/collections.py) for the papers

Labels: bench/data/sentence_roles.jsonl (every sentence of the 38 seeds and of 240 other abstracts). A sentence's
signals are its MiniLM vector (its own words, by meaning) and its place in the abstract (relative position,
first, last); a softmax regression over them is fitted on the papers not `locked` (rag_bot.evaluation.split) and reported on
the locked rest. Only with --write is the model saved to rag_bot/writing/roles_model.json (writes a SHIPPED model).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from bench.fitting import fit_softmax, tell_shipped
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]

LABELS = ROOT / "bench" / "data" / "sentence_roles.jsonl"
SHIPPED = ROOT / "rag_bot" / "writing" / "roles_model.json"  # written only with --write
PENALTIES = (10.0, 100.0, 300.0, 1000.0, 3000.0)  # ridge penalties tried; the best 5-fold accuracy on the fit part wins


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.store.sentences import paper_sentences
    from rag_bot.writing.roles import ROLES, role_signals

    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    store = ROOT / "storage" / "bench-3000"
    if not (store / "chroma.sqlite3").exists():
        print(f"{store} is not built: python -m bench.collections 3000", file=sys.stderr)
        return 1
    engine = Engine(Settings(storage=store))
    labels = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_paper: dict[str, dict[int, dict]] = {}
    for row in labels:
        by_paper.setdefault(row["doc_id"], {})[row["i"]] = row
    xs, ys, parts, docs, drift = [], [], [], [], 0
    for doc_id, rows in by_paper.items():
        paper = engine.retriever.papers[doc_id]
        sentences, vectors = engine.sentences.of(paper)
        if len(sentences) != len(paper_sentences(paper)):
            continue
        features = role_signals(vectors)
        for i, row in rows.items():
            if i >= len(sentences) or hashlib.sha1(sentences[i].encode()).hexdigest()[:12] != row["sha1"]:
                drift += 1
                continue
            xs.append(features[i])
            ys.append(ROLES.index(row["role"]))
            parts.append("locked" if locked(doc_id) else "fit")
            docs.append(doc_id)
    x, y, parts_a = np.asarray(xs), np.asarray(ys), np.asarray(parts)
    fit = parts_a == "fit"
    mean, scale = x[fit].mean(axis=0), x[fit].std(axis=0) + 1e-9
    z = (x - mean) / scale
    folds = np.array([int(hashlib.sha1(d.encode()).hexdigest(), 16) % 5 for d in docs])
    cv = {}
    for l2 in PENALTIES:  # 5 folds by paper, within the fit part
        right = 0
        for k in range(5):
            train, test = fit & (folds != k), fit & (folds == k)
            wk = fit_softmax(z[train], y[train], len(ROLES), l2)
            right += int((np.argmax(np.hstack([z[test], np.ones((int(test.sum()), 1))]) @ wk, axis=1) == y[test]).sum())
        cv[l2] = right / int(fit.sum())
    l2 = max(cv, key=cv.__getitem__)
    w = fit_softmax(z[fit], y[fit], len(ROLES), l2)
    predicted = np.argmax(np.hstack([(x - mean) / scale, np.ones((len(x), 1))]) @ w, axis=1)
    report: dict = {"sentences": len(y), "changed since labelled": drift, "penalty": l2,
                    "cross-validated accuracy": {str(k): round(v, 3) for k, v in cv.items()}}
    for part in ("fit", "locked"):
        chosen = parts_a == part
        per_role = {}
        for k, role in enumerate(ROLES):
            gold = chosen & (y == k)
            said = chosen & (predicted == k)
            tp = int((gold & (predicted == k)).sum())
            per_role[role] = {"n": int(gold.sum()), "recall": round(tp / max(gold.sum(), 1), 3),
                              "precision": round(tp / max(said.sum(), 1), 3)}
        report[part] = {"n": int(chosen.sum()), "accuracy": round(float((predicted[chosen] == y[chosen]).mean()), 3),
                        "roles": per_role}
    print(json.dumps(report, indent=1))
    (ROOT / "bench" / "results" / "roles.json").write_text(json.dumps(report, indent=1) + "\n")
    if args.write:
        from rag_bot.fitted import Fitted, Weights, record, save
        from rag_bot.writing.roles import MODEL_FILE, PLACE, role_features
        save(MODEL_FILE, Fitted(features=role_features(x.shape[1] - len(PLACE)), classes=ROLES, functions={
            "role": Weights(mean=mean, scale=scale, weights=w[:-1], bias=w[-1])}, provenance=record(
            "bench/fit/roles.py", [LABELS], f"bench/fit/roles.py on {LABELS.name}'s fit part: {int(fit.sum())} of "
            f"{len(y)} labelled sentences, ridge penalty {l2}")))
    tell_shipped(SHIPPED, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
