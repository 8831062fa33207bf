"""Which paper leads the ranking of an answer: retrieval's first, or the decision's most probable (issue 36).

    python -m bench.eval.decision_order [--sizes 38 3000 22000] [--generated 300]

Grounding gives every candidate the probability that it answers the question (rag_bot/grounding/relevance.py). An
answer's ranking (its `retrieved` list) and a refusal's nearest papers follow that probability; before, they followed
retrieval's fused rank. Both orders come from the same call here, so the baseline is in the same run:
- retrieval: `engine.retriever.retrieve` for the question, as the answer's `retrieved` list reported before;
- decision: `engine.ask(...).retrieved`, what it reports now;
- first cited: the answer's first citation is the paper asked for. A direct answer cites the papers over the source
  cut in retrieval's order (by probability it lost first citations: "first cited by probability" reads the same
  answer's citations in the decision's order);
- a refusal names the nearest topics, the first three of the ranking: is the paper asked for first, or among them?

One-paper questions with a known answer, at each size:
- the dev set's single and fact questions (tests/data/dev_questions.jsonl, the seeds; every size holds them);
- the readers' judged known items (bench/data/relevance_questions.jsonl, kind "known", relevant by the judgements);
- generated known items (a real paper's title, as bench/fit/relevance.py makes them);
- the readers' one-paper questions (bench/data/reader_questions_*.jsonl: paraphrase, fast-when, problem-first),
  whose targets are unlocked papers the decision was never fitted on.
Fit and locked parts by question id (rag_bot.evaluation.split). Writes bench/results/decision_order.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench.fit.relevance import DEV, PAIRS, QUESTIONS, engine_of, generated_items, read_jsonl, reader_items
from rag_bot.evaluation.split import locked

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "decision_order.json"


def questions(engine, size: int, generated: int) -> list[dict]:
    """Every one-paper question of a size whose paper the collection holds: id, set, question, relevant ids."""
    papers = engine.retriever.papers
    out = [{"id": q["id"], "set": "dev", "question": q["question"], "relevant": q["expected"][:1]}
           for q in read_jsonl(DEV) if q["kind"] in ("single", "fact")]
    pairs = read_jsonl(PAIRS)
    for q in read_jsonl(QUESTIONS):
        relevant = [p["doc_id"] for p in pairs if p["qid"] == q["id"] and p["relevant"] and p["doc_id"] in papers]
        if q["mode"] == "ask" and q.get("kind") == "known" and relevant:
            out.append({"id": q["id"], "set": "judged known", "question": q["question"], "relevant": relevant})
    if size != 38:
        out += [{"id": g["id"], "set": "generated", "question": g["question"], "relevant": g["target"]}
                for g in generated_items(engine, size, generated)]
        out += [{"id": q["id"], "set": f"reader {q['style']}", "question": q["question"], "relevant": q["target"]}
                for q in reader_items(engine)]
    return [q for q in out if all(d in papers for d in q["relevant"][:1])]


def row(engine, q: dict) -> dict:
    """Where each order puts the paper asked for (None beyond 10), and whether the answer's first citation is it."""
    relevant = set(q["relevant"])
    from rag_bot.nodes import scored_paper

    nodes = engine.retriever.retrieve(engine.query(q["question"], None))  # as `ask` retrieves, before grounding
    retrieval = [scored_paper(n).paper.doc_id for n in nodes][:10]
    answer = engine.ask(q["question"])
    decision = [str(r["doc_id"]) for r in answer.retrieved][:10]
    cited = [c.doc_id for c in answer.citations]
    by_probability = sorted(cited, key=lambda d: decision.index(d) if d in decision else len(decision))

    def rank(order: list[str]) -> int | None:
        return next((i + 1 for i, d in enumerate(order) if d in relevant), None)

    return {"id": q["id"], "set": q["set"], "retrieval": rank(retrieval), "decision": rank(decision),
            "first cited": bool(cited) and cited[0] in relevant,
            "first cited by probability": bool(by_probability) and by_probability[0] in relevant,
            "declined": not answer.grounded}


def summarise(rows: list[dict]) -> dict:
    def r1(key: str) -> float:
        return round(float(np.mean([r[key] == 1 for r in rows])), 3)

    def mrr(key: str) -> float:
        return round(float(np.mean([1 / r[key] if r[key] else 0.0 for r in rows])), 3)

    return {"n": len(rows), "R@1 retrieval": r1("retrieval"), "R@1 decision": r1("decision"),
            "MRR@10 retrieval": mrr("retrieval"), "MRR@10 decision": mrr("decision"),
            "first cited": round(float(np.mean([r["first cited"] for r in rows])), 3),
            "first cited by probability": round(float(np.mean([r["first cited by probability"] for r in rows])), 3),
            "declined": round(float(np.mean([r["declined"] for r in rows])), 3),
            **nearest([r for r in rows if r["declined"]])}


def nearest(declined: list[dict]) -> dict:
    """Of the declined questions, how often a refusal names the paper asked for first among its nearest topics, and
    among its three, in each order."""
    if not declined:
        return {}
    return {f"declined, {what} {key}": round(float(np.mean([r[key] is not None and r[key] <= k for r in declined])), 3)
            for what, k in (("named first", 1), ("among the nearest three", 3)) for key in ("retrieval", "decision")}


def main() -> int:

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", type=int, default=[38, 3000, 22000])
    parser.add_argument("--generated", type=int, default=300)  # the labelled set of bench/fit/relevance.py
    args = parser.parse_args()
    report: dict = {"load average": os.getloadavg()[0]}
    for size in args.sizes:
        engine = engine_of(size)
        if engine is None:
            continue
        start = time.time()
        rows = [row(engine, q) for q in questions(engine, size, args.generated)]
        groups: dict[str, list[dict]] = {}
        for r in rows:
            family = "reader" if r["set"].startswith("reader") else r["set"]
            for name in {r["set"], family}:
                groups.setdefault(f"{'locked' if locked(r['id']) else 'fit'} {name}", []).append(r)
        report[str(size)] = {name: summarise(rs) for name, rs in sorted(groups.items())}
        report[str(size)]["seconds"] = round(time.time() - start, 1)
        print(json.dumps({str(size): report[str(size)]}, indent=1))
    report["load average after"] = os.getloadavg()[0]
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
