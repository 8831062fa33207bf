"""The reranker stage measured with a stand-in reranker (no cross-encoder ships its weights on PyPI): a loopback
`/v1/rerank` server scoring each candidate by the shipped MiniLM's cosine between the question and the paper's
title and abstract embedded whole. It shows what re-ordering before grounding does to the dev set, not what a
real cross-encoder would gain.

    python -m bench.eval.rerank_standin [--sizes seeds 3000]     # storage/bench-<size> (bench/collections.py)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

COLUMNS = ("R@1", "MRR@10", "refusal accuracy", "false refusals", "citation integrity", "latency p50 ms")


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.evaluation.evaluate import DEFAULT_SET, evaluate, load_questions
    from rag_bot.settings import Settings
    from rag_bot.store.embedding import MiniLMEmbedding
    from tests.conftest import json_stand_in

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", default=["seeds", "3000"])
    args = parser.parse_args()
    model = MiniLMEmbedding()

    def respond(body: dict) -> tuple[int, dict]:
        scores = model.embed(body["documents"]) @ model.embed([body["query"]])[0]
        return 200, {"results": [{"index": i, "relevance_score": float(s)} for i, s in enumerate(scores)]}

    questions = load_questions(DEFAULT_SET)
    report = {"load average": os.getloadavg()[0]}
    with json_stand_in(respond) as base:
        for size in args.sizes:
            store = ROOT / "storage" / f"bench-{size}"
            if not (store / "chroma.sqlite3").exists():
                continue
            for label, extra in (("off", {}), ("stand-in reranker", {"rerank_url": f"{base}/v1/rerank"})):
                metrics = evaluate(Engine(Settings(storage=store, **extra)), questions)
                report[f"{size} {label}"] = {c: metrics[c] for c in COLUMNS}
                print(size, label, report[f"{size} {label}"], flush=True)
    (ROOT / "bench" / "results" / "rerank_standin.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
