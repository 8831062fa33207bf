"""`rag-bot eval`: a labelled question set through the real pipeline, scored as docs/eval.md reports."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag_bot.engine import Engine
from rag_bot.evaluation import metrics
from rag_bot.types import Answer, Filters, Mode

log = logging.getLogger(__name__)

DEFAULT_SET = Path(__file__).resolve().parents[2] / "tests" / "data" / "dev_questions.jsonl"


@dataclass
class Question:
    """One labelled question."""

    id: str
    question: str
    kind: str  # single | fact | summary | compare | unanswerable
    expected: list[str]
    mode: str | None = None
    fact: str | None = None


def load_questions(path: Path) -> list[Question]:
    """A JSONL question set."""
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                record = json.loads(line)
                out.append(Question(**{k: record.get(k) for k in Question.__dataclass_fields__ if k in record}))
            except (json.JSONDecodeError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: not a question record ({exc})") from exc
    return out


def citation_integrity(answer: Answer) -> bool:
    """Every [n] has a source, every source is cited, numbered 1..k without gaps."""
    used = {int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)}
    numbers = [c.n for c in answer.citations]
    if not answer.grounded:
        return not used and not numbers
    return used == set(numbers) and sorted(numbers) == list(range(1, len(numbers) + 1))


def evaluate(engine: Engine, questions: list[Question], filters: Filters | None = None) -> dict[str, object]:
    """Metrics of the engine on a question set (every question limited to `filters`, if given)."""
    at_1: list[float] = []
    at_5: list[float] = []
    rr_10: list[float] = []
    set_recall: list[float] = []
    topic_precision: list[float] = []
    refusals_ok: list[bool] = []
    false_refusals: list[bool] = []
    facts: list[bool] = []
    integrity: list[bool] = []
    latencies: list[float] = []
    rows: list[dict[str, object]] = []
    for q in questions:
        mode: Mode | None = q.mode if q.kind in ("summary", "compare") else None  # type: ignore[assignment]
        answer = engine.ask(q.question, mode=mode, filters=filters)
        log.debug("%s: grounded %s, %d citations", q.id, answer.grounded, len(answer.citations))
        latencies.append(answer.timings_ms["total"])
        integrity.append(citation_integrity(answer))
        ranking = [str(r["doc_id"]) for r in answer.retrieved]
        cited = [c.doc_id for c in answer.citations]
        row: dict[str, object] = {"id": q.id, "kind": q.kind, "grounded": answer.grounded,
                                  "certainty": answer.certainty}
        # Told wrong, both ways: a question the collection does not answer answered confidently (a tentative answer
        # shows the closest papers for the reader to judge: no claim), one it answers told nothing is close.
        if q.kind == "unanswerable":
            refusals_ok.append(answer.certainty != "confident")
        else:
            false_refusals.append(answer.certainty == "none")
        if q.kind in ("single", "fact"):
            target = q.expected[:1]  # the one paper the question is about
            at_1.append(metrics.success_at_k(ranking, target, 1))
            at_5.append(metrics.success_at_k(ranking, target, 5))
            rr_10.append(metrics.reciprocal_rank(ranking, target, 10))
            row["rank"] = ranking.index(q.expected[0]) + 1 if q.expected[0] in ranking else None
        if q.kind in ("summary", "compare"):
            recall = metrics.recall_at_k(cited, q.expected)
            set_recall.append(recall)
            row["recall"] = recall
            row["cited"] = cited
            if cited:  # topic precision: the share of cited papers that are about the question's topic
                on_topic = len(set(cited) & set(q.expected)) / len(set(cited))
                topic_precision.append(on_topic)
                row["topic_precision"] = round(on_topic, 3)
        if q.kind == "fact" and q.fact:
            ok = q.fact in answer.answer and q.expected[0] in cited
            facts.append(ok)
            row["fact_ok"] = ok
        rows.append(row)

    def mean(values: list[float] | list[bool]) -> float | None:
        value = metrics.mean(values)
        return None if value is None else round(value, 3)

    return {
        "questions": len(questions),
        "R@1": mean(at_1),
        "R@5": mean(at_5),
        "MRR@10": mean(rr_10),
        "summary/compare recall": mean(set_recall),
        "topic precision": mean(topic_precision),
        "refusal accuracy": mean(refusals_ok),
        "false refusals": mean(false_refusals),
        "fact accuracy": mean(facts),
        "citation integrity": mean(integrity),
        "latency p50 ms": round(float(np.percentile(latencies, 50)), 1) if latencies else None,
        "latency p95 ms": round(float(np.percentile(latencies, 95)), 1) if latencies else None,
        "rows": rows,
    }


def format_table(metrics: dict[str, object]) -> str:
    """The metrics as a Markdown table."""
    lines = ["| metric | value |", "|---|---|"]
    for key, value in metrics.items():
        if key != "rows":
            lines.append(f"| {key} | {'n/a' if value is None else value} |")
    return "\n".join(lines)
