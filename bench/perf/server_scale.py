"""The same collection through a `chroma run` server and from a folder store, in one run: cold start, warm
latency and answer quality (issue 11, item 7).

    python -m bench.perf.server_scale --server-data PATH [--folder storage/bench-22000]

PATH is the data folder of a server that ingested the seeds and ../shared/data/ml_abstracts.jsonl.gz
(bench/perf/full_ingest.py --server --seeds --keep PATH); the folder store is the baseline (bench/collections.py
22000 builds it from the same files). Both are measured interleaved, so they see the same machine load:

- cold `rag-bot ask`: process start to printed answer, best of 3 (and the first ask, which builds the lexical
  cache of a collection state once);
- warm, in one process: retrieval and the whole offline answer per question (the dev questions, then titles and
  phrases of random papers), each answer twice: its papers' first use (sentence vectors embedded and written to
  the store) and after;
- quality: the dev set (`rag-bot eval`'s measures) on each;
- first, the server's files ingested again: everything is stored already, so nothing may be embedded (what an
  interrupted ingest's resumption relies on), and the time that takes.

Writes bench/results/server_scale.json; bench/perf/scale.py puts it in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.perf.full_ingest import BIN, ML_ABSTRACTS, rss_mib, start_chroma
from bench.perf.scale import pct, questions_for

REPO = Path(__file__).resolve().parents[2]

QUALITY = ("R@1", "R@5", "MRR@10", "false refusals", "summary/compare recall", "topic precision",
           "citation integrity")


def cold_ask(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([str(BIN / "rag-bot"), "ask", "what is sparse attention?"], env=env, cwd=REPO, check=True,
                   capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server-data", type=Path, required=True)
    ap.add_argument("--folder", type=Path, default=REPO / "storage" / "bench-22000")
    ap.add_argument("--questions", type=int, default=100, help="extra questions from random papers")
    args = ap.parse_args()
    from rag_bot.engine import Engine
    from rag_bot.evaluation.evaluate import DEFAULT_SET, evaluate, load_questions
    from rag_bot.settings import Settings

    server, url = start_chroma(args.server_data)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    base.update(RAG_BOT_LOG_LEVEL="WARNING", RAG_BOT_LLM="offline")
    scratch = Path(tempfile.mkdtemp(prefix="rag-bot-server-scale-"))
    envs = {"folder": base | {"RAG_BOT_STORAGE": str(args.folder)},
            "server": base | {"RAG_BOT_CHROMA_URL": url, "RAG_BOT_STORAGE": str(scratch),
                              "XDG_CACHE_HOME": str(scratch / "cache")}}
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "load_before": round(os.getloadavg()[0], 2)}
    try:
        # The same files again: everything is stored, so nothing is embedded (what a resumed ingest relies on).
        start = time.perf_counter()
        again = subprocess.run([str(BIN / "rag-bot"), "ingest", "--quiet", str(REPO / "seeds"), str(ML_ABSTRACTS)],
                               env=envs["server"], cwd=REPO, check=True, capture_output=True, text=True)
        out["reingest_s"] = round(time.perf_counter() - start, 1)
        out["reingest_report"] = again.stdout.strip()
        for name in envs:  # the first start of a collection state builds its lexical cache
            out[f"{name}_ask_first_s"] = round(cold_ask(envs[name]), 2)
        colds: dict[str, list[float]] = {name: [] for name in envs}
        for _ in range(3):
            for name, env in envs.items():
                colds[name].append(cold_ask(env))
        for name, values in colds.items():
            out[f"{name}_ask_cold_s"] = round(min(values), 2)
            out[f"{name}_ask_cold_runs"] = [round(v, 2) for v in values]
        os.environ["XDG_CACHE_HOME"] = str(scratch / "cache")
        engines = {"folder": Engine(Settings(storage=args.folder, llm="offline")),
                   "server": Engine(Settings(chroma_url=url, storage=scratch, llm="offline"))}
        counts = {name: e.index.count() for name, e in engines.items()}
        out["papers"] = counts
        papers = engines["folder"].retriever.papers
        picks = random.Random(3).sample(sorted(papers), min(2000, len(papers)))
        questions = questions_for({d: papers[d] for d in picks}, n_extra=args.questions)
        out["questions"] = len(questions)
        times: dict[str, list[float]] = {}
        for engine in engines.values():
            engine.ask("warm-up: what is attention?")
        for q in questions:
            for name, engine in engines.items():
                embedder = engine.index.embedder
                embedder._query_cache.clear()
                start = time.perf_counter()
                engine.retriever.retrieve_papers(q)
                times.setdefault(f"{name}_retrieve", []).append((time.perf_counter() - start) * 1000)
                for phase in ("first", "again"):
                    embedder._query_cache.clear()
                    engine.sentences._cache.clear()  # nothing in memory: read from the store, or embedded
                    start = time.perf_counter()
                    engine.ask(q)
                    times.setdefault(f"{name}_answer_{phase}", []).append((time.perf_counter() - start) * 1000)
        for key, values in times.items():
            out[f"{key}_p50"], out[f"{key}_p95"] = round(pct(values, 50), 1), round(pct(values, 95), 1)
        dev = load_questions(DEFAULT_SET)
        for name, engine in engines.items():
            metrics = evaluate(engine, dev)
            out[f"{name}_quality"] = {k: metrics.get(k) for k in QUALITY}
        out["server_rss_mib"] = round(rss_mib(server.pid), 1)
        out["bench_process_rss_mib"] = round(rss_mib(os.getpid()), 1)
    finally:
        server.terminate()
        server.wait(timeout=30)
    out["load_after"] = round(os.getloadavg()[0], 2)
    path = REPO / "bench" / "results" / "server_scale.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
