"""Dev-set comparison of retrieval configurations and the refusal calibration, written to docs/eval_dev.md.

Run: `.venv/bin/python bench/eval_dev.py` (indexes the seeds into a temporary store first). The focus check's
calibration also runs over storage/bench-3000 and storage/bench-22000 when bench/collections.py built them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag_bot.engine import Engine  # noqa: E402
from rag_bot.evaluate import DEFAULT_SET, Question, evaluate, load_questions  # noqa: E402
from rag_bot.ground import EVIDENCE_PAPERS, unheld_words  # noqa: E402
from rag_bot.settings import Settings  # noqa: E402
from rag_bot.text import question_concepts, topic_query  # noqa: E402

FOCUS_THRESHOLDS = (0.61, 0.70, 0.75, 0.80, 0.85)

COLUMNS = ["R@1", "R@5", "MRR@10", "summary/compare recall", "refusal accuracy", "false refusals",
           "fact accuracy", "citation integrity", "latency p50 ms", "latency p95 ms"]


def main() -> None:
    """Measure and write the dev-set tables."""
    questions = load_questions(DEFAULT_SET)
    with tempfile.TemporaryDirectory() as tmp:
        Engine(Settings(storage=Path(tmp))).ingest([ROOT / "seeds"])
        rows = []
        for retrieval in ("dense", "bm25", "hybrid"):
            engine = Engine(Settings(storage=Path(tmp), retrieval=retrieval))
            metrics = evaluate(engine, questions)
            rows.append((retrieval, metrics))
        # Refusal calibration: the evidence score of every question under the default configuration.
        engine = Engine(Settings(storage=Path(tmp)))
        scores = {"answerable": [], "unanswerable": []}
        for q in questions:
            papers = engine.retriever.retrieve_papers(q.question)
            if papers and papers[0].named:
                continue  # named papers are always answered
            key = "unanswerable" if q.kind == "unanswerable" else "answerable"
            scores[key].append(engine.ground(q.question).evidence)
        focus = {"seeds": focus_calibration(Path(tmp), questions)}
    for size in (3000, 22000):
        store = ROOT / "storage" / f"bench-{size}"
        if (store / "chroma.sqlite3").exists():
            focus[f"{size} (storage/bench-{size})"] = focus_calibration(store, questions)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = [f"Dev set: {len(questions)} questions (`tests/data/dev_questions.jsonl`), commit `{commit}`, "
             f"{time.strftime('%Y-%m-%d')}.", "",
             "| retrieval | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for retrieval, metrics in rows:
        lines.append(f"| {retrieval} | " + " | ".join(str(metrics[c]) for c in COLUMNS) + " |")
    answerable, unanswerable = np.array(scores["answerable"]), np.array(scores["unanswerable"])
    lines += ["", "Evidence score (best sentence similarity in the top 3 papers + margin of the best paper + 0.4 x "
              "question-word coverage), "
              "questions that name no paper:", "",
              "| questions | n | min | p10 | median | p90 | max |", "|---|---|---|---|---|---|---|"]
    for label, values in (("answerable", answerable), ("unanswerable", unanswerable)):
        p = np.percentile(values, [0, 10, 50, 90, 100])
        lines.append(f"| {label} | {len(values)} | " + " | ".join(f"{x:.3f}" for x in p) + " |")
    lines += ["", "| threshold | refusal accuracy | false refusals |", "|---|---|---|"]
    for t in (0.52, 0.55, 0.58, 0.61, 0.64, 0.67):
        lines.append(f"| {t:.2f} | {np.mean(unanswerable < t):.3f} | {np.mean(answerable < t):.3f} |")
    lines += ["", "The focus check for short questions (rag_bot/ground.py): every question that names no paper, is not a "
              "join of concepts, is answered without the check and has a word none of the top 3 papers holds "
              "(evidence; the unheld words and their share of the topic's words). The check declines it below the "
              "focus threshold when at least 2 words and 40 % are unheld.", ""]
    for store, (listed, _) in focus.items():
        lines.append(f"- {store}: " + ("; ".join(listed) or "none"))
    lines += ["", "| focus threshold | " + " | ".join(f"{s} refusal acc. / false refusals" for s in focus) + " |",
              "|---" * (len(focus) + 1) + "|"]
    for t in FOCUS_THRESHOLDS:
        lines.append(f"| {t:.2f} | " + " | ".join(f"{sweep[t][0]:.3f} / {sweep[t][1]:.3f}"
                                               for _, sweep in focus.values()) + " |")
    text = "\n".join(lines) + "\n"
    (ROOT / "docs" / "eval_dev.md").write_text(text)
    print(text)


def focus_calibration(
    store: Path, questions: list[Question]
) -> tuple[list[str], dict[float, tuple[float, float]]]:
    """The questions the focus check can act on in this store, and the refusal accuracy and false refusals at
    each focus threshold."""
    engine = Engine(Settings(storage=store, focus_threshold=0.0))
    listed = []
    for q in questions:
        papers = engine.retriever.retrieve_papers(q.question)
        topic = topic_query(q.question)
        if not papers or papers[0].named or len(question_concepts(topic)) >= 2:
            continue
        decision = engine.ground(q.question)
        unheld, share = unheld_words(topic, papers[:EVIDENCE_PAPERS])
        if decision.grounded and unheld:
            kind = "unanswerable" if q.kind == "unanswerable" else "answerable"
            listed.append(f"{q.id} ({kind}) {decision.evidence:.3f}: {', '.join(unheld)} ({share:.0%})")
    sweep = {}
    for t in FOCUS_THRESHOLDS:
        # The same model, lexicon and sentence vectors: only the grounding's threshold changes.
        swept = Engine(Settings(storage=store, focus_threshold=t), index=engine.index, retriever=engine.retriever,
                       sentences=engine.sentences)
        metrics = evaluate(swept, questions)
        sweep[t] = (float(metrics["refusal accuracy"]), float(metrics["false refusals"]))
    return listed, sweep


if __name__ == "__main__":
    main()
