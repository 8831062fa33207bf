"""Dense retrieval with two or more embedders, side by side in one run (issue 36, part 2).

    python -m bench.eval.embedder shipped train/out/embedder/onnx [--distractors 3000|22000]

Each model (`shipped`: the int8 MiniLM rag-bot ships; else a model folder, read as RAG_BOT_EMBED_PATH reads it)
embeds every paper as the store does ("title. abstract") and every question; papers are ranked by cosine alone, so
the figures are the embedder's, before fusion, grounding and the decision (bench/eval/relevance.py measures those).

The collection: the benchmark collection of that size (storage/bench-3000 or -22000: the seeds and real
distractors) plus the papers the locked questions below ask for. The question sets, each split fit / locked by
`rag_bot.evaluation.split.locked` of the question id (the generated items by paper):
- dev: the seeds' dev set (tests/data/dev_questions.jsonl), single questions (R@1, MRR@10) and summaries (recall@10);
- judged: bench/data/relevance_questions.jsonl, known items (MRR@10) and areas (judged precision@10: of the top 10
  papers judged at this size, the share judged relevant; recall@20 of the judged relevant held);
- problem: bench/data/reader_questions_2.jsonl (one paper each; its unlocked part was trained on);
- readers: bench/data/reader_questions_{0,1}.jsonl (trained on: a training-side figure, never a locked one);
- generated: a held-out contribution sentence of a locked paper asked as a question (rag_bot.grounding.calibrate's
  known items), the sentence removed from its paper's text;
- facets (fit side): CSFCube's task on unlocked papers, readers' grades (bench/eval/facets.py), nDCG@20;
and CSFCube (../shared/data/csfcube, never trained on): nDCG@20 of its 4,174 papers, dense.

Vectors are cached under storage/bench-embedder/ by model digest and text list, so a rerun embeds only what is new.
Writes bench/results/embedder.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.collections import ML_ABSTRACTS, store_for
from rag_bot.evaluation import metrics
from rag_bot.evaluation.split import locked
from rag_bot.store.tuning import paper_text

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "bench" / "data"
CACHE = REPO / "storage" / "bench-embedder"
OUT = REPO / "bench" / "results" / "embedder.json"
CSFCUBE = REPO.parent / "shared" / "data" / "csfcube"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def embedder(model: str) -> Any:
    from rag_bot.store.embedding import MiniLMEmbedding
    from rag_bot.store.local_embedding import FolderEmbedding, weights_digest

    if model == "shipped":
        return MiniLMEmbedding(), "shipped-int8"
    path = Path(model)
    return FolderEmbedding(path), f"{path.name}-{(weights_digest(path) or 'none')[:12]}"


def embedders(name: str) -> tuple[tuple[Any, str], tuple[Any, str]]:
    """(papers' model, its cache key), (questions' model, its key): `PAPERS+QUESTIONS` names a question encoder
    (train/embedder.py --questions-only) beside the model that embedded the papers, e.g. `shipped+DIR`."""
    if "+" in name:
        papers, questions = name.split("+", 1)
        return embedder(papers), embedder(questions)
    both = embedder(name)
    return both, both


def vectors(model: Any, key: str, texts: list[str], what: str) -> np.ndarray:
    digest = hashlib.sha1("\x1e".join(texts).encode()).hexdigest()[:12]
    path = CACHE / f"{key}-{what}-{digest}.npy"
    if path.exists():
        return np.load(path)
    start = time.perf_counter()
    out = np.vstack([model.embed(texts[i:i + 64]) for i in range(0, len(texts), 64)]) if texts else np.zeros((0, 384))
    print(f"{key} {what}: {len(texts)} texts in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


def collection(store: Path, extra: set[str]) -> dict[str, tuple[str, str]]:
    """doc_id -> (title, text) of a store's collection, plus the `extra` papers of the 22,148-record file."""
    import gzip

    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex

    index = PaperIndex(Settings(storage=store))
    papers = {p.doc_id: (p.title, p.text) for p in index.all_papers()}
    with gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r["id"] in extra and r["id"] not in papers:
                papers[r["id"]] = (r["title"], r["abstract"])
    return papers


def benchmark_papers(distractors: int) -> dict[str, tuple[str, str]]:
    """The benchmark collection of that size plus the papers the locked problem-first questions ask for."""
    problem = read_jsonl(DATA / "reader_questions_2.jsonl")
    return collection(store_for(distractors), {q["target"][0] for q in problem if locked(q["id"])})


def ranked(q: np.ndarray, papers: np.ndarray, ids: list[str], k: int = 20) -> list[list[str]]:
    scores = q @ papers.T
    top = np.argsort(-scores, axis=1)[:, :k]
    return [[ids[j] for j in row] for row in top]


def split_mean(rows: list[tuple[bool, float]]) -> dict[str, Any]:
    fit = [v for lock, v in rows if not lock]
    held = [v for lock, v in rows if lock]
    return {"fit": round(float(np.mean(fit)), 3) if fit else None,
            "locked": round(float(np.mean(held)), 3) if held else None, "n": [len(fit), len(held)]}


def split_halves(papers: dict[str, tuple[str, str]], ids: list[str], count: int = 300) -> list[tuple[str, str, str]]:
    """Paper to paper, on the fit side (a measure of what a pasted abstract asks, where no weight is chosen on
    CSFCube): `count` papers of 6 sentences or more, by hash, each split into its first half (the question, as a
    pasted abstract) and its title with the other half (the paper); fit and locked by the paper's id. Measured on
    2026-12-04 it does not track CSFCube: every tuned model gained here (locked R@1 0.636 -> 0.716-0.75) while
    losing there, since finding a paper's own other half is not finding other papers like it."""
    import re

    out = []
    for d in sorted(ids, key=lambda d: hashlib.sha1(f"halves:{d}".encode()).hexdigest()):
        sentences = re.split(r"(?<=[.!?])\s+", " ".join(papers[d][1].split()))
        if len(sentences) >= 6:
            cut = len(sentences) // 2
            out.append((d, " ".join(sentences[:cut]), f"{' '.join(papers[d][0].split())}. {' '.join(sentences[cut:])}"))
        if len(out) == count:
            break
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="+")
    parser.add_argument("--distractors", type=int, default=3000, choices=(3000, 22000))
    parser.add_argument("--store", type=Path, help="another store's collection, as it is (no papers added): e.g. one "
                        "`rag-bot tune` was run on")
    parser.add_argument("--no-csfcube", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    judged_q = read_jsonl(DATA / "relevance_questions.jsonl")
    pairs = read_jsonl(DATA / "relevance_pairs.jsonl")
    size_key = 3000 if args.distractors == 3000 else 22000
    problem = read_jsonl(DATA / "reader_questions_2.jsonl")
    readers = [q for n in (0, 1) for q in read_jsonl(DATA / f"reader_questions_{n}.jsonl")]
    papers = collection(args.store, set()) if args.store else benchmark_papers(args.distractors)
    ids = sorted(papers)
    from rag_bot.evaluation.evaluate import DEFAULT_SET, load_questions
    from rag_bot.grounding.calibrate import known_items
    from rag_bot.types import Paper

    dev = [q for q in load_questions(DEFAULT_SET) if q.kind in ("single", "fact", "summary", "compare")]
    dev = [q for q in dev if q.expected and set(q.expected) <= set(ids)]
    lockeds = {d: Paper(doc_id=d, title=papers[d][0], text=papers[d][1], source="") for d in ids if locked(d)}
    generated = known_items(lockeds, count=300)
    halves = split_halves(papers, ids)
    gen_ids = {g.doc_id for g in generated}
    sets: dict[str, list[dict]] = {
        "dev single": [{"id": q.id, "q": q.question, "rel": set(q.expected), "one": True} for q in dev
                       if q.kind in ("single", "fact")],
        "dev summary": [{"id": q.id, "q": q.question, "rel": set(q.expected), "one": False} for q in dev
                        if q.kind in ("summary", "compare")],
        "judged known": [{"id": q["id"], "q": q["question"], "rel": set(q["target"]), "one": True} for q in judged_q
                         if q["kind"] == "known" and set(q["target"]) <= set(papers)],
        "problem": [{"id": q["id"], "q": q["question"], "rel": {q["target"][0]}, "one": True} for q in problem
                    if q["target"][0] in papers],
        "readers (trained on)": [{"id": q["id"], "q": q["question"], "rel": {q["target"][0]}, "one": True}
                                 for q in readers if q["target"][0] in papers],
        "generated (locked papers)": [{"id": g.doc_id, "q": g.question, "rel": {g.doc_id}, "one": True}
                                      for g in generated],
        "halves (paper to paper)": [{"id": d, "q": q, "rel": {d}, "one": True} for d, q, _ in halves],
    }
    judged = {}
    for p in pairs:
        if p["size"] == size_key:
            judged.setdefault(p["qid"], {})[p["doc_id"]] = p["relevant"]
    areas = [q for q in judged_q if q["mode"] == "summary" and q["id"] in judged]
    from bench.eval.facets import JUDGEMENTS, candidates, facet_queries, rankings, score

    # the facet set ranks the benchmark collection's papers: not another store's
    facets = facet_queries(papers) if JUDGEMENTS.exists() and not args.store else []
    facet_papers = candidates(papers) if facets else set()
    report: dict[str, Any] = {"collection": len(ids), "distractors": args.distractors, "store": str(args.store),
                              "load": os.getloadavg()[0], "models": {}}
    texts = [paper_text(*papers[d]) for d in ids]
    position = {d: i for i, d in enumerate(ids)}
    for name in args.models:
        (p_model, p_key), (model, key) = embedders(name)
        matrix = vectors(p_model, p_key, texts, "papers")
        row: dict[str, Any] = {}
        for label, items in sets.items():
            if not items:
                continue
            qv = vectors(model, key, [i["q"] for i in items], label.split()[0])
            if label.startswith("generated"):
                # the question's own sentence is held out of its paper's vector
                held = vectors(p_model, p_key, [paper_text(*papers[g.doc_id], g.question) for g in generated],
                               "held")
            if label.startswith("halves"):  # the paper is its other half
                held = vectors(p_model, p_key, [rest for _, _, rest in halves], "halves-rest")
            tops = []
            for n, item in enumerate(items):
                scores = matrix @ qv[n]
                if label.startswith(("generated", "halves")):
                    scores = scores.copy()
                    scores[position[item["id"]]] = float(held[n] @ qv[n])
                tops.append([ids[j] for j in np.argsort(-scores)[:20]])
            lock = [locked(i["id"]) for i in items]
            if items[0]["one"]:
                row[label] = {"R@1": split_mean([(k, metrics.success_at_k(t, i["rel"], 1))
                                                 for k, t, i in zip(lock, tops, items)]),
                              "MRR@10": split_mean([(k, metrics.reciprocal_rank(t, i["rel"], 10))
                                                    for k, t, i in zip(lock, tops, items)])}
            else:
                row[label] = {"recall@10": split_mean([(k, metrics.recall_at_k(t, i["rel"], 10))
                                                       for k, t, i in zip(lock, tops, items)])}
        qv = vectors(model, key, [q["question"] for q in areas], "areas")
        prec, rec = [], []
        for n, q in enumerate(areas):
            top = ranked(qv[n:n + 1], matrix, ids, k=60)[0]
            labels = judged[q["id"]]
            seen = [labels[d] for d in top if d in labels][:10]
            relevant = {d for d, r in labels.items() if r and d in position}
            if seen:
                prec.append((locked(q["id"]), sum(seen) / len(seen)))
            if relevant:
                rec.append((locked(q["id"]), metrics.recall_at_k(top, relevant, 20)))
        row["judged areas"] = {"precision@10 (judged)": split_mean(prec), "recall@20": split_mean(rec)}
        if facets:
            fv = vectors(model, key, [q["query"] for q in facets], "facets")
            row["facets (fit side)"] = score(rankings(matrix, ids, facet_papers, fv, facets), facets)
        if not args.no_csfcube and CSFCUBE.exists():
            from bench.eval.csfcube import drop_excluded, load_corpus, load_queries, score_query

            docs = load_corpus(CSFCUBE)
            queries = load_queries(CSFCUBE)
            cv = vectors(p_model, p_key, [f"{d['title']}. {d['text']}" for d in docs], "csfcube")
            cq = vectors(model, key, [q["query"] for q in queries], "csfcube-q")
            cids = [str(d["id"]) for d in docs]
            scores = [score_query(drop_excluded(ranked(cq[n:n + 1], cv, cids, k=40)[0], q.get("exclude_ids", [])),
                                  q) for n, q in enumerate(queries)]
            row["csfcube"] = {k: round(float(np.mean([s[k] for s in scores])), 4) for k in scores[0]}
        report["models"][name] = row
        print(json.dumps({name: row}), flush=True)
    report["sets"] = {k: len(v) for k, v in sets.items()} | {"judged areas": len(areas), "generated papers":
                                                             len(gen_ids)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
