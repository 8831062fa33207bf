"""Answers with the sentence vectors kept as float32 (the old layout) and as 8-bit codes (rag_bot/store/sentences.py
`LAYOUT`), in one run: the dev set on the seeds (`rag-bot eval`'s measures) and the judged relevance questions at
22,186 papers, their fit and locked parts apart (bench/fit/relevance.py `locked`). Reports how many answers are
the same word for word, the grounded decisions and citations that differ, and the bytes a paper's vectors take.

    .venv/bin/python -m bench.eval.sentence_layout [--store storage/bench-22000]

Writes bench/results/sentence_layout.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.fit.relevance import PAIRS, QUESTIONS, read_jsonl
from rag_bot.evaluation.split import locked  # the one locked split
from rag_bot.store import sentences as layout

ROOT = Path(__file__).resolve().parents[2]



RESULTS = ROOT / "bench" / "results" / "sentence_layout.json"


def float32_pack(vectors: np.ndarray) -> bytes:
    return np.ascontiguousarray(vectors, dtype="<f4").tobytes()


def float32_pack_and_restore(vectors: np.ndarray) -> tuple[bytes, np.ndarray]:
    return float32_pack(vectors), np.asarray(vectors, dtype=np.float32)


def float32_unpack(raw: bytes, rows: int) -> np.ndarray:
    return np.frombuffer(raw, dtype="<f4").reshape(rows, -1).astype(np.float32)


def answers(store: Path, questions: list[dict], exact: bool) -> list[dict]:
    """Each question's answer from a fresh engine (no persisted sentence vectors: every paper is embedded)."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.store.sentences import SentenceIndex

    real = layout.pack_and_restore, layout.unpack
    if exact:
        layout.pack_and_restore, layout.unpack = float32_pack_and_restore, float32_unpack  # type: ignore[assignment]
    try:
        engine = Engine(Settings(storage=store, llm="offline"))
        engine._sentences = SentenceIndex(engine.index.embedder)  # in memory only: the store is not written
        out = []
        for q in questions:
            answer = engine.ask(q["question"], mode=q.get("mode"))
            cited = [c.doc_id for c in answer.citations]
            labels = q.get("labels", {})
            judged = [labels[d] for d in cited if d in labels]
            relevant = {d for d, v in labels.items() if v}
            out.append({"answer": answer.answer, "grounded": answer.grounded, "cited": cited,
                        "precision": sum(judged) / len(judged) if judged else None,
                        "recall": len(relevant & set(cited)) / len(relevant) if relevant else None})
        return out
    finally:
        layout.pack_and_restore, layout.unpack = real


def compare(store: Path, questions: list[dict]) -> dict:
    started = time.perf_counter()
    old, new = answers(store, questions, exact=True), answers(store, questions, exact=False)
    n = len(questions)

    def mean(rows: list[dict], key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return round(float(np.mean(values)), 4) if values else None

    return {"questions": n,
            "judged_precision_float32": mean(old, "precision"), "judged_precision_int8": mean(new, "precision"),
            "recall_float32": mean(old, "recall"), "recall_int8": mean(new, "recall"),
            "same_answer": sum(a["answer"] == b["answer"] for a, b in zip(old, new)),
            "grounded_differs": sum(a["grounded"] != b["grounded"] for a, b in zip(old, new)),
            "citations_differ": sum(a["cited"] != b["cited"] for a, b in zip(old, new)),
            "grounded_float32": sum(a["grounded"] for a in old), "grounded_int8": sum(b["grounded"] for b in new),
            "seconds": round(time.perf_counter() - started, 1)}


def bytes_per_paper(store: Path, n: int = 200) -> dict:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.store.sentences import paper_sentences

    engine = Engine(Settings(storage=store, llm="offline"))
    papers = [engine.papers[d] for d in list(engine.papers)[:n]]
    rows = [len(paper_sentences(p)) for p in papers]
    vectors = [np.zeros((r, 384), dtype=np.float32) for r in rows]
    return {"sentences_per_paper": round(float(np.mean(rows)), 2),
            "float32_plus_mean_bytes": round(float(np.mean([len(float32_pack(v)) + 384 * 4 for v in vectors]))),
            "int8_bytes": round(float(np.mean([len(layout.pack_and_restore(v)[0]) for v in vectors])))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, default=ROOT / "storage" / "bench-22000")
    parser.add_argument("--skip-seeds", action="store_true")
    parser.add_argument("--skip-store", action="store_true")
    args = parser.parse_args()
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    dev = [json.loads(line) for line in (ROOT / "tests" / "data" / "dev_questions.jsonl").read_text().splitlines()
           if line.strip()]
    if RESULTS.exists():  # a part skipped keeps its figures from the last run
        result |= {k: v for k, v in json.loads(RESULTS.read_text()).items() if k != "date"}
    if not args.skip_seeds:
        with tempfile.TemporaryDirectory() as tmp:
            Engine(Settings(storage=Path(tmp))).ingest([ROOT / "seeds"])
            result["dev_seeds"] = compare(Path(tmp), dev)
            result["bytes_seeds"] = bytes_per_paper(Path(tmp))
    if args.store.exists() and not args.skip_store:
        judged = read_jsonl(QUESTIONS)
        pairs = read_jsonl(PAIRS)
        for q in judged:  # the readers' labels of cited papers (bench/data/README.md)
            q["labels"] = {p["doc_id"]: bool(p["relevant"]) for p in pairs if p["qid"] == q["id"]}
        result["judged_fit"] = compare(args.store, [q for q in judged if not locked(q["id"])])
        result["judged_locked"] = compare(args.store, [q for q in judged if locked(q["id"])])
        result["bytes_22000"] = bytes_per_paper(args.store)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
