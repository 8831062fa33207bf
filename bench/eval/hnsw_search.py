"""How exact is Chroma's nearest-neighbour search, and is it the same from one process to the next?

    python -m bench.eval.hnsw_search [--sizes 3000 22000] [--ef 100 200 400 1000]

Chroma searches its HNSW graph exploring `ef_search` candidates (100 by default; rag-bot sets EF_SEARCH,
rag_bot/store/base.py). For every question of the dev set (tests/data/dev_questions.jsonl) and the readers' one-paper
questions (bench/data/reader_questions_*.jsonl), as retrieval asks them (`topic_query`, the shipped embedder's query
vector), both collections of a benchmark store (chunks, whole abstracts) are searched for the 40 nearest records
(`chunk_candidates`), and compared with the exact 40 nearest by cosine over every stored vector:
- recall: the share of the exact 40 found, its mean, its minimum and the share of questions with all 40;
- stable: the share of questions whose 40 records are the same in two processes at the same setting (Chroma
  re-adds the vectors written since its last save, every 1,000, when a store opens, in an order that changes);
- ms: the median and p95 wall time of one search (both collections, one after the other), with the load average.

With --quality, retrieval's own figures at each setting instead: R@1 and MRR@10 of the one-paper questions of
bench/eval/decision_order.py (the dev set's single and fact questions, judged known items, generated known items, the
readers' questions), fit and locked parts apart, ranked by `engine.retriever` as an answer is.

Each setting runs in fresh processes (Chroma reads `ef_search` when it loads a collection); the store is left at
EF_SEARCH. Writes bench/results/hnsw_search.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rag_bot.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "hnsw_search.json"
K = 40
COLLECTIONS = tuple(f"{Settings().collection}_{kind}" for kind in ("chunks", "papers"))


def questions() -> list[str]:
    """The dev set's questions and the readers' one-paper questions."""
    out = [json.loads(line)["question"] for line in (ROOT / "tests" / "data" / "dev_questions.jsonl").open()]
    for path in sorted((ROOT / "bench" / "data").glob("reader_questions_*.jsonl")):
        out += [json.loads(line)["question"] for line in path.open() if line.strip()]
    return out


def prepare(store: Path, out: Path) -> None:
    """The questions' vectors and each collection's exact 40 nearest record ids, in `out` (npz)."""
    import chromadb

    from rag_bot.store.embedding import MiniLMEmbedding
    from rag_bot.topics import topic_query

    embedder = MiniLMEmbedding()
    vectors = np.asarray([embedder.get_query_embedding(topic_query(q)) for q in questions()], dtype=np.float32)
    client = chromadb.PersistentClient(path=str(store))
    exact = {}
    for name in COLLECTIONS:
        collection = client.get_collection(name)
        ids: list[str] = []
        rows = []
        for offset in range(0, collection.count(), 5000):
            got = collection.get(include=["embeddings"], limit=5000, offset=offset)
            ids += got["ids"]
            rows.append(np.asarray(got["embeddings"], dtype=np.float32))
        matrix = np.concatenate(rows)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        top = np.argsort(-(vectors @ matrix.T), axis=1)[:, :K]
        exact[name] = np.asarray(ids, dtype=object)[top]
    np.savez(out, vectors=vectors, **{name: exact[name].astype(str) for name in COLLECTIONS})


def search(store: Path, prepared: Path, ef: int, out: Path) -> None:
    """One process: set `ef_search`, then search both collections for every question; ids and times to `out`."""
    import chromadb

    data = np.load(prepared)
    set_search(store, ef)  # before the collections are first searched: Chroma reads the setting when it loads them
    client = chromadb.PersistentClient(path=str(store))
    collections = [client.get_collection(name) for name in COLLECTIONS]
    found: dict[str, list[list[str]]] = {name: [] for name in COLLECTIONS}
    times = []
    for vector in data["vectors"]:
        start = time.perf_counter()
        for name, collection in zip(COLLECTIONS, collections):
            found[name].append(collection.query(query_embeddings=[vector.tolist()], n_results=K,
                                                include=[])["ids"][0])
        times.append(time.perf_counter() - start)
    out.write_text(json.dumps({"found": found, "times": times}))


def set_search(store: Path, ef: int) -> None:
    """The store's collections set to explore `ef` candidates (in a process of its own)."""
    import chromadb

    client = chromadb.PersistentClient(path=str(store))
    for name in COLLECTIONS:
        client.get_collection(name).modify(configuration={"hnsw": {"ef_search": ef}})


def ranks(store: Path, size: int, ef: int, out: Path) -> None:
    """One process: retrieval's rank of the paper asked for, for every one-paper question, at `ef` (set before)."""
    from bench.eval.decision_order import questions
    from rag_bot.engine import Engine
    from rag_bot.nodes import scored_paper
    from rag_bot.settings import Settings
    from rag_bot.store import base

    base.EF_SEARCH = ef  # open the store as it is set, not widened
    engine = Engine(Settings(storage=store))
    assert engine.index.papers.configuration["hnsw"]["ef_search"] == ef
    rows = []
    for q in questions(engine, size, 300):
        nodes = engine.retriever.retrieve(engine.query(q["question"], None))
        ranking = [scored_paper(n).paper.doc_id for n in nodes][:10]
        rows.append({"id": q["id"], "set": q["set"].split(" ")[0],
                     "rank": next((i + 1 for i, d in enumerate(ranking) if d in set(q["relevant"])), None)})
    out.write_text(json.dumps(rows))


def quality(size: int, settings: list[int]) -> dict:
    from bench.collections import store_for
    from rag_bot.evaluation.split import locked
    from rag_bot.store.base import EF_SEARCH

    store = store_for(size)
    report: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n, ef in enumerate(settings):
            out = Path(tmp) / f"{n}.json"
            key = str(ef) if settings.count(ef) == 1 else f"{ef} #{settings[:n].count(ef) + 1}"
            child("--set", store, ef)
            child("--ranks", store, size, ef, out)
            groups: dict[str, list[int | None]] = {}
            for r in json.loads(out.read_text()):
                groups.setdefault(f"{'locked' if locked(r['id']) else 'fit'} {r['set']}", []).append(r["rank"])
            report[key] = {"load": round(os.getloadavg()[0], 2), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **{
                name: {"n": len(rs), "R@1": round(float(np.mean([r == 1 for r in rs])), 3),
                       "MRR@10": round(float(np.mean([1 / r if r else 0.0 for r in rs])), 3)}
                for name, rs in sorted(groups.items())}}
            print(size, key, json.dumps(report[key]), flush=True)
    child("--set", store, EF_SEARCH)
    return {"settings": report}


def child(*args: object) -> None:
    """This script in a fresh process (Chroma reads `ef_search` when it first loads a collection)."""
    subprocess.run([sys.executable, "-m", "bench.eval.hnsw_search", *map(str, args)], check=True, cwd=ROOT)


def run_child(store: Path, prepared: Path, ef: int, folder: Path, tag: str) -> dict:
    out = folder / f"{tag}.json"
    child("--child", store, prepared, ef, out)
    return json.loads(out.read_text())


def measure(size: int, settings: list[int]) -> dict:
    from bench.collections import store_for
    from rag_bot.store.base import EF_SEARCH

    store = store_for(size)
    report: dict = {"papers": None, "questions": 0, "settings": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prepared = folder / "prepared.npz"
        prepare(store, prepared)
        data = np.load(prepared)
        report["questions"] = int(len(data["vectors"]))
        for ef in settings:
            first = run_child(store, prepared, ef, folder, f"{ef}-a")
            second = run_child(store, prepared, ef, folder, f"{ef}-b")
            row: dict = {"load": round(os.getloadavg()[0], 2), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
            for name in COLLECTIONS:
                exact = data[name]
                recall = np.asarray([len(set(e) & set(f)) / K for e, f in zip(exact, first["found"][name])])
                stable = np.mean([a == b for a, b in zip(first["found"][name], second["found"][name])])
                row[name] = {"recall": round(float(recall.mean()), 4), "min recall": round(float(recall.min()), 3),
                             "all found": round(float(np.mean(recall == 1.0)), 4), "stable": round(float(stable), 4)}
            ms = np.asarray(first["times"] + second["times"]) * 1000
            row["ms median"], row["ms p95"] = round(float(np.median(ms)), 2), round(float(np.percentile(ms, 95)), 2)
            report["settings"][str(ef)] = row
            print(size, ef, json.dumps(row), flush=True)
    child("--set", store, EF_SEARCH)  # the store as rag-bot leaves it
    import chromadb

    report["papers"] = chromadb.PersistentClient(path=str(store)).get_collection(COLLECTIONS[1]).count()
    return report


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        store, prepared, ef, out = sys.argv[2:6]
        search(Path(store), Path(prepared), int(ef), Path(out))
        return
    if sys.argv[1:2] == ["--set"]:
        set_search(Path(sys.argv[2]), int(sys.argv[3]))
        return
    if sys.argv[1:2] == ["--ranks"]:
        store, size, ef, out = sys.argv[2:6]
        ranks(Path(store), int(size), int(ef), Path(out))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3000, 22000])
    parser.add_argument("--ef", type=int, nargs="+", default=[100, 200, 400, 1000])
    parser.add_argument("--quality", action="store_true", help="retrieval's R@1 and MRR@10 at each setting")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for size in args.sizes:
        key, run = (f"quality {size}", quality) if args.quality else (str(size), measure)
        # A setting measured again replaces its row; the others stay (each row says when it ran).
        report = run(size, args.ef)
        results[key] = {**report, "settings": {**results.get(key, {}).get("settings", {}), **report["settings"]}}
        RESULTS.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
