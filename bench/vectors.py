"""How many vectors does a paper need? Dense layouts compared on the same stores, without re-embedding.

    python bench/vectors.py [--csfcube-store storage/bench-csfcube] [--skip-dev] [--skip-csfcube]

A store written with chunks + a whole-abstract vector holds both layouts: "chunks+paper" queries both
collections (rag-bot up to index v2), "paper" only the one whole-abstract vector per paper (title + abstract,
256 tokens). Both are scored in one run: the dev set through `evaluate` (a fresh seeds store) and CSFCube
nDCG@20/R@20/MAP (bench/csfcube.py's scoring) in the dense and hybrid modes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

LAYOUTS = ("chunks+paper", "paper")


def mean_store(src: Path, dst: Path) -> Path:
    """A copy of a store whose paper vectors are the normalised mean of the paper's chunk vectors (the
    "chunks+mean" layout: one embedding pass over the chunks only)."""
    import shutil

    import numpy as np

    from rag_bot.index import PaperIndex
    from rag_bot.settings import Settings

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    index = PaperIndex(Settings(storage=dst))
    ids = sorted(index.fingerprints())
    for start in range(0, len(ids), 500):
        batch = ids[start:start + 500]
        got = index.chunks.get(where={"doc_id": {"$in": batch}}, include=["embeddings", "metadatas"])
        sums: dict[str, Any] = {}
        for meta, vec in zip(got["metadatas"], got["embeddings"]):
            d = str(meta["doc_id"])
            sums[d] = sums.get(d, 0) + np.asarray(vec, dtype=np.float64)
        keep = [d for d in batch if d in sums]
        vectors = [(sums[d] / max(float(np.linalg.norm(sums[d])), 1e-12)).tolist() for d in keep]
        if keep:
            index.papers.update(ids=keep, embeddings=vectors)
    return dst


def apply_layout(engine: Any, layout: str) -> None:
    """Restrict the engine's dense search to a layout (the snapshot's chunk count gates the chunk query)."""
    retriever = engine.retriever
    if layout == "paper":
        retriever._snapshot = dataclasses.replace(retriever._snapshot, chunks=0)


def dev(seeds_store: Path | None = None) -> dict[str, dict[str, Any]]:
    """Dev-set metrics per layout on a seeds store (a fresh one unless given)."""
    from rag_bot.engine import Engine
    from rag_bot.evaluate import DEFAULT_SET, evaluate, load_questions
    from rag_bot.settings import Settings

    questions = load_questions(DEFAULT_SET)
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = seeds_store or Path(tmp)
        if seeds_store is None:
            Engine(Settings(storage=store)).ingest([REPO / "seeds"])
        for layout in LAYOUTS:
            engine = Engine(Settings(storage=store))
            apply_layout(engine, layout)
            out[layout] = evaluate(engine, questions)
        engine = Engine(Settings(storage=mean_store(store, Path(tmp) / "mean")))
        out["chunks+mean"] = evaluate(engine, questions)
    return out


def csfcube(store: Path, modes: tuple[str, ...] = ("dense", "hybrid")) -> dict[str, dict[str, Any]]:
    """CSFCube scores per layout and mode on an existing store."""
    import csfcube as cf

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    queries = cf.load_queries(cf.DATA)
    out: dict[str, dict[str, Any]] = {}
    mean = mean_store(store, Path(tempfile.gettempdir()) / "rag-bot-vectors-mean")
    for mode in modes:
        for layout in LAYOUTS + ("chunks+mean",):
            path = mean if layout == "chunks+mean" else store
            engine = Engine(Settings(storage=path, retrieval=mode, top_k=200, chunk_candidates=200))
            apply_layout(engine, layout)
            retriever = engine.retriever
            rankings = {}
            start = time.perf_counter()
            for q in queries:
                hits = retriever.retrieve_papers(q["query"], top_k=200 + len(q["exclude_ids"]))
                rankings[q["qid"]] = cf.drop_excluded([h.paper.doc_id for h in hits], q["exclude_ids"])[:200]
            result = cf.score_run(rankings, queries)
            result.pop("per_query", None)
            result["seconds"] = round(time.perf_counter() - start, 1)
            out[f"{mode}/{layout}"] = result
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--csfcube-store", type=Path, default=REPO / "storage" / "bench-csfcube")
    ap.add_argument("--skip-dev", action="store_true")
    ap.add_argument("--skip-csfcube", action="store_true")
    args = ap.parse_args()
    rows = []
    if not args.skip_dev:
        for layout, m in dev().items():
            m.pop("rows", None)
            rows.append({"set": "dev", "layout": layout} | m)
            print(json.dumps(rows[-1]), flush=True)
    if not args.skip_csfcube and args.csfcube_store.exists():
        for key, m in csfcube(args.csfcube_store).items():
            rows.append({"set": "csfcube", "run": key} | m)
            print(json.dumps(rows[-1]), flush=True)
    (REPO / "bench" / "results").mkdir(exist_ok=True)
    (REPO / "bench" / "results" / "vectors.json").write_text(json.dumps(
        {"date": time.strftime("%Y-%m-%d %H:%M UTC"), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
