"""Papers by the same people, on papers the training never named: a fit-side measure of similar papers (issue 36).

    python -m bench.eval.authors shipped train/out/embedder-v4/model ... [--distractors 3000|22000] [--out F]

CSFCube (locked) asks for papers like a paper. The readers' facet set (bench/eval/facets.py) asks the same on
papers that may be tuned on, but its 48 queries did not track CSFCube, nor did finding a paper's own other half
(bench/eval/embedder.py `split_halves`). Both ask about papers the models were trained on; CSFCube's papers were
never seen. This set labels thousands of queries from the collection's own structure instead, and splits them by
whether training ever saw the query paper:

- **Relevant**: another paper of the collection sharing an author (names lower-cased, letters only), the same
  title (a near duplicate) left out. A weak label (nDCG about 0.1), but one for every paper with a co-author's
  other paper in the collection: about 1,600 fit queries at 3,000 papers.
- **Query**: the paper as the store embeds it ("title. abstract", a pasted abstract); candidates: the whole
  benchmark collection, the query left out; score: nDCG@20, binary gains.
- **Parts**: `unseen`, unlocked papers the training pairs file never names, as question's paper or as negative
  (train/out/pairs-v3.jsonl, which train/pairs.py writes; every model compared here was trained from it or its
  predecessors), the fit-side analogue of CSFCube; `seen`, the other unlocked papers; `locked` (sha1(doc_id) % 3 ==
  0), never chosen on. Each model's difference from the first is given with a paired bootstrap 95% interval.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.collections import ML_ABSTRACTS
from bench.eval.embedder import benchmark_papers, embedders, vectors
from rag_bot.evaluation.split import locked
from rag_bot.store.tuning import paper_text

REPO = Path(__file__).resolve().parents[2]
PAIRS = REPO / "train" / "out" / "pairs-v3.jsonl"
OUT = REPO / "bench" / "results" / "authors.json"
K = 20


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def relevant(ids: list[str], titles: dict[str, str]) -> dict[str, set[str]]:
    """doc_id -> the other papers of `ids` sharing an author with it (none for a paper without authors: the seeds),
    near duplicates (the same title) left out; only papers with one or more."""
    wanted = set(ids)
    people: dict[str, set[str]] = {}
    with gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r["id"] in wanted:
                for name in r.get("authors") or []:
                    if _key(name):
                        people.setdefault(_key(name), set()).add(r["id"])
    out: dict[str, set[str]] = {}
    for group in people.values():
        for d in group:
            out.setdefault(d, set()).update(group)
    same = {d: _key(titles[d]) for d in out}
    out = {d: {e for e in group if e != d and same[e] != same[d]} for d, group in out.items()}
    return {d: group for d, group in out.items() if group}


def seen_papers(pairs: Path = PAIRS) -> set[str] | None:
    """Every paper the training pairs file names; None when it has not been written (python -m train.pairs)."""
    if not pairs.exists():
        return None
    return {json.loads(line)["doc_id"] for line in pairs.read_text(encoding="utf-8").splitlines() if line.strip()}


def part(doc_id: str, seen: set[str] | None) -> str:
    if locked(doc_id):
        return "locked"
    if seen is None:
        return "fit"
    return "seen" if doc_id in seen else "unseen"


def ndcg(matrix: np.ndarray, ids: list[str], rel: dict[str, set[str]], chunk: int = 512) -> dict[str, float]:
    """doc_id -> nDCG@20 of the collection ranked by cosine to the paper's own vector (itself left out)."""
    position = {d: i for i, d in enumerate(ids)}
    queries = sorted(rel)
    discount = 1.0 / np.log2(np.arange(2, K + 2))
    out = {}
    for start in range(0, len(queries), chunk):
        batch = queries[start:start + chunk]
        rows = np.array([position[d] for d in batch])
        scores = matrix[rows] @ matrix.T
        scores[np.arange(len(batch)), rows] = -np.inf
        top = np.argpartition(-scores, K, axis=1)[:, :K]
        order = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1), axis=1)
        for n, d in enumerate(batch):
            gains = np.array([ids[j] in rel[d] for j in order[n]], dtype=float)
            ideal = discount[:min(K, len(rel[d]))].sum()
            out[d] = float(gains @ discount / ideal)
    return out


def compare(per_model: dict[str, dict[str, float]], parts: dict[str, str], draws: int = 2000) -> dict[str, Any]:
    """Each part's mean per model, and each model's paired difference from the first with a bootstrap 95% interval
    (seeded)."""
    names = list(per_model)
    base = per_model[names[0]]
    rng = np.random.default_rng(36)
    out: dict[str, Any] = {}
    for label in sorted(set(parts.values())):
        qs = [d for d, p in parts.items() if p == label]
        row: dict[str, Any] = {"n": len(qs)}
        picks = rng.integers(0, len(qs), (draws, len(qs)))
        for name in names:
            values = np.array([per_model[name][d] for d in qs])
            row[name] = {"nDCG@20": round(float(values.mean()), 4)}
            if name != names[0]:
                diff = values - np.array([base[d] for d in qs])
                means = diff[picks].mean(axis=1)
                row[name]["vs first"] = [round(float(diff.mean()), 4), round(float(np.percentile(means, 2.5)), 4),
                                         round(float(np.percentile(means, 97.5)), 4)]
        out[label] = row
    return out


def evaluate(models: list[str], papers: dict[str, tuple[str, str]]) -> dict[str, Any]:
    ids = sorted(papers)
    rel = relevant(ids, {d: papers[d][0] for d in ids})
    seen = seen_papers()
    texts = [paper_text(*papers[d]) for d in ids]
    per_model = {}
    for name in models:
        (p_model, p_key), _ = embedders(name)
        per_model[name] = ndcg(vectors(p_model, p_key, texts, "papers"), ids, rel)
    return compare(per_model, {d: part(d, seen) for d in rel}) | {
        "pairs": str(PAIRS.relative_to(REPO)) if seen is not None else None}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="+")
    parser.add_argument("--distractors", type=int, default=3000, choices=(3000, 22000))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if not ML_ABSTRACTS.exists():
        sys.exit(f"the authors come from {ML_ABSTRACTS}, which is absent")
    papers = benchmark_papers(args.distractors)
    report = {"collection": len(papers), "distractors": args.distractors, "load": round(os.getloadavg()[0], 2),
              **evaluate(args.models, papers)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
