"""What RAG_BOT_SENTENCE_VECTORS=ingest costs the ingest and saves the answers: N real abstracts (every 40th of
../shared/data/ml_abstracts.jsonl.gz) ingested into fresh stores with `on-demand` and with `ingest`, interleaved,
then the same questions (each paper's title) answered once in a new process's engine on each.

    .venv/bin/python -m bench.perf.sentence_ingest [--papers 400]

Writes bench/results/sentence_ingest.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
RESULTS = ROOT / "bench" / "results" / "sentence_ingest.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--papers", type=int, default=400)
    args = parser.parse_args()
    if not DATA.exists():
        print(f"skipped: {DATA} not found", file=sys.stderr)
        return 0
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for n, line in enumerate(handle) if n % 40 == 0][: args.papers]
    out: dict = {"papers": len(records), "load_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "papers.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        for mode in ("on-demand", "ingest"):
            settings = Settings(storage=Path(tmp) / mode, sentence_vectors=mode, llm="offline")
            start = time.perf_counter()
            Engine(settings).ingest([data])
            out[f"{mode}_ingest_s"] = round(time.perf_counter() - start, 1)
        for mode in ("on-demand", "ingest"):
            engine = Engine(Settings(storage=Path(tmp) / mode, sentence_vectors=mode, llm="offline"))
            engine.ask("warm up: what is a neural network?")
            times = []
            for record in records[:30]:
                start = time.perf_counter()
                engine.ask(f"what does the paper '{record['title']}' propose?")
                times.append((time.perf_counter() - start) * 1000)
            out[f"{mode}_answer_p50_ms"] = round(float(np.percentile(times, 50)), 1)
            out[f"{mode}_answer_p95_ms"] = round(float(np.percentile(times, 95)), 1)
    out["load_end"] = os.getloadavg()[0]
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
