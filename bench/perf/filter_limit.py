"""Where a filter should stop reaching Chroma as a list of its papers (rag_bot/retrieval/retrieve.py LIST_ABOVE): the
dense side of a filtered question, timed both ways (the list, and more neighbours with the allowed kept) for filters
letting through a random 0.1 % to 30 % of the papers, on one store. Writes bench/results/filter_limit.json.

    .venv/bin/python -m bench.perf.filter_limit /work/sim/store-100k
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
RESULTS = ROOT / "bench" / "results" / "filter_limit.json"
QUESTIONS = ("sparse attention", "graph neural networks for molecules", "federated learning with LoRA",
             "diffusion models for images", "reinforcement learning from human feedback")


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.retrieval import retrieve
    from rag_bot.settings import Settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="a folder store")
    store = parser.parse_args().store
    engine = Engine(Settings(storage=store, llm="offline"))
    retriever = engine.retriever
    snap = retriever._snapshot
    from rag_bot.retrieval.lexical.columns import Allowed

    total = len(snap.ids)
    rng = np.random.default_rng(0)
    vectors = [retriever.index.embedder.get_query_embedding(q) for q in QUESTIONS]
    rows = []
    for share in (0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3):
        mask = np.zeros(total, dtype=bool)  # a filter letting through a random share of the papers
        mask[rng.choice(total, size=max(1, int(share * total)), replace=False)] = True
        allowed = Allowed(snap.ids, snap.rows, mask)
        timing = {}
        for way, above in (("list", 0), ("more_neighbours", 10**9)):
            if way == "list" and len(allowed) > retrieve.IN_LIMIT:
                continue  # SQLite refuses a long list
            retriever.list_above = above
            times = []
            for vector in vectors:
                t = time.perf_counter()
                retriever._dense(snap, "", 40, embedding=vector, allowed=allowed)
                times.append((time.perf_counter() - t) * 1000)
            timing[way] = round(float(np.median(times)), 1)
        rows.append({"allowed": len(allowed), "share": share, **{f"{k}_ms": v for k, v in timing.items()}})
        print(json.dumps(rows[-1]), flush=True)
    years = np.asarray(snap.columns.years)
    RESULTS.write_text(json.dumps({"store": str(store), "papers": len(years), "load_1min": os.getloadavg()[0],
                                   "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
