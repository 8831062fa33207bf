"""Disk of a paper's record in Chroma's folder store by where its text goes (issue 25): the same N real abstracts
(../shared/data/ml_abstracts.jsonl.gz, read in place) with the metadata rag-bot writes and random vectors, written
into a fresh collection in each layout, the file vacuumed, and each SQLite table and index measured (dbstat):
  document  the text as Chroma's document (rag-bot before this change: Chroma adds it to its FTS5 trigram index)
  metadata  the text as one metadata string
  pieces    the text in metadata, long strings in pieces (rag_bot/store/records.py, PIECE bytes), as written now
  pieces600 the same with 600-byte pieces
Only the papers' collection is measured; HNSW files are not counted.

    .venv/bin/python -m bench.perf.record_layout [--papers 3000]

Appends to bench/results/record_layout.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
from chromadb.config import Settings as ChromaSettings

from rag_bot.reading.records import make_paper
from rag_bot.store import records

ROOT = Path(__file__).resolve().parents[2]

DATA = ROOT.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
RESULTS = ROOT / "bench" / "results" / "record_layout.json"


def _papers(n: int) -> list[Any]:
    out = []
    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            out.append(make_paper(f"ml#{len(out)}", row.get("abstract") or "", "ml_abstracts.jsonl",
                                  title=row.get("title"), venue=row.get("venue"), year=row.get("year"),
                                  url=row.get("url"), authors=row.get("authors") or []))
            if len(out) == n:
                return out
    return out


def _write(folder: Path, layout: str, papers: list[Any], vectors: np.ndarray) -> None:
    client = chromadb.PersistentClient(path=str(folder), settings=ChromaSettings(anonymized_telemetry=False))
    collection = client.create_collection("papers", embedding_function=None, metadata={"hnsw:space": "cosine"})
    for start in range(0, len(papers), 500):
        batch = papers[start:start + 500]
        metas = [records.paper_metadata(p, f"{n:064x}") | {"chunks": 2} for n, p in enumerate(batch, start)]
        documents = None
        if layout == "document":
            documents = [m.pop(records.TEXT) for m in metas]
        elif layout.startswith("pieces"):
            records.PIECE = int(layout[6:] or 900)
            metas = [{k: v for k, v in records.spread(m).items() if v is not None} for m in metas]
        collection.add(ids=[p.doc_id for p in batch], embeddings=vectors[start:start + len(batch)],
                       documents=documents, metadatas=metas)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--papers", type=int, default=3000)
    args = parser.parse_args()
    if not DATA.exists():
        print(f"{DATA} is absent: this benchmark reads real abstracts from it")
        return 1
    papers = _papers(args.papers)
    vectors = np.random.default_rng(0).normal(size=(len(papers), 384)).astype(np.float32)
    text = sum(len(p.text.encode("utf-8")) for p in papers) / len(papers)
    rows = []
    for layout in ("document", "metadata", "pieces", "pieces600"):
        folder = Path(tempfile.mkdtemp(prefix="rag-bot-layout-"))
        try:
            _write(folder, layout, papers, vectors)
            db = sqlite3.connect(folder / "chroma.sqlite3")
            db.execute("VACUUM")
            parts = dict(db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
            db.close()
            size = os.path.getsize(folder / "chroma.sqlite3")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        top = {k: round(v / len(papers)) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])[:5]}
        rows.append({"layout": layout, "bytes_per_paper": round(size / len(papers)), "largest_parts": top})
        print(f"{layout:10s} {size / len(papers) / 1000:6.2f} KB a paper  {top}")
    result = {"when": time.strftime("%Y-%m-%d %H:%M"), "papers": len(papers), "text_bytes_per_paper": round(text),
              "load": os.getloadavg()[0], "rows": rows}
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.write_text(json.dumps(old + [result], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
