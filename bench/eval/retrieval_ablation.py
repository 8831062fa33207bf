"""The last round's retrieval changes, measured on data nobody tuned them on (issue 20, item 5).

    python -m bench.eval.retrieval_ablation [--sizes 3000 22000] [--generated 600]

Known-item MRR@10 and R@1 of the generated known items (a real paper's title as the question; bench/fit/relevance.py)
and the judged "known" questions (bench/data/relevance_questions.jsonl: a paper described in other words), fit and
locked parts apart, at each size, for the default retrieval and with each change turned back: the fusion constant
(20 -> the customary 60), the acronym ranking (weight 0.5 -> 0), long questions' dense feedback (on -> off).
Derived titles in BM25 cannot be turned back without re-indexing every store and are not measured here. Writes
bench/results/retrieval_ablation.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench.fit.relevance import PAIRS, QUESTIONS, generated_items, read_jsonl
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]

CONFIGS = {"default": {}, "RRF k 60": {"RRF_K": 60}, "no acronym ranking": {"ACRONYM_WEIGHT": 0.0},
           "no feedback": {"feedback": False}}


def rank_of(ranking: list[str], targets: set[str]) -> int | None:
    return next((i + 1 for i, d in enumerate(ranking[:10]) if d in targets), None)


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.retrieval import retrieve
    from rag_bot.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", type=int, default=[3000, 22000])
    parser.add_argument("--generated", type=int, default=600)
    args = parser.parse_args()
    relevant: dict[str, set[str]] = {}
    for p in read_jsonl(PAIRS):
        if p["relevant"]:
            relevant.setdefault(p["qid"], set()).add(p["doc_id"])
    judged = [q for q in read_jsonl(QUESTIONS) if q.get("kind") == "known" and relevant.get(q["id"])]
    report: dict = {}
    for size in args.sizes:
        store = ROOT / "storage" / f"bench-{size}"
        if not (store / "chroma.sqlite3").exists():
            continue
        engine = Engine(Settings(storage=store))
        items = generated_items(engine, size, args.generated)
        sets = {"generated": [(i["id"], i["question"], set(i["target"])) for i in items],
                "judged known": [(q["id"], q["question"], relevant[q["id"]]) for q in judged]}
        for name, change in CONFIGS.items():
            saved = {k: getattr(retrieve, k) for k in change if hasattr(retrieve, k)}
            for k, v in change.items():
                if hasattr(retrieve, k):
                    setattr(retrieve, k, v)
            engine.retriever.settings = Settings(storage=store, feedback=change.get("feedback", True))
            for set_name, questions in sets.items():
                for part in ("fit", "locked"):
                    ranks = [rank_of([p.paper.doc_id for p in engine.retriever.retrieve_papers(q)], t)
                             for qid, q, t in questions if (part == "locked") == locked(qid)]
                    report.setdefault(f"{size} {set_name} {part}", {})[name] = {
                        "n": len(ranks), "MRR@10": round(float(np.mean([1 / r if r else 0 for r in ranks])), 3),
                        "R@1": round(float(np.mean([r == 1 for r in ranks])), 3)}
            for k, v in saved.items():
                setattr(retrieve, k, v)
        print(json.dumps({k: v for k, v in report.items() if k.startswith(str(size))}, indent=1))
    (ROOT / "bench" / "results" / "retrieval_ablation.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
