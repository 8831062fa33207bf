"""The reciprocal-rank fusion constant k, measured on every retrieval set we have, in one run.

    python -m bench.eval.fusion [--k 60 40 20 10]     # writes docs/fusion.md

Sets: the dev set's single-paper and fact questions (R@5, MRR@10) over the seeds, over the seeds + 3,202 real
abstracts (storage/bench-3000) and + 22,148 (storage/bench-22000), built by bench/collections.py; and CSFCube
(nDCG@20, storage/bench-csfcube, built by bench/eval/csfcube.py). A store that is missing is reported as skipped.
Everything else is retrieval as shipped (`PaperRetriever.retrieve_papers`); only `rag_bot.retrieval.retrieve.RRF_K`
changes between columns.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.eval import csfcube
from rag_bot.evaluation import metrics
from rag_bot.evaluation.evaluate import DEFAULT_SET, load_questions
from rag_bot.retrieval import retrieve

ROOT = Path(__file__).resolve().parents[2]




def dev_scores(store: Path, ks: list[int]) -> dict[int, tuple[float, float]]:
    """R@5 and MRR@10 of the dev set's single-paper questions over a store, per k."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    engine = Engine(Settings(storage=store))
    questions = [q for q in load_questions(DEFAULT_SET) if q.kind in ("single", "fact") and q.expected]
    out = {}
    for k in ks:
        retrieve.RRF_K = k
        at5, rr = [], []
        for q in questions:
            ranking = [p.paper.doc_id for p in engine.retriever.retrieve_papers(q.question, top_k=10)]
            at5.append(metrics.success_at_k(ranking, q.expected[:1], 5))
            rr.append(metrics.reciprocal_rank(ranking, q.expected[:1], 10))
        out[k] = (round(sum(at5) / len(at5), 3), round(sum(rr) / len(rr), 3))
    return out


def csfcube_scores(ks: list[int]) -> dict[int, float]:
    """CSFCube nDCG@20 (hybrid, depth 200 as in bench/eval/csfcube.py), per k."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    queries = csfcube.load_queries(csfcube.DATA)
    engine = Engine(Settings(storage=csfcube.DEFAULT_STORE, chunk_candidates=200))
    out = {}
    for k in ks:
        retrieve.RRF_K = k
        scores = []
        for q in queries:
            hits = engine.retriever.retrieve_papers(q["query"], top_k=csfcube.CUTOFF + len(q["exclude_ids"]))
            ranking = csfcube.drop_excluded([h.paper.doc_id for h in hits], q["exclude_ids"])[: csfcube.CUTOFF]
            scores.append(csfcube.score_query(ranking, q)["ndcg"])
        out[k] = round(sum(scores) / len(scores), 4)
    return out


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, nargs="+", default=[60, 40, 20, 10])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "fusion.md")
    args = parser.parse_args()
    shipped = retrieve.RRF_K
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        Engine(Settings(storage=Path(tmp))).ingest([ROOT / "seeds"])
        rows.append(("dev set, 38 seeds: R@5 / MRR@10", dev_scores(Path(tmp), args.k)))
    for size in (3000, 22000):
        store = ROOT / "storage" / f"bench-{size}"
        if (store / "chroma.sqlite3").exists():
            rows.append((f"dev set + distractors (storage/bench-{size}): R@5 / MRR@10", dev_scores(store, args.k)))
        else:
            rows.append((f"dev set + distractors (storage/bench-{size}): skipped, not built", {}))
    if (csfcube.DEFAULT_STORE / "chroma.sqlite3").exists() and csfcube.DATA.exists():
        rows.append(("CSFCube nDCG@20", csfcube_scores(args.k)))
    else:
        rows.append(("CSFCube: skipped, store or data missing", {}))
    retrieve.RRF_K = shipped
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    lines = [f"# Fusion constant\n\n`python -m bench.eval.fusion`, commit `{commit}`: retrieval as shipped (k = {shipped}) "
             "with only the reciprocal-rank fusion constant changed.", "",
             "| set | " + " | ".join(f"k = {k}" for k in args.k) + " |", "|---" * (len(args.k) + 1) + "|"]
    for label, values in rows:
        cells = [" / ".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in (values.get(k, "") for k in args.k)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
