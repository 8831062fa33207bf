"""A simulated collection of N papers, made from a real one without embedding anything (issue 25): each simulated
paper takes a real paper's records (its whole-abstract vector, its chunks and their vectors, its metadata) and
  - recombines the text: each sentence of the abstract and of each chunk is kept or, with probability `--mix`,
    replaced by a sentence of another real abstract, so the words keep their real statistics;
  - moves every vector by Gaussian noise (`--noise` per dimension, then normalised: at 0.02 a copy's cosine to
    its original is about 0.93) so that copies of one paper are near, not equal.
The result is a portable collection file for `rag-bot import` (same format and index version as the source's
export). Only costs can be measured on it: its answers mean nothing.

    .venv/bin/rag-bot --storage storage/bench-22000 export /tmp/base.ragbot.jsonl.gz
    .venv/bin/python -m bench.perf.simulate /tmp/base.ragbot.jsonl.gz 100000 /tmp/sim-100000.ragbot.jsonl.gz
    .venv/bin/rag-bot --storage storage/sim-100000 import /tmp/sim-100000.ragbot.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


def load(path: Path) -> tuple[dict, list[dict], dict[str, list[dict]], list[str]]:
    """The source file: its manifest, paper records, chunk records by paper, and every sentence of it."""
    papers: list[dict] = []
    chunks: dict[str, list[dict]] = defaultdict(list)
    sentences: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        manifest = json.loads(handle.readline())
        for line in handle:
            record = json.loads(line)
            record["embedding"] = np.asarray(record["embedding"], dtype=np.float32)
            if record["kind"] == "paper":
                papers.append(record)
                sentences.extend(_SENTENCE.split(record["document"]))
            else:
                chunks[record["metadata"]["doc_id"]].append(record)
    return manifest, papers, chunks, sentences


def _mix(text: str, rng: np.random.Generator, sentences: list[str], share: float) -> str:
    parts = _SENTENCE.split(text)
    return " ".join(sentences[rng.integers(len(sentences))] if rng.random() < share else p for p in parts)


def _moved(vector: np.ndarray, rng: np.random.Generator, noise: float) -> list[float]:
    moved = vector + rng.normal(0.0, noise, vector.shape).astype(np.float32)
    return [round(float(x), 6) for x in moved / max(float(np.linalg.norm(moved)), 1e-12)]


def _renamed(metadata: dict, old: str, new: str, source: str) -> dict:
    """The metadata with every mention of the paper's id (and the chunk ids inside llama-index's node content)
    made the simulated paper's."""
    text = json.dumps(metadata).replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    out = json.loads(text)
    if "source" in out:
        out["source"] = source
    return out


def simulate(source: Path, n: int, out: Path, mix: float, noise: float, seed: int) -> dict[str, int]:
    manifest, papers, chunks, sentences = load(source)
    rng = np.random.default_rng(seed)
    written_chunks = 0
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=3) as handle:
        count = sum(len(chunks[papers[i % len(papers)]["id"]]) for i in range(n))
        handle.write(json.dumps({**manifest, "papers": n, "chunks": count}) + "\n")
        started = time.perf_counter()
        for i in range(n):  # chunks first, then papers (the order an export writes and an import expects)
            base = papers[i % len(papers)]
            new_id, src = f"sim{i:07d}", f"sim-{i // 10000:03d}.jsonl"
            for chunk in chunks[base["id"]]:
                handle.write(json.dumps({
                    # `<doc_id>::<n>`, as an ingest names chunks (an import refuses a chunk whose id names another paper)
                    "kind": "chunk", "id": f"{new_id}::{chunk['id'].rpartition('::')[2]}",
                    "document": _mix(chunk["document"], rng, sentences, mix),
                    "metadata": _renamed(chunk["metadata"], base["id"], new_id, src),
                    "embedding": _moved(chunk["embedding"], rng, noise)}) + "\n")
                written_chunks += 1
            if i and i % 50000 == 0:
                print(f"{i} papers' chunks written ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        for i in range(n):
            base = papers[i % len(papers)]
            new_id, src = f"sim{i:07d}", f"sim-{i // 10000:03d}.jsonl"
            handle.write(json.dumps({
                "kind": "paper", "id": new_id, "document": _mix(base["document"], rng, sentences, mix),
                "metadata": _renamed(base["metadata"], base["id"], new_id, src),
                "embedding": _moved(base["embedding"], rng, noise)}) + "\n")
    return {"papers": n, "chunks": written_chunks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help="a file written by `rag-bot export` (the real collection)")
    parser.add_argument("n", type=int, help="papers to simulate")
    parser.add_argument("out", type=Path)
    parser.add_argument("--mix", type=float, default=0.5, help="share of sentences taken from other abstracts")
    parser.add_argument("--noise", type=float, default=0.02, help="Gaussian noise per vector dimension")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    counts = simulate(args.source, args.n, args.out, args.mix, args.noise, args.seed)
    print(json.dumps({**counts, "seconds": round(time.perf_counter() - started, 1),
                      "bytes": args.out.stat().st_size}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
