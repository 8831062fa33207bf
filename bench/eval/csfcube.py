"""CSFCube: a public retrieval benchmark for rag-bot (faceted query-by-example over CS paper abstracts).

    python -m bench.eval.csfcube [--store DIR] [--modes dense,bm25,hybrid] [--out docs/csfcube.md]

Loads ../shared/data/csfcube in place (never copied; the run is skipped when it is absent), ingests the
abstracts through rag-bot's own index (incremental, so the slow embedding happens once per store), ranks the
whole corpus for each query with `Engine.retriever.retrieve_papers` in each retrieval mode, scores the
rankings with rag_bot.evaluation.metrics and writes docs/csfcube.md, where every figure is computed by this run.
Metrics, as in ../shared/data/SOURCES.md ("csfcube"): nDCG@20 on the graded labels, Recall@20 and MAP on
`relevant_ids`; the query paper itself (`exclude_ids`) is dropped from the ranking.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_bot.evaluation import metrics

REPO = Path(__file__).resolve().parents[2]

DATA = REPO.parent / "shared" / "data" / "csfcube"
DEFAULT_STORE = REPO / "storage" / "bench-csfcube"
DEFAULT_OUT = REPO / "docs" / "csfcube.md"
CUTOFF = 20
MODES = ("dense", "bm25", "hybrid")
INGEST_LOG = "bench_csfcube_ingest.json"
REMOVED = r"^def run_ideas\("  # the finished long-query experiment, now only in git history
OLD_PATH = "bench/csfcube.py"  # where this script was when the experiment was removed (issue 38 moved it)


# --- data ------------------------------------------------------------------------------------------------
def load_corpus(data: Path) -> list[dict[str, Any]]:
    """The corpus records (id, title, text, ...)."""
    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_queries(data: Path) -> list[dict[str, Any]]:
    """The query records (qid, query, facet, relevant_ids, graded_relevance, exclude_ids, ...)."""
    with open(data / "queries.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def to_papers(docs: list[dict[str, Any]]) -> list[Any]:
    """Corpus records as rag-bot papers."""
    from rag_bot.reading.records import make_paper

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


# --- scoring ---------------------------------------------------------------------------------------------
def judgments(q: dict[str, Any]) -> tuple[dict[str, int], set[str]]:
    """A query's graded labels and its relevant ids."""
    return {str(d): int(g) for d, g in q["graded_relevance"].items()}, {str(d) for d in q["relevant_ids"]}


def score_query(ranking: Sequence[str], q: dict[str, Any]) -> dict[str, float]:
    """nDCG@20, R@20 and AP of one ranking (query paper already dropped)."""
    grades, relevant = judgments(q)
    excluded = {str(d) for d in q["exclude_ids"]}
    return {
        "ndcg": metrics.ndcg_at_k(ranking, grades, CUTOFF),
        "recall": metrics.recall_at_k(ranking, relevant, CUTOFF),
        "ap": metrics.average_precision(ranking, relevant),
        # The variant that also removes the (unretrievable) query paper from the judgments.
        "ndcg_ex": metrics.ndcg_at_k(ranking, {d: g for d, g in grades.items() if d not in excluded}, CUTOFF),
    }


def average(values: Sequence[float]) -> float:
    """rag_bot.evaluation.metrics.mean of a non-empty list."""
    value = metrics.mean(values)
    if value is None:
        raise ValueError("no values to average")
    return value


def score_run(rankings: dict[str, list[str]], queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean metrics of a run (qid -> ranked doc ids), overall and per facet, with the per-query figures."""
    per_query = {q["qid"]: score_query(rankings[q["qid"]], q) for q in queries}
    out: dict[str, Any] = {m: average([v[m] for v in per_query.values()]) for m in ("ndcg", "recall", "ap", "ndcg_ex")}
    out["facets"] = {
        f: average([per_query[q["qid"]]["ndcg"] for q in queries if q["facet"] == f]) for f in facets(queries)
    }
    out["per_query"] = per_query
    return out


def facets(queries: list[dict[str, Any]]) -> list[str]:
    """The facets of a query set, sorted."""
    return sorted({q["facet"] for q in queries})


def drop_excluded(ids: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """The ranking without the query paper."""
    gone = {str(d) for d in exclude}
    return [d for d in ids if d not in gone]


# --- the engine's retrieval modes ------------------------------------------------------------------------
def run_mode(store: Path, mode: str, queries: list[dict[str, Any]], top_k: int, candidates: int,
             passes: int) -> dict[str, Any]:
    """Every query through the engine's retriever in one mode; scores and latencies."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    engine = Engine(Settings(storage=store, retrieval=mode, top_k=top_k, chunk_candidates=candidates))
    retriever = engine.retriever  # builds BM25 over the collection (not timed)
    retriever.retrieve_papers("warm-up query about neural networks", top_k=top_k)  # loads the model
    rankings: dict[str, list[str]] = {}
    latencies: dict[str, list[float]] = {q["qid"]: [] for q in queries}
    # Pass 1 embeds each query; later passes find its vector in the embedder's query cache, so they time the
    # rest of retrieval (each query's best of them: the machine is shared).
    for _ in range(passes):
        for q in queries:
            start = time.perf_counter()
            hits = retriever.retrieve_papers(q["query"], top_k=top_k + len(q["exclude_ids"]))
            latencies[q["qid"]].append((time.perf_counter() - start) * 1000)
            rankings[q["qid"]] = drop_excluded([h.paper.doc_id for h in hits], q["exclude_ids"])[:top_k]
    result = score_run(rankings, queries)
    result["p50_ms"] = statistics.median(v[0] for v in latencies.values())
    result["p50_cached_ms"] = statistics.median(min(v[1:]) for v in latencies.values()) if passes > 1 else None
    return result


# --- report ----------------------------------------------------------------------------------------------
def git(*args: str) -> str:
    """Output of a git command in the repository ('' when git fails)."""
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit_label() -> str:
    """HEAD's short hash, flagged when the code that ran has uncommitted changes."""
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "rag_bot", "bench/eval/csfcube.py")
    return f"{head}` + uncommitted changes to `rag_bot/` or `bench/eval/csfcube.py" if dirty else head


def removed_experiment() -> tuple[str, str]:
    """(commit that removed the long-query experiment or '', last commit whose bench/csfcube.py had it)."""
    path = OLD_PATH
    changed = git("log", "-1", "--format=%h", "-G", REMOVED, "--", path)
    if not changed:
        return "", ""
    if re.search(REMOVED, git("show", f"{changed}:{path}"), re.MULTILINE):  # removal not committed yet
        return "", git("log", "-1", "--format=%h", "--", path)
    return changed, git("log", "-1", "--format=%h", f"{changed}^", "--", path)


def compare(a: str, b: str, modes: dict[str, dict[str, Any]]) -> str:
    """One sentence comparing two modes' nDCG@20, overall and query by query."""
    ra, rb = modes[a], modes[b]
    diffs = [ra["per_query"][q]["ndcg"] - rb["per_query"][q]["ndcg"] for q in ra["per_query"]]
    better = sum(d > 1e-9 for d in diffs)
    worse = sum(d < -1e-9 for d in diffs)
    return (
        f"{a} against {b}: nDCG@20 {ra['ndcg']:.3f} vs {rb['ndcg']:.3f} ({ra['ndcg'] - rb['ndcg']:+.3f}), "
        f"R@20 {ra['recall']:.3f} vs {rb['recall']:.3f}, MAP {ra['ap']:.3f} vs {rb['ap']:.3f}; "
        f"nDCG@20 higher on {better} of {len(diffs)} queries, lower on {worse}, equal on {len(diffs) - better - worse}."
    )


def data_summary(docs: list[dict[str, Any]], queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and shapes of the data, for the report's prose."""
    from rag_bot.text import split_sentences

    grades = Counter(int(g) for q in queries for g in q["graded_relevance"].values())
    relevant_grades = [int(q["graded_relevance"][str(d)]) for q in queries for d in q["relevant_ids"]
                       if str(d) in q["graded_relevance"]]
    words = [len(q["query"].split()) for q in queries]
    self_graded = {q["qid"]: int(q["graded_relevance"][str(d)]) for q in queries for d in q["exclude_ids"]
                   if str(d) in q["graded_relevance"]}
    return {
        "docs": len(docs),
        "queries": len(queries),
        "facet_counts": Counter(q["facet"] for q in queries),
        "judged": sum(grades.values()),
        "grade_min": min(grades),
        "grade_max": max(grades),
        "relevant_min_grade": min(relevant_grades) if relevant_grades else None,
        "relevant_pairs": sum(len(q["relevant_ids"]) for q in queries),
        "query_words": statistics.mean(words),
        "query_words_max": max(words),
        "query_sentences": statistics.mean(len(split_sentences(q["query"])) for q in queries),
        "self_graded": self_graded,
    }


def write_report(out: Path, modes: dict[str, dict[str, Any]], data: dict[str, Any], info: dict[str, Any]) -> None:
    """docs/csfcube.md from this run's figures."""
    facet_names = sorted(data["facet_counts"])
    facet_text = ", ".join(f"{data['facet_counts'][f]} {f}" for f in facet_names)
    relevant = (f"grade >= {data['relevant_min_grade']}" if data["relevant_min_grade"] is not None
                else "no relevant ids")
    lines = [
        "# CSFCube retrieval benchmark",
        "",
        f"Commit `{info['commit']}`, {info['date']}, `python -m bench.eval.csfcube` "
        f"(store `{info['store']}`, top_k={info['top_k']}, chunk_candidates={info['candidates']}). "
        "Every figure on this page is computed by that run.",
        "",
        "CSFCube (Mysore et al., NeurIPS 2021 Datasets & Benchmarks; CC BY-NC 4.0, read from "
        f"`../shared/data/csfcube`, never copied here): {data['queries']} faceted query-by-example queries "
        f"({facet_text}) over {data['docs']:,} CS/ML/NLP abstracts, {data['judged']:,} judged pairs. "
        "Each query is the sentences of a query abstract that carry one facet, so queries are long: "
        f"{data['query_words']:.0f} words on average (max {data['query_words_max']}), "
        f"{data['query_sentences']:.1f} sentences.",
        "",
        "Each query ranks the whole corpus through `Engine(Settings(retrieval=mode)).retriever.retrieve_papers`; "
        f"the query paper (`exclude_ids`) is dropped from the ranking. nDCG@{CUTOFF} uses the graded labels "
        f"(gain = grade {data['grade_min']}-{data['grade_max']}, log2 discount, ideal from all graded judgments "
        f"of the query); R@{CUTOFF} and MAP use `relevant_ids` ({relevant}, {data['relevant_pairs']} pairs); "
        f"AP is computed over the top {info['top_k']} returned. Metrics: `rag_bot/evaluation/metrics.py`. Latency on this "
        f"shared {info['cores']}-core machine: p50 is the median over queries of the first `retrieve_papers` "
        "call (query embedding included)"
        + (f"; p50 cached is the median of each query's best of {info['passes'] - 1} repeated calls, which find "
           "the query vector in the embedder's cache." if info["passes"] > 1 else "."),
        "",
        f"| mode | nDCG@{CUTOFF} | R@{CUTOFF} | MAP | p50 ms | p50 cached ms |",
        "|---|---|---|---|---|---|",
    ]
    for mode, r in modes.items():
        cached = "n/a" if r["p50_cached_ms"] is None else f"{r['p50_cached_ms']:.0f}"
        lines.append(f"| {mode} | {r['ndcg']:.3f} | {r['recall']:.3f} | {r['ap']:.3f} | {r['p50_ms']:.0f} | {cached} |")
    lines += ["", f"nDCG@{CUTOFF} per facet:", "", "| mode | " + " | ".join(facet_names) + " |",
              "|---|" + "---|" * len(facet_names)]
    for mode, r in modes.items():
        lines.append(f"| {mode} | " + " | ".join(f"{r['facets'][f]:.3f}" for f in facet_names) + " |")

    notes = []
    if modes:
        best = max(modes, key=lambda m: modes[m]["ndcg"])
        notes += [compare(best, other, modes) for other in modes if other != best]
    if data["self_graded"] and modes:
        graded = ", ".join(f"{qid} (grade {g})" for qid, g in sorted(data["self_graded"].items()))
        notes.append(
            f"{len(data['self_graded'])} queries grade their own query paper: {graded}. That paper is excluded from the "
            "ranking but stays in the ideal DCG; removing the query paper from the judgments too gives nDCG@20 "
            + ", ".join(f"{m} {r['ndcg_ex']:.3f}" for m, r in modes.items()) + "."
        )
    notes += [
        f"Store: {info['stats']['papers']} papers, {info['stats']['chunks']} chunks ({info['stats']['embedding']}).",
        "Queries are long (several sentences of an abstract), unlike chat questions; `retrieve_papers` applies its "
        "long-question handling to them. `bm25` mode still embeds the query (similarities), so its latency "
        "includes the embedding. Other load on this shared machine moves latencies between runs.",
        "Targets and the comparison with earlier configurations: [eval.md](eval.md).",
    ]
    removed, last = info["removed"]
    if last:
        where = f"removed in `{removed}`" if removed else "removed from this script"
        notes.append(
            f"The finished long-query experiment (fusion, chunk-aggregation and sentence-splitting variants) was "
            f"{where}; its findings are in [eval.md](eval.md) (\"Other ideas measured on CSFCube and not adopted\"), "
            f"its code and table in `git show {last}:{OLD_PATH}` and `git show {last}:docs/csfcube.md`."
        )
    notes += info["notes"]
    lines += ["", "## Ingest", "", info["ingest"], "", "## Notes", ""] + [f"- {n}" for n in notes] + [""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")


def ingest_text(report: Any, seconds: float, log: list[dict[str, Any]]) -> str:
    """This run's ingest and the store's embedding history, in words."""
    text = f"This run: {report} in {seconds:.0f} s."
    if log:
        papers_done = sum(e["papers"] for e in log)
        secs_done = sum(e["seconds"] for e in log)
        text += (
            f" Embedding runs into this store: {len(log)} ("
            + "; ".join(f"{e['date']}: {e['papers']} papers, {e['chunks']} chunks, {e['seconds']} s" for e in log)
            + f"), in all {papers_done} papers in {secs_done} s = {secs_done / 60:.1f} min "
            f"({papers_done / max(secs_done, 1):.1f} papers/s)."
        )
    return text


def main(argv: list[str] | None = None) -> int:
    """Ingest, run each mode, write the report."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--store", type=Path, default=DEFAULT_STORE, help="persistent Chroma store (reused)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated retrieval modes")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown report to write")
    ap.add_argument("--top-k", type=int, default=200, help="papers ranked per query (AP depth)")
    ap.add_argument("--candidates", type=int, default=200, help="chunk_candidates (per-retriever depth)")
    ap.add_argument("--passes", type=int, default=3, help="timed passes over the queries (the first embeds them)")
    ap.add_argument("--ingest-only", action="store_true", help="only build/refresh the store")
    ap.add_argument("--note", action="append", default=[], help="extra note for the report")
    ap.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)  # smoke tests: first N docs only
    args = ap.parse_args(argv)

    if not DATA.is_dir():
        print(f"skipped: CSFCube data not found at {DATA} (see ../shared/data/SOURCES.md); nothing written")
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s): {', '.join(bad)}")
    if args.passes < 1:
        ap.error("--passes must be at least 1")

    docs = load_corpus(DATA)
    if args.limit:
        docs = docs[: args.limit]
    queries = load_queries(DATA)
    papers = to_papers(docs)
    print(f"csfcube: {len(papers)} docs, {len(queries)} queries; store {args.store}", flush=True)
    report, seconds = ingest(args.store, papers)
    ingest_line = ingest_text(report, seconds, ingest_log(args.store))
    print(f"ingest: {ingest_line}", flush=True)
    if args.ingest_only:
        return 0

    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        results[mode] = r = run_mode(args.store, mode, queries, args.top_k, args.candidates, args.passes)
        print(f"{mode:7s} nDCG@20 {r['ndcg']:.4f}  R@20 {r['recall']:.4f}  MAP {r['ap']:.4f}  "
              f"p50 {r['p50_ms']:.0f} ms  facets " + " ".join(f"{f} {v:.3f}" for f, v in r["facets"].items()),
              flush=True)

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    info = {
        "commit": commit_label(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "store": args.store,
        "top_k": args.top_k,
        "candidates": args.candidates,
        "passes": args.passes,
        "cores": os.cpu_count(),
        "stats": Engine(Settings(storage=args.store)).stats(),
        "ingest": ingest_line,
        "removed": removed_experiment(),
        "notes": args.note,
    }
    write_report(args.out, results, data_summary(docs, queries), info)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
