"""Answers on the labelled relevance questions, end to end (`engine.ask`), fit and locked parts apart.

    python -m bench.eval.relevance [--sizes 3000 22000] [--generated 150]
    RAG_BOT_EMBED_PATH=DIR python -m bench.eval.relevance --sizes 3000 --store storage/bench-3000-DIR --out F
        # another embedder: a copy of the benchmark store re-embedded with it (`rag-bot ingest --reembed`)

For every judged question (bench/data/relevance_questions.jsonl) and generated known item / near miss (as in
bench/fit/relevance.py, where the parts are defined), at each collection size: whether the answer is declined,
whether it leads with what the collection lacks, the judged precision and the recall of its citations, citation
integrity, and whether it claims coverage the collection lacks (an absent or partial topic answered as an area, or
a near miss answered without saying what is missing). Writes bench/results/eval_relevance.json and prints the
table docs/eval.md carries.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench.fit.relevance import PAIRS, QUESTIONS, generated_items, near_duplicates, read_jsonl, without
from rag_bot.answer_words import states_missing
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]

RESULTS = ROOT / "bench" / "results" / "eval_relevance.json"


def answer_row(engine, question: str, mode: str | None, relevant: set[str], labels: dict[str, bool],
               drop: set[str] | None = None) -> dict:
    from rag_bot.evaluation.evaluate import citation_integrity

    with without(engine, drop):  # a near miss: the paper and its near duplicates taken out of the collection
        answer = engine.ask(question, mode=mode)
    cited = [c.doc_id for c in answer.citations]
    judged = [labels[d] for d in cited if d in labels]
    # Read from the answer's typed fields and its templates (rag_bot/answer_words.py), never its prose: an area is
    # claimed by a confident summary; a tentative one shows the closest papers for the reader to judge.
    return {"grounded": answer.grounded, "certainty": answer.certainty, "states_missing": states_missing(answer.answer),
            "claims_area": answer.certainty == "confident" and answer.mode == "summary" and not
            states_missing(answer.answer),
            "cited": cited, "precision": (sum(judged) / len(judged)) if judged else None,
            "unjudged": len(cited) - len(judged), "recall": (len(relevant & set(cited)) / len(relevant))
            if relevant else None, "integrity": citation_integrity(answer)}


def summarise(rows: list[dict]) -> dict:
    def mean(key):
        values = [r[key] for r in rows if r.get(key) is not None]
        return round(float(np.mean(values)), 3) if values else None
    return {"n": len(rows), "declined": round(float(np.mean([not r["grounded"] for r in rows])), 3),
            "states missing": mean("states_missing"), "claims area": mean("claims_area"),
            "precision (judged)": mean("precision"), "recall": mean("recall"),
            "unjudged cited": int(sum(r["unjudged"] for r in rows)), "integrity": mean("integrity")}


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", type=int, default=[3000, 22000])
    parser.add_argument("--generated", type=int, default=150)
    parser.add_argument("--store", type=Path, help="the store of the one size given, instead of the benchmark's")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.store and len(args.sizes) != 1:
        parser.error("--store stands for one collection size: give one --sizes")
    pairs = read_jsonl(PAIRS)
    report: dict = {}
    for size in args.sizes:
        store = args.store or ROOT / "storage" / f"bench-{size}"
        if not (store / "chroma.sqlite3").exists():
            print(f"skipped {size}: {store} not built", file=sys.stderr)
            continue
        engine = Engine(Settings(storage=store))
        groups: dict[str, list[dict]] = {}
        for q in read_jsonl(QUESTIONS):
            labels = {p["doc_id"]: bool(p["relevant"]) for p in pairs if p["qid"] == q["id"]}
            relevant = {d for d, v in labels.items() if v and d in engine.retriever.papers}
            row = answer_row(engine, q["question"], q["mode"] if q["mode"] != "ask" else None, relevant, labels)
            row["id"] = q["id"]
            kind = q.get("kind", q["mode"])
            if kind in ("absent", "partial") and relevant:
                kind = "area" if q["mode"] != "ask" else "known"  # the judges found it covered at this size
            groups.setdefault(f"{'locked' if locked(q['id']) else 'fit'} {kind}", []).append(row)
        for item in generated_items(engine, size, args.generated):
            target = item["target"][0]
            part = "locked" if locked(item["id"]) else "fit"
            groups.setdefault(f"{part} generated known", []).append(
                answer_row(engine, item["question"], None, {target}, {target: True}))
            ids = [p.paper.doc_id for p in engine.retriever.retrieve_papers(item["question"], top_k=15)]
            drop = near_duplicates(engine, target, ids)
            groups.setdefault(f"{part} generated near miss", []).append(
                answer_row(engine, item["question"], None, set(), {}, drop))
        report[str(size)] = {name: summarise(rows) for name, rows in sorted(groups.items())}
        report[str(size) + " rows"] = groups
        print(json.dumps(report[str(size)], indent=1))
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
