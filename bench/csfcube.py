"""CSFCube: a public retrieval benchmark for rag-bot (faceted query-by-example over CS paper abstracts).

    python bench/csfcube.py [--store DIR] [--modes dense,bm25,hybrid] [--out docs/csfcube.md] [--no-ideas]

The 4,174 CSFCube abstracts are ingested through rag-bot's own index (incremental, so the slow embedding
happens once per store) and each of the 50 queries (the facet sentences of a query abstract) ranks the
whole corpus through `Engine.retriever.retrieve_papers`. The query paper itself (`exclude_ids`) is dropped
from the ranking. Metrics, as in ../shared/data/SOURCES.md ("csfcube"):

* nDCG@20 on the graded labels (gain = grade 0-3, log2 discount, ideal from all graded judgments),
* Recall@20 and MAP on `relevant_ids` (grade >= 2); AP is computed over the returned list (top_k papers).

With `--ideas` (the default) the script also measures retrieval ideas for long queries WITHOUT changing
rag_bot: they re-use the stored vectors and the retriever's own BM25 index and re-implement only the fusion
(checked against the engine's hybrid ranking, see the "replica" row).

The data are CC BY-NC 4.0 and are read from ../shared/data/csfcube, never copied into the repository.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "csfcube"
DEFAULT_STORE = REPO / "storage" / "bench-csfcube"
DEFAULT_OUT = REPO / "docs" / "csfcube.md"
CUTOFF = 20
INGEST_LOG = "bench_csfcube_ingest.json"
FACETS = ("background", "method", "result")


# --- data ------------------------------------------------------------------------------------------------
def load_corpus(data: Path) -> list[dict[str, Any]]:
    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_queries(data: Path) -> list[dict[str, Any]]:
    with open(data / "queries.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def to_papers(docs: list[dict[str, Any]]) -> list[Any]:
    from rag_bot.corpus import make_paper

    return [make_paper(doc_id=str(d["id"]), text=d["text"], source="csfcube", title=d["title"]) for d in docs]


def ingest(store: Path, papers: list[Any]) -> tuple[Any, float]:
    """Incremental ingest into the bench store; returns the report and the seconds it took."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    engine = Engine(Settings(storage=store))
    done = [0]
    start = time.perf_counter()

    def progress(n: int) -> None:
        done[0] += n
        if done[0] % 320 < n or done[0] == len(papers):
            print(f"  ingest {done[0]}/{len(papers)} ({time.perf_counter() - start:.0f} s)", flush=True)

    report = engine.index.ingest(papers, progress=progress)
    seconds = time.perf_counter() - start
    if report.chunks_embedded:  # remember the slow runs: later runs find nothing to embed
        log = ingest_log(store)
        log.append({"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "papers": report.added + report.updated,
                    "chunks": report.chunks_embedded, "seconds": round(seconds)})
        (store / INGEST_LOG).write_text(json.dumps(log, indent=1), encoding="utf-8")
    return report, seconds


def ingest_log(store: Path) -> list[dict[str, Any]]:
    """The runs that embedded something into this store (kept in the store folder, not in git)."""
    path = store / INGEST_LOG
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


# --- metrics ---------------------------------------------------------------------------------------------
def ndcg(ranking: Sequence[str], grades: dict[str, int], k: int = CUTOFF) -> float:
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall(ranking: Sequence[str], relevant: set[str], k: int = CUTOFF) -> float:
    return len(relevant & set(ranking[:k])) / len(relevant) if relevant else 0.0


def average_precision(ranking: Sequence[str], relevant: set[str]) -> float:
    hits, total = 0, 0.0
    for i, d in enumerate(ranking):
        if d in relevant:
            hits += 1
            total += hits / (i + 1)
    return total / len(relevant) if relevant else 0.0


def score_run(rankings: dict[str, list[str]], queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean metrics of a run (qid -> ranked doc ids, query paper already dropped), overall and per facet."""
    per_query: dict[str, dict[str, float]] = {}
    for q in queries:
        ranking = rankings[q["qid"]]
        grades = {str(d): int(g) for d, g in q["graded_relevance"].items()}
        relevant = {str(d) for d in q["relevant_ids"]}
        per_query[q["qid"]] = {
            "ndcg": ndcg(ranking, grades),
            "recall": recall(ranking, relevant),
            "ap": average_precision(ranking, relevant),
            # The variant that also removes the (unretrievable) query paper from the judgments.
            "ndcg_ex": ndcg(ranking, {d: g for d, g in grades.items() if d not in set(q["exclude_ids"])}),
        }
    out: dict[str, Any] = {m: statistics.mean(v[m] for v in per_query.values()) for m in ("ndcg", "recall", "ap", "ndcg_ex")}
    out["facets"] = {
        f: statistics.mean(per_query[q["qid"]]["ndcg"] for q in queries if q["facet"] == f) for f in FACETS
    }
    out["per_query"] = per_query
    return out


def drop_excluded(ids: Sequence[str], exclude: Sequence[str]) -> list[str]:
    gone = set(exclude)
    return [d for d in ids if d not in gone]


# --- the engine's own modes ------------------------------------------------------------------------------
def run_mode(store: Path, mode: str, queries: list[dict[str, Any]], top_k: int, candidates: int,
             passes: int = 3) -> dict[str, Any]:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    engine = Engine(Settings(storage=store, retrieval=mode, top_k=top_k, chunk_candidates=candidates))
    retriever = engine.retriever  # builds BM25 over the collection (not timed)
    retriever.retrieve_papers("warm-up query about neural networks", top_k=top_k)  # loads the model
    rankings: dict[str, list[str]] = {}
    latencies: dict[str, list[float]] = {q["qid"]: [] for q in queries}
    for _ in range(passes):  # the machine is shared: each query's latency is its best of `passes` calls
        for q in queries:
            start = time.perf_counter()
            hits = retriever.retrieve_papers(q["query"], top_k=top_k + len(q["exclude_ids"]))
            latencies[q["qid"]].append((time.perf_counter() - start) * 1000)
            rankings[q["qid"]] = drop_excluded([h.paper.doc_id for h in hits], q["exclude_ids"])[:top_k]
    result = score_run(rankings, queries)
    result["p50_ms"] = statistics.median(min(v) for v in latencies.values())
    result["p50_all_ms"] = statistics.median(x for v in latencies.values() for x in v)
    result["rankings"] = rankings
    return result


# --- ideas for long queries (no change to rag_bot) --------------------------------------------------------
class Components:
    """Exact full-corpus scores from the stored vectors and the retriever's BM25, to try fusions fast.

    dense(text) -> per-paper cosine of the best chunk and of the whole-abstract vector;
    bm25(text)  -> per-paper BM25 score (the retriever's tokenizer, stemmer and index).
    """

    def __init__(self, engine: Any) -> None:
        self._cache: dict[tuple[Any, ...], Any] = {}
        self.engine = engine
        self.retriever = engine.retriever
        index = engine.index
        self.ids: list[str] = list(self.retriever._ids)
        self.pos = {d: i for i, d in enumerate(self.ids)}
        got = index.papers.get(ids=self.ids, include=["embeddings"])
        order = {d: i for i, d in enumerate(got["ids"])}
        self.paper_vecs = np.asarray([got["embeddings"][order[d]] for d in self.ids], dtype=np.float32)
        chunk_vecs, chunk_doc = [], []
        total = index.chunks.count()
        for offset in range(0, total, 2000):
            batch = index.chunks.get(include=["embeddings", "metadatas"], limit=2000, offset=offset)
            for vec, meta in zip(batch["embeddings"], batch["metadatas"], strict=True):
                chunk_vecs.append(vec)
                chunk_doc.append(self.pos[meta["doc_id"]])
        self.chunk_vecs = np.asarray(chunk_vecs, dtype=np.float32)
        self.chunk_doc = np.asarray(chunk_doc)

    def embed(self, text: str) -> np.ndarray:
        key = ("emb", text)
        if key not in self._cache:
            self._cache[key] = np.asarray(self.engine.index.embedder.get_query_embedding(text), dtype=np.float32)
        return self._cache[key]

    def dense(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(best-chunk cosine, sum of chunk cosines, abstract cosine) per paper."""
        key = ("dense", text)
        if key not in self._cache:
            q = self.embed(text)
            chunk = self.chunk_vecs @ q
            best = np.full(len(self.ids), -1.0, dtype=np.float32)
            np.maximum.at(best, self.chunk_doc, chunk)
            total = np.zeros(len(self.ids), dtype=np.float32)
            np.add.at(total, self.chunk_doc, chunk)
            self._cache[key] = (best, total, self.paper_vecs @ q, chunk)
        return self._cache[key][:3]

    def dense_top(self, text: str, depth: int) -> np.ndarray:
        """What the engine's dense retriever sees: papers with a chunk in the top `depth` chunks or an
        abstract vector in the top `depth`, scored by the best of those; the rest -inf."""
        key = ("dense_top", text, depth)
        if key not in self._cache:
            self.dense(text)
            _, _, paper, chunk = self._cache[("dense", text)]
            out = np.full(len(self.ids), -np.inf, dtype=np.float32)
            top_chunks = np.argsort(-chunk, kind="stable")[:depth]
            np.maximum.at(out, self.chunk_doc[top_chunks], chunk[top_chunks])
            top_papers = np.argsort(-paper, kind="stable")[:depth]
            out[top_papers] = np.maximum(out[top_papers], paper[top_papers])
            self._cache[key] = out
        return self._cache[key]

    def bm25(self, text: str) -> np.ndarray:
        key = ("bm25", text)
        if key not in self._cache:
            scores = np.full(len(self.ids), -np.inf, dtype=np.float32)
            for doc_id, s in self.retriever._bm25_scores(text, len(self.ids)).items():
                scores[self.pos[doc_id]] = s
            self._cache[key] = scores
        return self._cache[key]


def rrf(rankings: list[tuple[np.ndarray, float]], n: int, k: int = 60, depth: int | None = 200) -> np.ndarray:
    """Weighted reciprocal-rank fusion of score vectors (each truncated to its top `depth`)."""
    fused = np.zeros(n, dtype=np.float64)
    for scores, weight in rankings:
        if weight <= 0:
            continue
        order = np.argsort(-scores, kind="stable")
        order = order[np.isfinite(scores[order])]  # papers a retriever did not return get no rank
        if depth:
            order = order[:depth]
        fused[order] += weight / (k + np.arange(len(order)) + 1)
    return fused


def minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def zscore(x: np.ndarray) -> np.ndarray:
    sd = float(x.std())
    return (x - float(x.mean())) / sd if sd > 0 else np.zeros_like(x)


def sentences(text: str) -> list[str]:
    from rag_bot.text import split_sentences

    parts = [s for s in split_sentences(text) if len(s.split()) >= 4]
    return parts or [text]


def run_ideas(store: Path, queries: list[dict[str, Any]], top_k: int, candidates: int) -> list[tuple[str, dict[str, Any]]]:
    from rag_bot.engine import Engine
    from rag_bot.retrieve import topic_query
    from rag_bot.settings import Settings

    engine = Engine(Settings(storage=store, retrieval="hybrid", top_k=top_k, chunk_candidates=candidates))
    comp = Components(engine)
    n = len(comp.ids)
    names = engine.retriever.names

    def dense_of(text: str, agg: str) -> np.ndarray:
        best, total, paper = comp.dense(text)
        if agg == "max":  # what the engine does: best of (best chunk, whole abstract)
            return np.maximum(best, paper)
        if agg == "chunks":
            return best
        if agg == "paper":
            return paper
        if agg == "sum":  # all chunks and the abstract vector add up
            return total + paper
        if agg == "mean":  # best chunk and abstract averaged
            return (best + paper) / 2
        raise ValueError(agg)

    def hybrid(text: str, w: float = 0.6, agg: str = "max", k: int = 60, depth: int | None = candidates,
               fusion: str = "rrf", strip: bool = True, named: bool = True) -> np.ndarray:
        topic = topic_query(text) if strip else text
        d, b = dense_of(topic, agg), comp.bm25(topic)
        if fusion == "rrf" and agg == "max" and depth:
            d = comp.dense_top(topic, depth)  # the engine's candidate set (top chunks + top abstracts)
        if fusion != "rrf":
            b = np.where(np.isfinite(b), b, 0.0)
        if fusion == "rrf":
            fused = rrf([(d, w), (b, 1 - w)], n, k=k, depth=depth)
        elif fusion == "minmax":
            fused = w * minmax(d) + (1 - w) * minmax(b)
        elif fusion == "z":
            fused = w * zscore(d) + (1 - w) * zscore(b)
        else:
            raise ValueError(fusion)
        if named:
            for position, doc_id in enumerate(names.find(text)):
                fused[comp.pos[doc_id]] += 1.0 - position * 0.01
        return fused

    def run(score: Callable[[dict[str, Any]], np.ndarray]) -> dict[str, Any]:
        rankings = {}
        for q in queries:
            s = score(q)
            order = np.argsort(-s, kind="stable")[: top_k + len(q["exclude_ids"])]
            rankings[q["qid"]] = drop_excluded([comp.ids[i] for i in order], q["exclude_ids"])[:top_k]
        return score_run(rankings, queries)

    def sentence_dense(q: dict[str, Any], agg: str = "max", with_full: float = 0.0) -> np.ndarray:
        parts = sentences(q["query"])
        d = sum(dense_of(s, agg) for s in parts)
        if with_full:
            d = d + with_full * len(parts) * dense_of(q["query"], agg)
        return d

    def three_way(q: dict[str, Any], wc: float, wp: float) -> np.ndarray:
        topic = topic_query(q["query"])
        best, _, paper = comp.dense(topic)
        return rrf([(best, wc), (paper, wp), (comp.bm25(topic), 1 - wc - wp)], n, depth=candidates)

    def per_sentence(q: dict[str, Any], combine: str, with_full: float = 0.0, **kw: Any) -> np.ndarray:
        parts = sentences(q["query"])
        if combine == "rrf":  # each sentence's hybrid ranking, fused by RRF (+ the whole query's, weighted)
            runs = [(hybrid(s, **kw), 1.0) for s in parts]
            if with_full:
                runs.append((hybrid(q["query"], **kw), with_full * len(parts)))
            return rrf(runs, n, depth=None)
        if combine == "dense-sum":  # dense: sum of per-sentence cosines; BM25 on the whole query
            w = kw.get("w", 0.6)
            d = sentence_dense(q, kw.get("agg", "max"), with_full)
            b = comp.bm25(topic_query(q["query"]))
            if kw.get("fusion") == "minmax":
                return w * minmax(d) + (1 - w) * minmax(np.where(np.isfinite(b), b, 0.0))
            return rrf([(d, w), (b, 1 - w)], n, depth=candidates)
        if combine == "dense-max":  # dense: best sentence cosine per paper; BM25 on the whole query
            w = kw.get("w", 0.6)
            d = np.max([dense_of(s, "max") for s in parts], axis=0)
            return rrf([(d, w), (comp.bm25(topic_query(q["query"])), 1 - w)], n, depth=candidates)
        raise ValueError(combine)

    ideas: list[tuple[str, Callable[[dict[str, Any]], np.ndarray]]] = [
        ("replica of the engine's hybrid (RRF k=60, w=0.6, max, top 200 each)", lambda q: hybrid(q["query"])),
        ("dense only, exact (max of best chunk, abstract)", lambda q: dense_of(q["query"], "max")),
        ("dense only, abstract vector", lambda q: dense_of(q["query"], "paper")),
        ("dense only, best chunk", lambda q: dense_of(q["query"], "chunks")),
        ("dense only, sum of chunks + abstract", lambda q: dense_of(q["query"], "sum")),
        ("dense only, mean(best chunk, abstract)", lambda q: dense_of(q["query"], "mean")),
    ]
    for w in (0.4, 0.5, 0.7, 0.8):
        ideas.append((f"hybrid RRF, dense weight {w}", lambda q, w=w: hybrid(q["query"], w=w)))
    for k in (10, 30, 100):
        ideas.append((f"hybrid RRF k={k}", lambda q, k=k: hybrid(q["query"], k=k)))
    ideas.append(("hybrid RRF, full-depth rankings (no top-200 cut)", lambda q: hybrid(q["query"], depth=None)))
    for agg in ("paper", "chunks", "sum", "mean"):
        ideas.append((f"hybrid RRF, dense = {agg}", lambda q, agg=agg: hybrid(q["query"], agg=agg)))
    ideas.append(("hybrid, no topic_query stripping", lambda q: hybrid(q["query"], strip=False)))
    ideas.append(("hybrid, no name boost", lambda q: hybrid(q["query"], named=False)))
    for w in (0.5, 0.6, 0.7, 0.8):
        ideas.append((f"hybrid min-max score fusion, dense weight {w}", lambda q, w=w: hybrid(q["query"], w=w, fusion="minmax")))
    for w in (0.5, 0.6, 0.7):
        ideas.append((f"hybrid z-score fusion, dense weight {w}", lambda q, w=w: hybrid(q["query"], w=w, fusion="z")))
    ideas += [
        ("sentences: RRF of per-sentence hybrid rankings", lambda q: per_sentence(q, "rrf")),
        ("sentences: RRF of per-sentence hybrid + whole query (weight 1x)", lambda q: per_sentence(q, "rrf", 1.0)),
        ("sentences: dense = sum of sentence cosines, BM25 whole query", lambda q: per_sentence(q, "dense-sum")),
        ("sentences: dense = sum of sentence cosines + whole query, BM25 whole", lambda q: per_sentence(q, "dense-sum", 1.0)),
        ("sentences: dense = max over sentences, BM25 whole query", lambda q: per_sentence(q, "dense-max")),
        ("sentences: dense-sum, dense = sum aggregation", lambda q: per_sentence(q, "dense-sum", 1.0, agg="sum")),
    ]
    for w in (0.7, 0.8):
        ideas.append((f"sentences: dense-sum + whole, weight {w}", lambda q, w=w: per_sentence(q, "dense-sum", 1.0, w=w)))
    ideas += [
        ("dense only, sentences: sum of sentence cosines + whole query", lambda q: sentence_dense(q, "max", 1.0)),
        ("dense only, sentences: sum of sentence cosines", lambda q: sentence_dense(q, "max")),
        ("sentences: dense-sum + whole, min-max fusion w 0.7", lambda q: per_sentence(q, "dense-sum", 1.0, w=0.7, fusion="minmax")),
        ("three RRF rankings: best chunk 0.3, abstract 0.3, BM25 0.4", lambda q: three_way(q, 0.3, 0.3)),
        ("three RRF rankings: best chunk 0.4, abstract 0.3, BM25 0.3", lambda q: three_way(q, 0.4, 0.3)),
        # Combinations with the name boost off (it misfires on long queries, see the notes).
        ("no name boost + dense = mean", lambda q: hybrid(q["query"], agg="mean", named=False)),
        ("no name boost + full-depth RRF", lambda q: hybrid(q["query"], depth=None, named=False)),
        ("no name boost + z-score fusion w 0.7", lambda q: hybrid(q["query"], w=0.7, fusion="z", named=False)),
        ("no name boost + z-score fusion w 0.7 + dense = mean",
         lambda q: hybrid(q["query"], w=0.7, fusion="z", agg="mean", named=False)),
        ("no name boost + min-max fusion w 0.7", lambda q: hybrid(q["query"], w=0.7, fusion="minmax", named=False)),
        ("no name boost + min-max fusion w 0.8", lambda q: hybrid(q["query"], w=0.8, fusion="minmax", named=False)),
        ("no name boost + dense weight 0.5", lambda q: hybrid(q["query"], w=0.5, named=False)),
        ("no name boost + dense weight 0.7", lambda q: hybrid(q["query"], w=0.7, named=False)),
    ]
    results = []
    for label, fn in ideas:
        start = time.perf_counter()
        r = run(fn)
        base = results[0][1] if results else r
        r["wins"] = sum(r["per_query"][k]["ndcg"] > base["per_query"][k]["ndcg"] + 1e-9 for k in r["per_query"])
        r["losses"] = sum(r["per_query"][k]["ndcg"] < base["per_query"][k]["ndcg"] - 1e-9 for k in r["per_query"])
        results.append((label, r))
        print(f"  {r['ndcg']:.4f}  +{r['wins']}/-{r['losses']}  {label} ({time.perf_counter() - start:.0f} s)",
              flush=True)
    named = [q["qid"] for q in queries if names.find(q["query"])]
    print(f"  name boost fires on {len(named)} of {len(queries)} queries", flush=True)
    NAMED_QUERIES[:] = named
    return results


NAMED_QUERIES: list[str] = []


# --- report ----------------------------------------------------------------------------------------------
def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_report(out: Path, modes: dict[str, dict[str, Any]], ideas: list[tuple[str, dict[str, Any]]],
                 info: dict[str, Any]) -> None:
    lines = [
        "# CSFCube retrieval benchmark",
        "",
        f"Commit `{info['commit']}`, {info['date']}, `python bench/csfcube.py` "
        f"(store `{info['store']}`, top_k={info['top_k']}, chunk_candidates={info['candidates']}).",
        "",
        "CSFCube (Mysore et al., NeurIPS 2021 Datasets & Benchmarks; CC BY-NC 4.0, read from "
        "`../shared/data/csfcube`, never copied here): 50 faceted query-by-example queries "
        "(16 background, 17 method, 17 result) over 4,174 CS/ML/NLP abstracts. Each query is the sentences of a "
        "query abstract that carry one facet, so queries are long: "
        f"{info['query_words']:.0f} words on average (max {info['query_words_max']}), "
        f"{info['query_sentences']:.1f} sentences.",
        "",
        "Each query ranks the whole corpus through `Engine(...).retriever.retrieve_papers`; the query paper "
        "(`exclude_ids`) is dropped from the ranking. nDCG@20 uses the graded labels (gain = grade 0-3, log2 "
        "discount, ideal from all graded judgments of the query); R@20 and MAP use `relevant_ids` (grade >= 2); "
        f"AP is computed over the top {info['top_k']} returned. p50 is the median over queries of the best of "
        f"{info['passes']} timed `retrieve_papers` calls (query embedding included) on this shared 2-core machine.",
        "",
        "| mode | nDCG@20 | R@20 | MAP | p50 ms |",
        "|---|---|---|---|---|",
    ]
    for mode, r in modes.items():
        lines.append(f"| {mode} | {r['ndcg']:.3f} | {r['recall']:.3f} | {r['ap']:.3f} | {r['p50_ms']:.0f} |")
    lines += ["", "nDCG@20 per facet:", "", "| mode | " + " | ".join(FACETS) + " |", "|---|---|---|---|"]
    for mode, r in modes.items():
        lines.append(f"| {mode} | " + " | ".join(f"{r['facets'][f]:.3f}" for f in FACETS) + " |")
    lines += ["", "## Ingest", "", info["ingest"], ""]
    if ideas:
        lines += [
            "## Ideas for long queries (measured without changing rag_bot)",
            "",
            "These rankings are computed in the script from the stored chunk and abstract vectors (exact cosine "
            "over the whole corpus instead of Chroma's HNSW top 200) and the retriever's own BM25 index, with "
            "the engine's fusion re-implemented (RRF k=60, dense weight 0.6, each ranking cut at its top "
            f"{info['candidates']}, `topic_query` and the name boost included) unless the row says otherwise. "
            "The first row checks that re-implementation against the engine's hybrid row above.",
            "",
            "better/worse: queries whose nDCG@20 rises/falls against the replica row (50 queries: differences "
            "of about 0.01 are within noise).",
            "",
            "| idea | nDCG@20 | R@20 | MAP | background | method | result | better/worse |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for label, r in ideas:
            lines.append(
                f"| {label} | {r['ndcg']:.3f} | {r['recall']:.3f} | {r['ap']:.3f} | "
                + " | ".join(f"{r['facets'][f]:.3f}" for f in FACETS) + f" | +{r['wins']}/-{r['losses']} |"
            )
        lines.append("")
    lines += ["## Notes", ""] + [f"- {n}" for n in info["notes"]] + [""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", type=Path, default=DEFAULT_STORE, help="persistent Chroma store (reused)")
    ap.add_argument("--modes", default="dense,bm25,hybrid", help="comma-separated retrieval modes")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown report to write")
    ap.add_argument("--top-k", type=int, default=200, help="papers ranked per query (AP depth)")
    ap.add_argument("--candidates", type=int, default=200, help="chunk_candidates (per-retriever depth)")
    ap.add_argument("--passes", type=int, default=3, help="timed passes over the queries (p50 of per-query best)")
    ap.add_argument("--no-ideas", dest="ideas", action="store_false", help="skip the long-query experiments")
    ap.add_argument("--ingest-only", action="store_true", help="only build/refresh the store")
    ap.add_argument("--note", action="append", default=[], help="extra note for the report")
    ap.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)  # smoke tests: first N docs only
    args = ap.parse_args(argv)

    if not DATA.is_dir():
        print("skipped: ../shared/data/csfcube not found")
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ("dense", "bm25", "hybrid")]
    if bad:
        ap.error(f"unknown mode(s): {', '.join(bad)}")

    docs = load_corpus(DATA)
    if args.limit:
        docs = docs[: args.limit]
    queries = load_queries(DATA)
    papers = to_papers(docs)
    print(f"csfcube: {len(papers)} docs, {len(queries)} queries; store {args.store}", flush=True)
    report, secs = ingest(args.store, papers)
    ingest_line = f"This run: {report} in {secs:.0f} s."
    log = ingest_log(args.store)
    if log:
        papers_done = sum(e["papers"] for e in log)
        secs_done = sum(e["seconds"] for e in log)
        ingest_line += (
            f" Embedding runs into this store: {len(log)} ("
            + "; ".join(f"{e['date']}: {e['papers']} papers, {e['chunks']} chunks, {e['seconds']} s" for e in log)
            + f"), in all {papers_done} papers in {secs_done} s = {secs_done / 60:.1f} min "
            f"({papers_done / max(secs_done, 1):.1f} papers/s)."
        )
    print(f"ingest: {ingest_line}", flush=True)
    if args.ingest_only:
        return 0

    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        results[mode] = run_mode(args.store, mode, queries, args.top_k, args.candidates, args.passes)
        r = results[mode]
        print(f"{mode:7s} nDCG@20 {r['ndcg']:.4f}  R@20 {r['recall']:.4f}  MAP {r['ap']:.4f}  "
              f"p50 {r['p50_ms']:.0f} ms  facets " + " ".join(f"{f} {r['facets'][f]:.3f}" for f in FACETS),
              flush=True)
    ideas = run_ideas(args.store, queries, args.top_k, args.candidates) if args.ideas else []

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    stats = Engine(Settings(storage=args.store)).stats()
    words = [len(q["query"].split()) for q in queries]
    notes = [
        f"Store: {stats['papers']} papers, {stats['chunks']} chunks ({stats['embedding']}).",
        "Queries are long (several sentences of an abstract), unlike chat questions; `topic_query` and the "
        "alias name boost of `retrieve_papers` still apply to them.",
        "Two queries (8781666_background, 8781666_result) grade their own query paper 3; it is excluded from "
        "the ranking but, as asked, stays in the ideal DCG. Removing it from the judgments too gives hybrid "
        + (f"nDCG@20 {results['hybrid']['ndcg_ex']:.3f}." if "hybrid" in results else "a slightly higher nDCG@20."),
        "Reference figures measured elsewhere with int8 MiniLM + bm25s: BM25 0.39, dense 0.46, plain RRF 0.48 "
        "nDCG@20; target 0.52.",
        "p50 over every timed call (not only each query's best): "
        + ", ".join(f"{m} {r['p50_all_ms']:.0f} ms" for m, r in results.items())
        + "; other load on this shared machine moves these figures by tens of percent between runs.",
        "`bm25` mode still embeds the query (`retrieve_papers` always computes the dense side for similarities), "
        "so its latency includes the embedding.",
        *args.note,
    ]
    if ideas:
        base = ideas[0][1]
        label, best = max(ideas[1:], key=lambda item: item[1]["ndcg"])
        notes.append(
            f"Best idea: {label}: nDCG@20 {best['ndcg']:.3f} (R@20 {best['recall']:.3f}, MAP {best['ap']:.3f}) "
            f"against {base['ndcg']:.3f} for the engine's fusion, better on {best['wins']} queries and worse on "
            f"{best['losses']}. The target 0.52 is not reached."
        )
        named = dict(ideas).get("hybrid, no name boost")
        if named is not None:
            notes.append(
                f"The alias name boost (+1.0 to papers whose introduced name appears in the question) fires on "
                f"{len(NAMED_QUERIES)} of {len(queries)} queries ({', '.join(NAMED_QUERIES)}), through generic "
                f"aliases such as 'MST', 'LM', 'Sentiment Analysis', 'LRA'. Turning it off gives "
                f"{named['ndcg']:.3f} (+{named['wins']}/-{named['losses']} queries): it is meant for short chat "
                "questions that name a paper, and misfires on long abstract-like queries."
            )
        by = {label: r["ndcg"] for label, r in ideas}

        def g(label: str) -> str:
            return f"{by[label]:.3f}" if label in by else "n/a"

        notes.append(
            "Sentence splitting: fusing per-sentence rankings alone lowers nDCG@20 (RRF of per-sentence hybrid "
            f"{g('sentences: RRF of per-sentence hybrid rankings')}, dense from sentences only "
            f"{g('dense only, sentences: sum of sentence cosines')} vs {g('dense only, exact (max of best chunk, abstract)')}); "
            "each facet sentence alone is a weaker query than the whole facet. Adding the sentence cosines to the "
            f"whole-query cosine is neutral under RRF ({g('sentences: dense = sum of sentence cosines + whole query, BM25 whole')} "
            f"vs {by[ideas[0][0]]:.3f}) and slightly up under min-max fusion "
            f"({g('sentences: dense-sum + whole, min-max fusion w 0.7')} vs {g('hybrid min-max score fusion, dense weight 0.7')}), "
            "within noise and at the cost of one embedding per sentence."
        )
        notes.append(
            "Chunk aggregation: max of best chunk and abstract (the engine), best chunk alone, abstract alone and "
            f"their mean are within 0.01 of each other in hybrid ({g('hybrid RRF, dense = chunks')}, "
            f"{g('hybrid RRF, dense = paper')}, {g('hybrid RRF, dense = mean')}); summing chunk scores per paper "
            f"rewards papers with more chunks and collapses ({g('hybrid RRF, dense = sum')})."
        )
    info = {
        "commit": git_commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "store": args.store,
        "top_k": args.top_k,
        "candidates": args.candidates,
        "passes": args.passes,
        "query_words": statistics.mean(words),
        "query_words_max": max(words),
        "query_sentences": statistics.mean(len(sentences(q["query"])) for q in queries),
        "ingest": ingest_line,
        "notes": notes,
    }
    write_report(args.out, results, ideas, info)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
