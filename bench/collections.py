"""Benchmark collections: the seeds plus real distractor abstracts from ../shared/data/ml_abstracts.jsonl.gz.

    python -m bench.collections 3000            # seeds + every 7th real abstract (3,164) -> storage/bench-3000
    python -m bench.collections 22000           # seeds + all 22,148                       -> storage/bench-22000

Stores are built incrementally (an interrupted build resumes) through rag-bot's own ingest, read the data in place
(never copied into the repository) and are reused by bench/eval/scale.py and the latency benchmarks.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ML_ABSTRACTS = ROOT.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
SIZES = {3000: 7, 22000: 1}  # collection size -> take every n-th real abstract


def store_for(size: int) -> Path:
    """The store folder of a benchmark collection."""
    return ROOT / "storage" / f"bench-{size}"


def distractor_file(size: int, folder: Path) -> Path:
    """The real abstracts of a benchmark size as one JSONL file in `folder` (a temporary folder)."""
    every = SIZES[size]
    out = folder / f"ml_abstracts_every_{every}.jsonl"
    with gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i % every == 0:
                dst.write(line if line.endswith("\n") else line + "\n")
    return out


def build(size: int) -> Path:
    """Build (or complete) the store of a benchmark collection; returns its folder."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    store = store_for(size)
    engine = Engine(Settings(storage=store))
    with tempfile.TemporaryDirectory() as tmp:
        extra = distractor_file(size, Path(tmp))
        start = time.perf_counter()
        report, result = engine.ingest([ROOT / "seeds", extra])
        seconds = time.perf_counter() - start
    # Peak resident memory of this process (the ingest streams its input: bounded whatever the size).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    info = {"size": size, "papers": engine.index.count(), "report": str(report), "seconds": round(seconds, 1),
            "peak_rss_mib": round(peak)}
    (store / "bench-build.json").write_text(json.dumps(info))
    print(json.dumps(info))
    return store


def main() -> int:
    """Build the stores named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="+", type=int, choices=sorted(SIZES))
    args = parser.parse_args()
    if not ML_ABSTRACTS.exists():
        print(f"skipped: {ML_ABSTRACTS} not found (it is not part of a user's clone)", file=sys.stderr)
        return 0
    for size in args.sizes:
        build(size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
