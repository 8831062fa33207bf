"""Where the answer-time sentence vectors are kept (issue 25, "sentence vectors at a million"), in one run:

1. disk a paper, same papers, same run: the `<name>_sentences` Chroma collection the store kept them in before (a
   base64 metadata string a paper, as rag_bot/store/sentences.py wrote it) against the SQLite file now
   (rag_bot/store/caches.py), at SQLite's 4 KiB pages and at the 16 KiB it uses;
2. the file at a million papers: write rate, disk a paper, and reading a question's papers (10 random ids) p50/p95;
3. with --store: whole offline answers at that store when every paper's vectors are in the file (what
   RAG_BOT_SENTENCE_VECTORS=ingest gives): the file is padded with rows of papers the store does not hold up to
   its paper count (so its size and depth are a full one's), one child process answers the questions (each
   paper's first use writes its row), a second one answers them again reading the file (nothing in memory).

Sentence counts are the real ones (rag_bot/store/sentences.py's `paper_sentences` of the exported real abstracts);
vector bytes are random (SQLite does not compress, so size does not depend on them).

    .venv/bin/python -m bench.perf.sentence_file [--export /work/sim/real-22166.ragbot.jsonl.gz] [--store /work/sim/store-1m]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.perf import scale

ROOT = Path(__file__).resolve().parents[2]

RESULTS = ROOT / "bench" / "results" / "sentence_file.json"
DIM = 384


def sentence_counts(export: Path, limit: int) -> list[int]:
    from rag_bot.store.sentences import paper_sentences
    from rag_bot.types import Paper

    counts = []
    with gzip.open(export, "rt") as f:
        for line in f:
            record = json.loads(line)
            if record.get("kind") == "paper":
                paper = Paper(doc_id=record["id"], title="", source="s", text=record.get("document") or "")
                counts.append(len(paper_sentences(paper)))
                if len(counts) >= limit:
                    break
    return counts


def blob(rng: np.random.Generator, n: int) -> bytes:
    return rng.integers(-127, 127, n * (DIM + 4), dtype=np.int8).tobytes()


def chroma_bytes(counts: list[int], folder: Path) -> float:
    """A paper's bytes in a `<name>_sentences` collection as the store kept it before (folder's whole disk)."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(folder), settings=ChromaSettings(anonymized_telemetry=False))
    collection = client.get_or_create_collection("bench_sentences", metadata={"layout": "int8-scaled-v1"},
                                                 embedding_function=None)
    rng = np.random.default_rng(0)
    for start in range(0, len(counts), 64):
        part = counts[start:start + 64]
        collection.upsert(ids=[f"p{start + i}" for i in range(len(part))], embeddings=[[1.0]] * len(part),
                          metadatas=[{"key": "k" * 24, "n": n, "vectors": base64.b64encode(blob(rng, n)).decode()}
                                     for n in part])
    del client
    return scale_disk(folder) / len(counts)


def scale_disk(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def file_rows(counts: list[int], path: Path, page_size: int | None = None, prefix: str = "p") -> dict[str, Any]:
    """Write one row per count into a SentenceFile (page_size: a new file's page size); disk and write rate."""
    from rag_bot.store import sentence_file

    if page_size is not None:
        sentence_file.PAGE_SIZE, real = page_size, sentence_file.PAGE_SIZE
    try:
        file = sentence_file.SentenceFile(path, layout=1)
        rng = np.random.default_rng(1)
        start = time.perf_counter()
        for first in range(0, len(counts), 1000):
            file.put((f"{prefix}{first + i}", "k" * 24, n, blob(rng, n)) for i, n in enumerate(counts[first:first + 1000]))
        seconds = time.perf_counter() - start
        file.close()
    finally:
        if page_size is not None:
            sentence_file.PAGE_SIZE = real
    return {"papers": len(counts), "bytes_per_paper": scale_disk(path.parent) / len(counts),
            "write_papers_per_s": len(counts) / seconds, "vector_bytes_per_paper": float(np.mean(counts)) * (DIM + 4)}


def lookups(path: Path, ids: int, n: int = 300, per_question: int = 10) -> dict[str, float]:
    from rag_bot.store.sentence_file import SentenceFile

    file = SentenceFile(path, layout=1)
    rng = np.random.default_rng(2)
    times = []
    for _ in range(n):
        wanted = [f"p{i}" for i in rng.integers(0, ids, per_question)]
        t = time.perf_counter()
        file.get(wanted)
        times.append((time.perf_counter() - t) * 1000)
    file.close()
    return {"get_10_p50_ms": scale.pct(times, 50), "get_10_p95_ms": scale.pct(times, 95)}


def answers(store: Path, n_questions: int) -> dict[str, Any]:
    """Whole offline answers in this process (run as a child: nothing in memory from before)."""
    import random

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    engine = Engine(Settings(storage=store, llm="offline"))
    papers = engine.retriever.papers
    sample = {d: papers[d] for d in random.Random(3).sample(list(papers), 500)}
    questions = scale.questions_for(sample, n_extra=max(0, n_questions - 20))[-n_questions:]
    times = []
    embedded = []
    real = type(engine.sentences)._embed

    def spy(self: Any, groups: Any) -> Any:
        embedded.append(sum(len(g) for g in groups))
        return real(self, groups)

    type(engine.sentences)._embed = spy  # type: ignore[method-assign]
    for q in questions:
        t = time.perf_counter()
        engine.ask(q)
        times.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": scale.pct(times, 50), "p95_ms": scale.pct(times, 95), "sentences_embedded": sum(embedded),
            "questions": len(questions)}


def end_to_end(store: Path, n_questions: int) -> dict[str, Any]:
    from bench.perf.million_base import drop_sentences
    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex
    from rag_bot.store.sentence_file import sentence_file

    drop_sentences(store)  # earlier runs' vectors (in the file, or a collection of before it): every use is first
    index = PaperIndex(Settings(storage=store))
    path = sentence_file(index).path
    papers = index.count()
    del index
    out: dict[str, Any] = {"store": str(store), "papers": papers}
    counts = sentence_counts(Path(os.environ.get("BENCH_EXPORT", "/work/sim/real-22166.ragbot.jsonl.gz")), 22166)
    rng = np.random.default_rng(4)
    out["padding"] = file_rows([int(c) for c in rng.choice(counts, papers)], path, prefix="filler-")
    for label in ("first_use", "stored"):
        child = subprocess.run([sys.executable, "-m", __spec__.name, "--answers", str(store), "--questions", str(n_questions)],
                               capture_output=True, text=True, cwd=ROOT)
        if child.returncode:
            raise SystemExit(child.stderr[-2000:])
        out[label] = json.loads(child.stdout.strip().splitlines()[-1])
    out["file_bytes_per_paper"] = scale_disk(path.parent) / papers
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", type=Path, default=Path("/work/sim/real-22166.ragbot.jsonl.gz"))
    parser.add_argument("--papers", type=int, default=1_000_000)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--answers", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.answers:
        print(json.dumps(answers(args.answers.resolve(), args.questions)))
        return 0
    if not args.export.exists():
        raise SystemExit(f"{args.export} not found: python -m bench.collections 22000 and `rag-bot export` make it")
    result: dict[str, Any] = {"load_start": os.getloadavg(), "machine": scale.machine()}
    counts = sentence_counts(args.export, 22166)
    result["sentences_per_paper"] = float(np.mean(counts))
    few = counts[:5000]
    with tempfile.TemporaryDirectory(dir=ROOT / "storage") as tmp:
        folder = Path(tmp)
        result["chroma_collection"] = {"papers": len(few), "bytes_per_paper": chroma_bytes(few, folder / "chroma")}
        result["file_4k_pages"] = file_rows(few, folder / "f4" / "v.sqlite3", page_size=4096)
        result["file"] = file_rows(few, folder / "f16" / "v.sqlite3")
        print(json.dumps(result), flush=True)
        rng = np.random.default_rng(3)
        many = [int(c) for c in rng.choice(counts, args.papers)]
        big = folder / "big" / "v.sqlite3"
        result["file_at_scale"] = file_rows(many, big) | lookups(big, len(many))
        print(json.dumps(result["file_at_scale"]), flush=True)
    if args.store:
        result["answers"] = end_to_end(args.store.resolve(), args.questions)
    result["load_end"] = os.getloadavg()
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
