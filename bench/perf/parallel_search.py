"""Retrieval with its two Chroma searches side by side (this checkout) against one after the other (the previous
behaviour, by an executor that runs each search at once), interleaved question by question in one process on one
store, a folder or a `chroma run` server on a data folder (issue 25): p50 and p95 of `retrieve_papers`.

    .venv/bin/python -m bench.perf.parallel_search STORE [--server] [--questions 60]

Appends to bench/results/parallel_search.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from bench.perf import million, scale

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "parallel_search.json"


class OneAfterTheOther:
    """An executor that runs what is submitted at once, in the caller's thread (the searches in sequence)."""

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done


def measure(store: Path, n: int, url: str | None) -> dict[str, Any]:
    from rag_bot.engine import Engine
    from rag_bot.retrieval import retrieve
    from rag_bot.settings import Settings

    settings = Settings(storage=store, llm="offline", chroma_url=url) if url else Settings(storage=store, llm="offline")
    retriever = Engine(settings).retriever
    papers = retriever.papers
    sample = {d: papers[d] for d in random.Random(5).sample(list(papers), 400)}
    questions = scale.questions_for(sample, n_extra=max(0, n - 20))[-n:]
    side_by_side = retrieve._SEARCHES
    times: dict[str, list[float]] = {"side_by_side": [], "one_after_the_other": []}
    for q in questions[:5]:  # warm both paths (HNSW pages, HTTP connections)
        retriever.retrieve_papers(q)
    for i, q in enumerate(questions):
        order = ("side_by_side", "one_after_the_other") if i % 2 else ("one_after_the_other", "side_by_side")
        for name in order:
            retrieve._SEARCHES = side_by_side if name == "side_by_side" else OneAfterTheOther()  # type: ignore[assignment]
            t = time.perf_counter()
            retriever.retrieve_papers(q)
            times[name].append((time.perf_counter() - t) * 1000)
    retrieve._SEARCHES = side_by_side
    out: dict[str, Any] = {"papers": len(papers), "questions": len(questions)}
    for name, values in times.items():
        out[f"{name}_p50_ms"], out[f"{name}_p95_ms"] = scale.pct(values, 50), scale.pct(values, 95)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--server", action="store_true", help="the folder is served by `chroma run`")
    parser.add_argument("--questions", type=int, default=60)
    args = parser.parse_args()
    row: dict[str, Any] = {"store": str(args.store), "mode": "server" if args.server else "folder",
                           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": os.getloadavg()[0]}
    if args.server:
        with million.chroma_server(args.store.resolve()):
            row |= measure(Path(tempfile.mkdtemp(prefix="parallel-")), args.questions, os.environ["BENCH_CHROMA_URL"])
    else:
        row |= measure(args.store.resolve(), args.questions, None)
    row["load_end"] = os.getloadavg()[0]
    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.write_text(json.dumps(rows + [row], indent=1) + "\n")
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
