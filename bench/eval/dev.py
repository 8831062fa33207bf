"""Dev-set comparison of retrieval configurations and the refusal calibration, written to docs/eval_dev.md.

Run: `.venv/bin/python -m bench.eval.dev` (indexes the seeds into a temporary store first). The focus check's
calibration also runs over storage/bench-3000 and storage/bench-22000 when bench/collections.py built them.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from rag_bot.engine import Engine
from rag_bot.evaluation.evaluate import DEFAULT_SET, evaluate, load_questions
from rag_bot.grounding.relevance import load
from rag_bot.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

COLUMNS = ["R@1", "R@5", "MRR@10", "summary/compare recall", "refusal accuracy", "false refusals",
           "fact accuracy", "citation integrity", "latency p50 ms", "latency p95 ms"]


def main() -> None:
    """Measure and write the dev-set tables."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no arguments; --help
    questions = load_questions(DEFAULT_SET)
    with tempfile.TemporaryDirectory() as tmp:
        Engine(Settings(storage=Path(tmp))).ingest([ROOT / "seeds"])
        rows = []
        for retrieval in ("dense", "bm25", "hybrid"):
            engine = Engine(Settings(storage=Path(tmp), retrieval=retrieval))
            metrics = evaluate(engine, questions)
            rows.append((retrieval, metrics))
        # The answer's confidence (the best paper's fitted probability) of every question naming no paper.
        engine = Engine(Settings(storage=Path(tmp)))
        scores = {"answerable": [], "unanswerable": []}
        for q in questions:
            papers = engine.retriever.retrieve_papers(q.question)
            if papers and papers[0].named:
                continue  # named papers are always answered
            key = "unanswerable" if q.kind == "unanswerable" else "answerable"
            scores[key].append(engine.ground(q.question).evidence)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = [f"Dev set: {len(questions)} questions (`tests/data/dev_questions.jsonl`), commit `{commit}`, "
             f"{time.strftime('%Y-%m-%d')}.", "",
             "| retrieval | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for retrieval, metrics in rows:
        lines.append(f"| {retrieval} | " + " | ".join(str(metrics[c]) for c in COLUMNS) + " |")
    answerable, unanswerable = np.array(scores["answerable"]), np.array(scores["unanswerable"])
    lines += ["", "Confidence (the best paper's probability under the fitted relevance model, rag_bot/grounding/relevance.py) "
              "of the questions that name no paper:", "",
              "| questions | n | min | p10 | median | p90 | max |", "|---|---|---|---|---|---|---|"]
    for label, values in (("answerable", answerable), ("unanswerable", unanswerable)):
        p = np.percentile(values, [0, 10, 50, 90, 100])
        lines.append(f"| {label} | {len(values)} | " + " | ".join(f"{x:.3f}" for x in p) + " |")
    fitted = load().cut("ask", "answer")  # most dev questions are direct ones
    lines += ["", "| answer cut | refusal accuracy | false refusals |", "|---|---|---|"]
    for t in sorted({fitted, *np.round(np.linspace(0.1, 0.9, 9), 2)}):
        mark = " (fitted)" if t == fitted else ""
        lines.append(f"| {t:.3f}{mark} | {np.mean(unanswerable < t):.3f} | {np.mean(answerable < t):.3f} |")
    text = "\n".join(lines) + "\n"
    (ROOT / "docs" / "eval_dev.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
