"""Where a folder store's disk goes (issue 25): `chroma.sqlite3`, the HNSW folders (the vectors), the lexical cache,
per paper, and the SQLite tables and indexes inside `chroma.sqlite3` (dbstat, read-only: the store is not changed).

    .venv/bin/python -m bench.perf.store_disk LABEL=STORE [LABEL=STORE ...]

A store imported by the parent commit beside one imported by this checkout (same file) is the before/after pair:
    git worktree add /tmp/base <parent>; cd /tmp && PYTHONPATH=/tmp/base python -m rag_bot.surfaces.cli ... import

Appends to bench/results/store_disk.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "store_disk.json"


def _mib(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


def measure(label: str, store: Path) -> dict:
    db = sqlite3.connect(f"file:{store / 'chroma.sqlite3'}?mode=ro", uri=True)
    papers = db.execute("SELECT count(*) FROM embeddings e JOIN segments s ON e.segment_id = s.id "
                        "JOIN collections c ON s.collection = c.id WHERE c.name LIKE '%\\_papers' ESCAPE '\\'"
                        ).fetchone()[0]
    parts = db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 6").fetchall()
    free = db.execute("PRAGMA freelist_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    sqlite_mib = _mib(store / "chroma.sqlite3")
    lexicon_mib = _mib(store / "lexicon") if (store / "lexicon").exists() else 0.0
    hnsw_mib = sum(_mib(p) for p in store.iterdir() if p.is_dir() and p.name != "lexicon")
    beside = sqlite_mib + lexicon_mib
    return {"label": label, "store": str(store), "papers": papers, "sqlite_mib": round(sqlite_mib, 1),
            "sqlite_free_mib": round(free / 2**20, 1), "lexicon_mib": round(lexicon_mib, 1),
            "hnsw_mib": round(hnsw_mib, 1), "beside_vectors_kb_per_paper": round(beside * 2**20 / max(papers, 1) / 1000, 2),
            "sqlite_parts_bytes_per_paper": {name: round(size / max(papers, 1)) for name, size in parts}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", metavar="LABEL=STORE")
    rows = []
    for arg in parser.parse_args().stores:
        label, _, store = arg.partition("=")
        row = measure(label, Path(store))
        print(json.dumps(row))
        rows.append(row)
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.write_text(json.dumps(old + [{"when": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg()[0],
                                          "rows": rows}], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
