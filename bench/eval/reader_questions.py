"""Today's retrieval and answers on the reader-written training questions (issue 36's baseline for a tuned model).

    python -m bench.eval.reader_questions [--sizes 3000 22000] [--limit N]

bench/data/reader_questions_*.jsonl holds 1,824 questions written by readers for 1,212 unlocked papers, worded
unlike their abstracts (bench/data/README.md says how). They are training data for a model of our own; before any
model is trained on them, this measures what today's engine does with them, so the gain (or loss) of a tuned model
is read against the same run. Only questions whose target is in the collection count (at 3,000 papers about one in
seven). Per style: the target's rank in the fused ranking (R@1, R@10, MRR@10), and end to end (`engine.ask`, the
offline writer): declined, and whether the target is cited. Every target is an unlocked paper: these figures are
on the training side of the split, never a locked figure. Writes bench/results/reader_questions.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "reader_questions.json"


def read_questions() -> list[dict]:
    """Every reader question, in file order."""
    out = []
    for path in sorted((ROOT / "bench" / "data").glob("reader_questions_*.jsonl")):
        out += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return out


def measure(engine, questions: list[dict]) -> list[dict]:
    """One row per question: the target's rank (None beyond 10), declined, target cited."""
    rows = []
    for q in questions:
        target = q["target"][0]
        mode = "summary" if q["style"] == "area-line" else None
        ranked = [p.paper.doc_id for p in engine.retriever.retrieve_papers(q["question"], top_k=10)]
        answer = engine.ask(q["question"], mode=mode)
        rows.append({"id": q["id"], "style": q["style"], "rank": ranked.index(target) + 1 if target in ranked else None,
                     "declined": not answer.grounded, "cited": target in {c.doc_id for c in answer.citations}})
    return rows


def summarise(rows: list[dict]) -> dict:
    """R@1, R@10, MRR@10, declined and target-cited shares of a group of rows."""
    ranks = [r["rank"] for r in rows]
    return {"n": len(rows), "R@1": round(float(np.mean([r == 1 for r in ranks])), 3),
            "R@10": round(float(np.mean([r is not None for r in ranks])), 3),
            "MRR@10": round(float(np.mean([1 / r if r else 0.0 for r in ranks])), 3),
            "declined": round(float(np.mean([r["declined"] for r in rows])), 3),
            "target cited": round(float(np.mean([r["cited"] for r in rows])), 3)}


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", type=int, default=[3000, 22000])
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions per size (0: all)")
    args = parser.parse_args()
    report = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    questions = read_questions()
    for size in args.sizes:
        store = ROOT / "storage" / f"bench-{size}"
        if not (store / "chroma.sqlite3").exists():
            print(f"skipped {size}: {store} not built (bench/collections.py {size})", file=sys.stderr)
            continue
        engine = Engine(Settings(storage=store))
        held = [q for q in questions if q["target"][0] in engine.retriever.papers]
        held = held[: args.limit] if args.limit else held
        start = time.time()
        rows = measure(engine, held)
        styles = sorted({r["style"] for r in rows})
        report[str(size)] = {"all": summarise(rows), **{s: summarise([r for r in rows if r["style"] == s])
                                                       for s in styles},
                             "seconds": round(time.time() - start, 1), "load average": os.getloadavg()[0],
                             "questions in the collection": f"{len(held)} of {len(questions)}"}
        print(json.dumps({str(size): report[str(size)]}, indent=1))
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
