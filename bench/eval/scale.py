"""Quality at size: the dev set and the partial-question set over the seeds mixed with real distractors.

    python -m bench.eval.scale 3000 [22000]      # needs storage/bench-<size> (bench/collections.py builds it)

Writes docs/eval_scale.md: the dev-set metrics (R@5, MRR@10, refusal accuracy, false refusals, summary/compare
recall, topic precision against the dev labels, citation integrity) for the seeds alone and each size, in one run,
and for the partial questions (tests/data/partial_questions.jsonl) the share of answers that state what the
collection lacks (and of control questions that wrongly do). Topic precision here counts a cited distractor as off
topic; real distractors can be on topic, so it is a lower bound: the cited distractors are listed for review.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from rag_bot import answer_words as words
from rag_bot.answer_words import states_missing

ROOT = Path(__file__).resolve().parents[2]
PARTIAL = ROOT / "tests" / "data" / "partial_questions.jsonl"
KEYS = ("R@1", "R@5", "MRR@10", "refusal accuracy", "false refusals", "summary/compare recall", "topic precision",
        "labelled topic precision",
        "citation integrity", "latency p50 ms", "latency p95 ms")


LABELS = ROOT / "bench" / "data" / "topic_labels.jsonl"


def labelled_precision(engine, metrics: dict[str, object], questions) -> dict[str, object]:
    """Topic precision of the summaries and comparisons with the cited distractors judged, not assumed off topic.

    bench/data/topic_labels.jsonl holds one judgement per (question, cited distractor), made by reading the
    abstract: is it about the question's topic? A paper of the question's expected set counts as on topic; a
    cited distractor without a judgement is counted apart (label it and rerun)."""
    labels = {}
    if LABELS.exists():
        for line in LABELS.read_text(encoding="utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                labels[(d["id"], d["title"])] = bool(d["on_topic"])
    expected = {q.id: set(q.expected) for q in questions}
    per_question, unlabelled = [], []
    for row in metrics["rows"]:  # type: ignore[union-attr]
        judged = []
        for doc_id in row.get("cited", []):
            if doc_id in expected[row["id"]]:
                judged.append(True)
                continue
            label = labels.get((row["id"], engine.papers[doc_id].title))
            if label is None:
                unlabelled.append(f"{row['id']}: {engine.papers[doc_id].title}")
            else:
                judged.append(label)
        if judged:
            per_question.append(sum(judged) / len(judged))
    value = round(sum(per_question) / len(per_question), 3) if per_question else None
    return {"labelled topic precision": value, "unlabelled": unlabelled}


def partial_scores(engine) -> dict[str, object]:
    """Share of partial questions whose answer says what is missing, and of controls that wrongly do."""
    said, wrong, rows = [], [], []
    for line in PARTIAL.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        answer = engine.ask(q["question"])
        states = states_missing(answer.answer) and answer.answer.startswith(words.MISSING_OPENINGS[0])
        (said if q["missing"] else wrong).append(states)
        rows.append({"id": q["id"], "states_missing": states, "grounded": answer.grounded,
                     "cited": [c.title for c in answer.citations][:4]})
    return {"partial stated": round(sum(said) / len(said), 3), "controls wrongly stated": round(sum(wrong) / len(wrong), 3),
            "rows": rows}


def main() -> int:
    """Evaluate the seeds and each benchmark size; write docs/eval_scale.md."""
    from rag_bot.engine import Engine
    from rag_bot.evaluation.evaluate import DEFAULT_SET, evaluate, load_questions
    from rag_bot.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[3000])
    args = parser.parse_args()
    questions = load_questions(DEFAULT_SET)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        seeds = Engine(Settings(storage=Path(tmp)))
        seeds.ingest([ROOT / "seeds"])
        metrics = evaluate(seeds, questions)
        results.append(("38 (seeds)", metrics | labelled_precision(seeds, metrics, questions), partial_scores(seeds)))
        for size in args.sizes:
            store = ROOT / "storage" / f"bench-{size}"  # built by bench/collections.py
            if not (store / "chroma.sqlite3").exists():
                print(f"skipped {size}: {store} not built (python -m bench.collections {size})", file=sys.stderr)
                continue
            engine = Engine(Settings(storage=store))
            metrics = evaluate(engine, questions)
            results.append((f"{engine.index.count()}", metrics | labelled_precision(engine, metrics, questions),
                            partial_scores(engine)))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    lines = [f"# Quality at size\n\nDev set (`tests/data/dev_questions.jsonl`) and partial questions "
             f"(`tests/data/partial_questions.jsonl`), commit `{commit}`, one run (`python -m bench.eval.scale`).",
             "", "| papers | " + " | ".join(KEYS) + " | partial questions stating the gap | controls wrongly |",
             "|---" * (len(KEYS) + 3) + "|"]
    for label, metrics, partial in results:
        lines.append(f"| {label} | " + " | ".join(str(metrics.get(k)) for k in KEYS)
                     + f" | {partial['partial stated']} | {partial['controls wrongly stated']} |")
    lines += ["", "Topic precision counts every cited paper outside a question's expected set as off topic: with real "
              "distractors that is only a lower bound. `labelled topic precision` uses the judgements of "
              "bench/data/topic_labels.jsonl (each cited distractor read and judged on or off the question's topic); "
              "cited distractors not yet judged are listed here:", ""]
    for label, metrics, _ in results[1:]:
        lines.append(f"- {label} papers: " + ("; ".join(metrics["unlabelled"]) or "none"))
    for label, _, partial in results[1:]:
        lines += ["", f"Partial questions at {label} papers:", ""]
        lines += [f"- {r['id']}: {'states the gap' if r['states_missing'] else 'no statement'}; "
                  f"grounded {r['grounded']}; cites {', '.join(r['cited']) or 'nothing'}" for r in partial["rows"]]
    text = "\n".join(lines) + "\n"
    (ROOT / "docs" / "eval_scale.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
