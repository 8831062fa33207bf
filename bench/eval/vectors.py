"""How many vectors does a paper need? Dense layouts compared on the same stores, without re-embedding.

    python -m bench.eval.vectors [--csfcube-store storage/bench-csfcube] [--skip-dev] [--skip-csfcube]
    python -m bench.eval.vectors --pass-cost 200 [--store storage/bench-3000]   # embedding cost per layout

With --pass-cost, the CPU cost of each embedding pass an ingest could make, on the same real abstracts,
interleaved round by round (the machine is shared): the chunks (title + chunk text, as `rag-bot ingest`), the
sentences (what grounding and the offline writer score; persisted in `<name>_sentences`), the whole abstracts
(title + abstract), and the sentences again with onnxruntime spinning between operators (as before).

A store written with chunks + a whole-abstract vector holds both layouts: "chunks+paper" queries both
collections (rag-bot up to index v2), "paper" only the one whole-abstract vector per paper (title + abstract,
256 tokens). Both are scored in one run: the dev set through `evaluate` (a fresh seeds store) and CSFCube
nDCG@20/R@20/MAP (bench/eval/csfcube.py's scoring) in the dense and hybrid modes.
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

REPO = Path(__file__).resolve().parents[2]

LAYOUTS = ("chunks+paper", "paper")


def mean_store(src: Path, dst: Path) -> Path:
    """A copy of a store whose paper vectors are the normalised mean of the paper's chunk vectors (the
    "chunks+mean" layout: one embedding pass over the chunks only)."""
    import shutil

    import numpy as np

    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex

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
    from rag_bot.evaluation.evaluate import DEFAULT_SET, evaluate, load_questions
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
    from bench.eval import csfcube as cf
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


def sentence_store(src: Path, dst: Path, weighted: bool = False) -> Path:
    """A copy of a store whose chunk and paper vectors are derived from its sentence vectors (option (a) of issue
    11: one embedding pass over the sentences at ingest, persisted for answers, and no chunk pass). A chunk's vector
    is the normalised mean of its title's vector and the vectors of the sentences it holds (by their start; with
    `weighted`, each weighted by its word pieces, as mean pooling over one text would); a paper's, of its title
    and all its sentences. The sentence vectors are filled into the source store first (`SentenceIndex.fill`)."""
    import shutil

    import numpy as np

    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex
    from rag_bot.store.sentences import SentenceIndex

    source = PaperIndex(Settings(storage=src))
    papers = source.all_papers()
    filled = SentenceIndex(source.embedder, store=source).fill(papers)
    print(f"{src}: {filled} papers' sentences embedded and persisted", file=sys.stderr, flush=True)
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    index = PaperIndex(Settings(storage=dst), embedder=source.embedder)
    sentences = SentenceIndex(index.embedder, store=index)
    tokenizer = index.embedder._tokenizer

    def norm(v: Any) -> list[float]:
        return (v / max(float(np.linalg.norm(v)), 1e-12)).tolist()

    for start in range(0, len(papers), 200):
        batch = papers[start:start + 200]
        titles = index.embedder.embed([p.title or p.doc_id for p in batch])
        sentences.prefetch(batch)
        chunk_ids: list[str] = []
        chunk_vectors: list[list[float]] = []
        paper_vectors: list[list[float]] = []
        for paper, title in zip(batch, titles):
            texts, vectors = sentences.of(paper)
            weights = (np.array([len(e.ids) for e in tokenizer.encode_batch(texts)], dtype=np.float64)
                       if weighted else np.ones(len(texts)))
            title_weight = float(len(tokenizer.encode(paper.title or paper.doc_id).ids)) if weighted else 1.0
            flat = [" ".join(t.split()) for t in texts]
            for node in index.chunk_nodes(paper):
                chunk = " ".join(node.get_content().split())
                held = [i for i, t in enumerate(flat) if t[:40] in chunk or chunk[:40] in t] or list(range(len(flat)))
                mean = title * title_weight + (vectors[held] * weights[held, None]).sum(axis=0)
                chunk_ids.append(node.node_id)
                chunk_vectors.append(norm(mean))
            paper_vectors.append(norm(title * title_weight + (vectors * weights[:, None]).sum(axis=0)))
        for i in range(0, len(chunk_ids), 1000):
            index.chunks.update(ids=chunk_ids[i:i + 1000], embeddings=chunk_vectors[i:i + 1000])
        index.papers.update(ids=[p.doc_id for p in batch], embeddings=paper_vectors)
    return dst


def derived(seeds_store: Path | None, csfcube_store: Path | None, scale_store: Path | None) -> list[dict[str, Any]]:
    """Option (a) against the stores as built: the dev set (fresh seeds store), CSFCube (dense and hybrid
    nDCG@20) and the dev + partial questions at 3,000 papers, each on the store and its sentence-derived copy."""
    from bench.eval import csfcube as cf
    from bench.eval import scale as eval_scale
    from rag_bot.engine import Engine
    from rag_bot.evaluation.evaluate import DEFAULT_SET, evaluate, load_questions
    from rag_bot.settings import Settings

    rows: list[dict[str, Any]] = []
    questions = load_questions(DEFAULT_SET)
    work = Path(tempfile.mkdtemp(prefix="rag-bot-derived-"))
    if seeds_store is None:
        seeds_store = work / "seeds"
        Engine(Settings(storage=seeds_store)).ingest([REPO / "seeds"])
    pairs = [("dev", seeds_store)] + ([("3000", scale_store)] if scale_store else [])
    for name, store in pairs:
        for weighted in (False, True):
            copy = sentence_store(store, work / f"{name}-{int(weighted)}", weighted=weighted)
            variants = [("as built", store), (f"from sentences{' (weighted)' if weighted else ''}", copy)]
            for label, path in variants:
                if weighted and label == "as built":
                    continue
                engine = Engine(Settings(storage=path))
                m = evaluate(engine, questions)
                m.pop("rows", None)
                if name != "dev":
                    m |= {k: v for k, v in eval_scale.partial_scores(engine).items() if k != "rows"}
                rows.append({"set": name, "layout": label} | m)
                print(json.dumps(rows[-1]), flush=True)
    if csfcube_store is not None:
        queries = cf.load_queries(cf.DATA)
        for weighted in (False, True):
            copy = sentence_store(csfcube_store, work / f"csfcube-{int(weighted)}", weighted=weighted)
            for label, path in (("as built", csfcube_store), (f"from sentences{' (weighted)' if weighted else ''}", copy)):
                if weighted and label == "as built":
                    continue
                for mode in ("dense", "hybrid"):
                    retriever = Engine(Settings(storage=path, retrieval=mode, top_k=200,
                                                chunk_candidates=200)).retriever
                    rankings = {}
                    for q in queries:
                        hits = retriever.retrieve_papers(q["query"], top_k=200 + len(q["exclude_ids"]))
                        rankings[q["qid"]] = cf.drop_excluded([h.paper.doc_id for h in hits], q["exclude_ids"])[:200]
                    result = cf.score_run(rankings, queries)
                    result.pop("per_query", None)
                    rows.append({"set": "csfcube", "layout": label, "mode": mode} | result)
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def pass_cost(store: Path, n: int, rounds: int = 3) -> dict[str, Any]:
    """CPU seconds per abstract and word pieces of each embedding pass, interleaved over `rounds`."""
    import random

    import onnxruntime as ort

    from rag_bot.settings import Settings
    from rag_bot.store.embedding import MiniLMEmbedding, model_files
    from rag_bot.store.index import PaperIndex
    from rag_bot.store.sentences import paper_sentences
    from rag_bot.text import clean_markup

    index = PaperIndex(Settings(storage=store))
    ids = sorted(index.fingerprints())
    picked = random.Random(17).sample(ids, min(n, len(ids)))
    got = index.papers.get(ids=picked, include=["documents", "metadatas"])
    from rag_bot.store.index import paper_from_record

    papers = [paper_from_record(i, t or "", dict(m or {})) for i, t, m in
              zip(got["ids"], got["documents"] or [], got["metadatas"] or [])]
    passes = {
        "chunks": [f"{node.metadata['title']}. {node.get_content()}" for p in papers for node in index.chunk_nodes(p)],
        "sentences": [s for p in papers for s in paper_sentences(p)],
        "whole": [f"{p.title}. {clean_markup(p.text)}" for p in papers],
    }
    embedder = index.embedder
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.inter_op_num_threads = 1
    spinning = MiniLMEmbedding(max_tokens=embedder.max_tokens)
    spinning._session = ort.InferenceSession(str(model_files()[0]), options, providers=["CPUExecutionProvider"])
    runs: dict[str, list[float]] = {name: [] for name in (*passes, "sentences, spinning")}
    embedder.embed(passes["sentences"][:8])
    for _ in range(rounds):
        for name in runs:
            model = spinning if name.endswith("spinning") else embedder
            texts = passes[name.split(",")[0]]
            start = time.process_time()
            model.embed(texts)
            runs[name].append(time.process_time() - start)
    tokens = {name: sum(len(e.ids) for e in embedder._tokenizer.encode_batch(texts)) for name, texts in passes.items()}
    return {"abstracts": len(papers), "texts": {k: len(v) for k, v in passes.items()}, "word_pieces": tokens,
            "cpu_ms_per_abstract": {k: round(min(v) * 1000 / len(papers), 1) for k, v in runs.items()},
            "cpu_s_runs": {k: [round(x, 2) for x in v] for k, v in runs.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--csfcube-store", type=Path, default=REPO / "storage" / "bench-csfcube")
    ap.add_argument("--skip-dev", action="store_true")
    ap.add_argument("--skip-csfcube", action="store_true")
    ap.add_argument("--pass-cost", type=int, default=0, help="abstracts for the embedding-cost comparison only")
    ap.add_argument("--store", type=Path, default=REPO / "storage" / "bench-3000")
    ap.add_argument("--derived", action="store_true",
                    help="chunk and paper vectors derived from the sentence vectors (dev, CSFCube, --store)")
    args = ap.parse_args()
    if args.derived:
        rows = derived(None, args.csfcube_store if not args.skip_csfcube else None,
                       args.store if args.store.exists() else None)
        (REPO / "bench" / "results").mkdir(exist_ok=True)
        (REPO / "bench" / "results" / "derived.json").write_text(json.dumps(
            {"date": time.strftime("%Y-%m-%d %H:%M UTC"), "rows": rows}, indent=1))
        return 0
    if args.pass_cost:
        result = pass_cost(args.store, args.pass_cost) | {"date": time.strftime("%Y-%m-%d %H:%M UTC")}
        (REPO / "bench" / "results").mkdir(exist_ok=True)
        (REPO / "bench" / "results" / "pass_cost.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return 0
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
