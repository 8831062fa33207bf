"""What wider vectors cost the store: disk, memory and query latency of a Chroma folder store at 22,186 papers
with 384- (MiniLM), 1,024- and 3,072-dimensional vectors (issue 22, item 5).

    python -m bench.perf.wide_vectors [--papers 22186] [--dims 384 1024 3072]

Each size is a fresh store holding one vector per paper and two per paper's chunks (the shipped collection's
shape: 22,186 papers, about 44,000 chunks), random unit vectors (the index's cost does not depend on what the
vectors mean), written through Chroma in batches as an ingest writes them. Then, in a fresh process: open the
store, run 200 nearest-neighbour queries of 40 (an area's candidates) on the chunks, and report p50 / p95 and the
peak RSS. The sentence vectors an answer stores per paper scale the same way: 12 sentences x d x 4 bytes. Results
go to bench/results/wide_vectors.json; docs/benchmarks.md carries the table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BATCH = 2000


def build(path: Path, papers: int, dims: int) -> float:
    import chromadb

    client = chromadb.PersistentClient(path=str(path))
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for name, count in (("papers", papers), ("chunks", 2 * papers)):
        collection = client.create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
        for start in range(0, count, BATCH):
            n = min(BATCH, count - start)
            vectors = rng.standard_normal((n, dims)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            collection.add(ids=[f"{name}-{start + i}" for i in range(n)], embeddings=vectors,
                           metadatas=[{"doc_id": f"p{(start + i) // 2}"} for i in range(n)])
    return time.perf_counter() - started


def query(path: Path, dims: int) -> dict:
    """In this (fresh) process: open, query, measure."""
    import chromadb

    started = time.perf_counter()
    collection = chromadb.PersistentClient(path=str(path)).get_collection("chunks")
    rng = np.random.default_rng(1)
    first = None
    times = []
    for _ in range(200):
        q = rng.standard_normal(dims).astype(np.float32)
        q /= np.linalg.norm(q)
        t = time.perf_counter()
        collection.query(query_embeddings=[q], n_results=40, include=["distances", "metadatas"])
        times.append((time.perf_counter() - t) * 1000)
        if first is None:
            first = time.perf_counter() - started
    return {"open and first query s": round(first or 0.0, 2), "query p50 ms": round(float(np.percentile(times, 50)), 1),
            "query p95 ms": round(float(np.percentile(times, 95)), 1),
            "peak RSS MiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def disk(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--papers", type=int, default=22186)
    parser.add_argument("--dims", type=int, nargs="*", default=[384, 1024, 3072])
    parser.add_argument("--query", nargs=2, help=argparse.SUPPRESS)  # path dims: the measuring subprocess
    args = parser.parse_args()
    if args.query:
        print(json.dumps(query(Path(args.query[0]), int(args.query[1]))))
        return 0
    rows = []
    for dims in args.dims:
        folder = Path(tempfile.mkdtemp(prefix=f"wide-{dims}-"))
        try:
            seconds = build(folder, args.papers, dims)
            measured = subprocess.run([sys.executable, "-m", __spec__.name, "--query", str(folder), str(dims)],
                                      capture_output=True, text=True, check=True, cwd=ROOT)
            row = {"dimensions": dims, "papers": args.papers, "chunks": 2 * args.papers,
                   "write s": round(seconds, 1), "disk MiB": round(disk(folder)),
                   "sentence vectors per paper KiB": round(12 * dims * 4 / 1024, 1),
                   **json.loads(measured.stdout.strip().splitlines()[-1]), "load average": os.getloadavg()[0]}
            print(json.dumps(row), flush=True)
            rows.append(row)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    (ROOT / "bench" / "results" / "wide_vectors.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
