"""rag_bot.evaluation.evaluate on scripted answers: the rank metrics, set recall, refusals and the output keys."""

from __future__ import annotations

from typing import Any

import pytest

from rag_bot.evaluation.evaluate import Question, citation_integrity, evaluate, format_table
from rag_bot.types import Answer, Citation

KEYS = ["questions", "R@1", "R@5", "MRR@10", "summary/compare recall", "topic precision", "refusal accuracy", "false refusals",
        "fact accuracy", "citation integrity", "latency p50 ms", "latency p95 ms", "rows"]


def answer(question: str, retrieved: list[str], cited: list[str], grounded: bool = True, text: str = "") -> Answer:
    """An answer citing `cited` (numbered 1..k) after retrieving `retrieved`."""
    citations = [Citation(n=i, doc_id=d, title=d, source="test", quote="q") for i, d in enumerate(cited, start=1)]
    body = text + " " + " ".join(f"[{c.n}]" for c in citations) if grounded else "I cannot answer that."
    return Answer(question=question, mode="ask", answer=body, grounded=grounded, citations=citations,
                  certainty="confident" if grounded else "none",
                  retrieved=[{"doc_id": d, "score": 1.0} for d in retrieved], timings_ms={"total": 10.0})


class ScriptedEngine:
    """Answers each question with a prepared Answer."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers

    def ask(self, question: str, mode: Any = None, filters: Any = None) -> Answer:
        return self.answers[question]


def test_evaluate_scores_ranks_recall_and_refusals() -> None:
    questions = [
        Question(id="1", question="first", kind="single", expected=["a"]),
        Question(id="2", question="second", kind="single", expected=["a"]),
        Question(id="3", question="third", kind="fact", expected=["a"], fact="42"),
        Question(id="4", question="fourth", kind="summary", expected=["a", "b"], mode="summary"),
        Question(id="5", question="fifth", kind="unanswerable", expected=[]),
    ]
    twelve = [f"x{i}" for i in range(11)] + ["a"]
    engine = ScriptedEngine({
        "first": answer("first", ["a", "b"], ["a"]),  # rank 1
        "second": answer("second", ["x", "y", "a"], ["a"]),  # rank 3
        "third": answer("third", twelve, ["x0"], text="It is 42."),  # rank 12: outside MRR@10
        "fourth": answer("fourth", ["a", "b", "c"], ["a", "c"]),  # cites one of the two expected
        "fifth": answer("fifth", ["z"], [], grounded=False),  # correct refusal
    })
    result = evaluate(engine, questions)  # type: ignore[arg-type]
    assert list(result) == KEYS
    assert result["questions"] == 5
    assert result["R@1"] == pytest.approx(round(1 / 3, 3))
    assert result["R@5"] == pytest.approx(round(2 / 3, 3))
    assert result["MRR@10"] == pytest.approx(round((1 + 1 / 3 + 0) / 3, 3))
    assert result["summary/compare recall"] == 0.5
    assert result["refusal accuracy"] == 1.0
    assert result["false refusals"] == 0.0
    assert result["fact accuracy"] == 0.0  # the fact is stated but the expected paper is not cited
    assert result["citation integrity"] == 1.0
    assert result["latency p50 ms"] == 10.0
    assert [row.get("rank") for row in result["rows"][:3]] == [1, 3, 12]
    assert "| R@1 | 0.333 |" in format_table(result)


def test_evaluate_without_rank_questions_reports_none() -> None:
    engine = ScriptedEngine({"q": answer("q", [], [], grounded=False)})
    result = evaluate(engine, [Question(id="1", question="q", kind="unanswerable", expected=[])])  # type: ignore[arg-type]
    assert result["R@1"] is None and result["MRR@10"] is None
    assert "| R@1 | n/a |" in format_table(result)


def test_citation_integrity_needs_every_source_cited_in_order() -> None:
    good = answer("q", ["a", "b"], ["a", "b"])
    assert citation_integrity(good)
    gap = good.model_copy(update={"answer": "only [1]"})
    assert not citation_integrity(gap)
