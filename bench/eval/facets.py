"""Papers like a paper, on one facet, on the fit side: CSFCube's task on papers that may be tuned on (issue 36).

    python -m bench.eval.facets pool shipped train/out/embedder/model ... --out /tmp/facet-pool   # readers' files
    python -m bench.eval.embedder ...                    # reads bench/data/facet_judgements.jsonl when present

CSFCube (../shared/data/csfcube) asks, from the sentences of one facet of a paper (background, method or result),
for other papers alike on that facet. It is locked: no weight may be chosen on it. This set asks the same of
papers that are neither locked, seeds nor CSFCube's, so a training setting (e.g. `--anchor`) can be chosen here
and CSFCube kept to check it.

- **Queries**: 48 papers, by hash, of the 147 unlocked papers whose sentences readers labelled by role
  (bench/data/sentence_roles.jsonl, issue 21); each asks with the sentences of one facet (background: background
  and problem sentences; method; result), the facets taken in turn among those the paper has.
- **Candidates**: the unlocked, non-CSFCube papers (train.pairs.records) of the 3,000-paper benchmark collection,
  the query paper left out.
- **Pool**: each model's top 10, merged, shown to readers in an order set by hash (no model named). Readers grade
  each 0-3 on the facet, as CSFCube's annotators did: 3 near identical, 2 alike, 1 somewhat related, 0 not.
- **Score**: nDCG@20 with the grades as gains (unjudged papers count 0; the share of each model's top 10 judged is
  reported beside it, since a model outside the pool is scored on fewer labels), fit / locked by the query's id
  (`sha1(qid) % 3 == 0`, as every labelled set here): a weight is chosen on the fit part, CSFCube and the locked
  part check it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from bench.eval.embedder import DATA, benchmark_papers, embedders, read_jsonl, split_mean, vectors
from rag_bot.evaluation import metrics
from rag_bot.evaluation.split import locked
from rag_bot.store.tuning import paper_text

JUDGEMENTS = DATA / "facet_judgements.jsonl"
FACETS = {"background": ("background", "problem"), "method": ("method",), "result": ("result",)}
COUNT = 48
POOL_DEPTH = 10


def facet_queries(papers: dict[str, tuple[str, str]], count: int = COUNT) -> list[dict[str, Any]]:
    """`count` facet queries of unlocked papers whose sentences readers labelled, chosen by hash."""
    from rag_bot.store.sentences import paper_sentences
    from rag_bot.types import Paper

    roles: dict[str, dict[int, str]] = {}
    for r in read_jsonl(DATA / "sentence_roles.jsonl"):
        roles.setdefault(r["doc_id"], {})[r["i"]] = r["role"]
    chosen = sorted((d for d in roles if d in papers and not locked(d)),
                    key=lambda d: hashlib.sha1(f"facets:{d}".encode()).hexdigest())
    out: list[dict[str, Any]] = []
    order = list(FACETS)
    for d in chosen:
        sentences = paper_sentences(Paper(doc_id=d, title=papers[d][0], text=papers[d][1], source=""))
        for step in range(len(order)):
            facet = order[(len(out) + step) % len(order)]
            picked = [s for i, s in enumerate(sentences) if roles[d].get(i) in FACETS[facet]]
            if picked and len(picked) < len(sentences):
                out.append({"qid": f"{d}_{facet}", "doc_id": d, "facet": facet, "query": " ".join(picked)})
                break
        if len(out) == count:
            break
    return out


def candidates(papers: dict[str, tuple[str, str]]) -> set[str]:
    """The collection's papers that may be tuned on: not locked, not seeds, not CSFCube's."""
    from train.pairs import records

    return set(papers) & set(records())


def rankings(matrix: np.ndarray, ids: list[str], allowed: set[str], question_vectors: np.ndarray,
             queries: list[dict[str, Any]], k: int = 20) -> dict[str, list[str]]:
    """qid -> the top `k` of the `allowed` papers by cosine (`matrix`: the papers' vectors in `ids` order), the
    query paper left out."""
    usable = np.array([d in allowed for d in ids])
    position = {d: i for i, d in enumerate(ids)}
    out = {}
    for n, q in enumerate(queries):
        scores = np.where(usable, matrix @ question_vectors[n], -np.inf)
        scores[position[q["doc_id"]]] = -np.inf
        out[q["qid"]] = [ids[j] for j in np.argsort(-scores)[:k]]
    return out


@lru_cache(maxsize=1)
def grades() -> dict[str, dict[str, int]]:
    """qid -> doc_id -> the readers' grade."""
    out: dict[str, dict[str, int]] = {}
    for j in read_jsonl(JUDGEMENTS):
        out.setdefault(j["qid"], {})[j["doc_id"]] = int(j["grade"])
    return out


def score(ranks: dict[str, list[str]], queries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """nDCG@20 against the readers' grades, fit / locked by the query id, per facet (both parts), and the share of
    the top 10 judged; None before grading."""
    if not JUDGEMENTS.exists():
        return None
    graded = {q["qid"]: g for q in queries if (g := grades().get(q["qid"]))}
    ndcg = {qid: metrics.ndcg_at_k(ranks[qid], g, 20) for qid, g in graded.items()}
    judged = [np.mean([d in g for d in ranks[qid][:POOL_DEPTH]]) for qid, g in graded.items()]
    return {"nDCG@20": split_mean([(locked(qid), v) for qid, v in ndcg.items()]),
            "facets": {f: round(float(np.mean([ndcg[q["qid"]] for q in queries if q["qid"] in ndcg
                                                and q["facet"] == f])), 4) for f in FACETS},
            "top10 judged": round(float(np.mean(judged)), 3)}


def pool(models: list[str], out: Path, parts: int) -> None:
    """The readers' files: each query's facet, its paper and the merged top 10s, in `parts` files."""
    papers = benchmark_papers(3000)
    queries = facet_queries(papers)
    ids, allowed = sorted(papers), candidates(papers)
    merged: dict[str, set[str]] = {q["qid"]: set() for q in queries}
    for name in models:
        (p_model, p_key), (model, key) = embedders(name)
        matrix = vectors(p_model, p_key, [paper_text(*papers[d]) for d in ids], "papers")
        question_vectors = vectors(model, key, [q["query"] for q in queries], "facets")
        for qid, top in rankings(matrix, ids, allowed, question_vectors, queries).items():
            merged[qid] |= set(top[:POOL_DEPTH])
    out.mkdir(parents=True, exist_ok=True)
    for part in range(parts):
        lines = []
        for q in queries[part::parts]:
            title, text = papers[q["doc_id"]]
            lines += [f"## Query {q['qid']}", f"Facet: **{q['facet']}**", "", f"Facet sentences: {q['query']}", "",
                      f"Query paper (context): {title}. {text}", ""]
            for d in sorted(merged[q["qid"]], key=lambda d: hashlib.sha1(f"{q['qid']}:{d}".encode()).hexdigest()):
                lines += [f"### candidate {d}", f"{papers[d][0]}. {papers[d][1]}", ""]
        (out / f"part_{part}.md").write_text("\n".join(lines), encoding="utf-8")
    total = sum(len(v) for v in merged.values())
    print(f"{len(queries)} queries, {total} candidates to grade, in {parts} files under {out}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("pool",))
    parser.add_argument("models", nargs="+")
    parser.add_argument("--out", type=Path, default=Path("/tmp/facet-pool"))
    parser.add_argument("--parts", type=int, default=4)
    args = parser.parse_args()
    pool(args.models, args.out, args.parts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
