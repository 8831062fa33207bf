"""rag-bot at size: ingest against the embedder's limit, start-up, retrieval and answer latency, memory, at 38,
3,000 and 22,000 papers, each figure with its baseline measured in the same run. Writes docs/benchmarks.md and
docs/benchmarks.png.

    python -m bench.perf.scale            # quick: the seeds and storage/bench-3000 (when built)
    python -m bench.perf.scale --full     # every size (storage/bench-22000 too), a larger ingest sample, the whole
                                     # 22,148-abstract file into a folder store and a `chroma run` server, and
                                     # that server against the folder store (bench/perf/full_ingest.py,
                                     # bench/perf/server_scale.py; about 1.5 hours more)
    python -m bench.perf.scale --profile  # also cProfile the offline answer at 3,000 papers

The benchmark stores are built by bench/collections.py (seeds + real abstracts of
../shared/data/ml_abstracts.jsonl.gz); a size whose store is missing is reported as such. Each size is measured
in a child process (`--one SIZE`), so its memory figure is its own. Per question, interleaved: rag-bot's
retrieval (hybrid; the question embedded each time), exact numpy search over the same vectors, BM25 alone, and
the whole offline answer.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import json
import os
import platform
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ML_ABSTRACTS = ROOT.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
OUT = ROOT / "docs" / "benchmarks.md"
PLOT = ROOT / "docs" / "benchmarks.png"
SIZES = (38, 3000, 22000)


# --- helpers -----------------------------------------------------------------------------------------------
def store_of(size: int, tmp: Path) -> Path | None:
    """The store of a size (the seeds: a fresh temporary store, ingested by the parent)."""
    if size == 38:
        return tmp / "seeds-store"
    store = ROOT / "storage" / f"bench-{size}"
    return store if (store / "chroma.sqlite3").exists() else None


def rss_mib() -> tuple[float, float]:
    """Current and peak resident memory of this process (MiB)."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def timed_run(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB) and stdout of a command."""
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{args} failed: {proc.stderr[-800:]}")
    peak = int(proc.stderr.strip().splitlines()[-1]) / 1024
    return seconds, peak, proc.stdout


def env_for(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(store), RAG_BOT_LOG_LEVEL="WARNING", RAG_BOT_LLM="offline")
    return env | server_env()


def server_env() -> dict[str, str]:
    """RAG_BOT_CHROMA_URL for the measured commands when a bench runs against a `chroma run` server
    (BENCH_CHROMA_URL, set by bench/perf/million.py --server)."""
    url = os.environ.get("BENCH_CHROMA_URL")
    return {"RAG_BOT_CHROMA_URL": url} if url else {}


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal"))
    import chromadb
    import onnxruntime

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": round(mem / 2**20, 1),
            "python": platform.python_version(), "onnxruntime": onnxruntime.__version__,
            "chromadb": chromadb.__version__, "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC"),
            "load_start": os.getloadavg()[0]}


# --- questions ---------------------------------------------------------------------------------------------
def questions_for(papers: dict[str, Any], n_extra: int = 100, seed: int = 11) -> list[str]:
    """The dev questions, then titles and phrases of random papers of the collection (half each)."""
    from rag_bot.evaluation.evaluate import DEFAULT_SET, load_questions

    out = [q.question for q in load_questions(DEFAULT_SET)]
    rng = random.Random(seed)
    ids = sorted(papers)
    picks = [papers[d] for d in rng.sample(ids, min(n_extra, len(ids)))]
    while len(picks) < n_extra:
        picks.append(papers[rng.choice(ids)])
    for n, paper in enumerate(picks):
        if n % 2 == 0:
            out.append(paper.title)
        else:
            words = re.findall(r"[A-Za-z][\w\-]*", paper.text)
            start = rng.randrange(max(1, len(words) - 8))
            out.append(" ".join(words[start:start + 8]) or paper.title)
    return out


# --- one size, in a child process --------------------------------------------------------------------------
def exact_index(index: Any) -> tuple[np.ndarray, list[str]]:
    """Every chunk and paper vector of the store as one matrix, with the paper of each row."""
    vectors: list[Any] = []
    owners: list[str] = []
    for collection, key in ((index.chunks, "doc_id"), (index.papers, None)):
        total = int(collection.count())
        for offset in range(0, total, 2000):
            got = collection.get(include=["embeddings", "metadatas"], limit=2000, offset=offset)
            vectors.extend(got["embeddings"])
            for record_id, meta in zip(got["ids"], got["metadatas"]):
                owners.append(str((meta or {}).get(key, "")) if key else record_id)
    return np.asarray(vectors, dtype=np.float32), owners


def exact_search(matrix: np.ndarray, owners: list[str], query: np.ndarray, k: int) -> dict[str, float]:
    """Best cosine per paper over its rows, for the top `k` rows (the baseline of the dense side)."""
    sims = matrix @ query
    top = np.argpartition(-sims, min(k, len(sims) - 1))[:k]
    best: dict[str, float] = {}
    for row in top.tolist():
        d = owners[row]
        best[d] = max(best.get(d, -1.0), float(sims[row]))
    return best


def legacy_sentences(index: Any) -> Any:
    """The sentence index as it was before (the interleaved baseline): a paper's sentences embedded on its first
    use, one model call per paper, kept in memory only, onnxruntime spinning between operators."""
    import onnxruntime as ort

    from rag_bot.store.embedding import MiniLMEmbedding, model_files
    from rag_bot.store.sentences import SentenceIndex

    class Legacy(SentenceIndex):
        def prefetch(self, papers: Any) -> None:  # no batching across papers
            return None

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    embedder = MiniLMEmbedding(max_tokens=index.embedder.max_tokens)
    embedder._session = ort.InferenceSession(str(model_files()[0]), options, providers=["CPUExecutionProvider"])
    return Legacy(embedder)


ANSWERS = {  # the offline answer's variants, measured on every question in this order
    "before": "before: sentences embedded per paper at first use, kept in memory (the interleaved baseline)",
    "answer": "now, in memory only: a question's papers embedded in one call",
    "first": "now, persisted, filling: from an empty sentence-vector cache, filled as the questions go (a paper's "
             "first use embeds and writes it)",
    "stored": "now, persisted, after first use (vectors read from the cache, none in memory)",
}


def measure_size(size: int, store: Path, profile: Path | None) -> dict[str, Any]:
    """Start-up, latency and memory of one collection, in this process."""
    from rag_bot.engine import Engine
    from rag_bot.retrieval.lexical import LexicalCache
    from rag_bot.settings import Settings
    from rag_bot.store.reads import SENTENCES_SUFFIX
    from rag_bot.store.sentence_file import SENTENCES
    from rag_bot.store.sentences import SentenceIndex
    from rag_bot.topics import topic_query
    out: dict[str, Any] = {"size": size}
    settings = Settings(storage=store, llm="offline")
    engine = Engine(settings)
    index = engine.index
    out["papers"], out["chunks"] = index.count(), index.chunk_count()
    # Start-up of the lexical side: from the cache (as every start now) against a rebuild from the store (as
    # every start did before), interleaved, best of 3.
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    lexical = LexicalCache(index)
    lexical.load_or_build(stemmer)  # makes sure the cache exists
    cached, rebuilt = [], []
    for _ in range(3):
        start = time.perf_counter()
        lexical.load_or_build(stemmer)
        cached.append(time.perf_counter() - start)
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as scratch:  # a build from the store, as every start did before
            lexical.write(Path(scratch), stemmer, index.state())
        rebuilt.append(time.perf_counter() - start)
    out["lexicon_cache_s"], out["lexicon_rebuild_s"] = min(cached), min(rebuilt)

    retriever = engine.retriever
    embedder = index.embedder
    papers = retriever.papers
    questions = questions_for({d: papers[d] for d in list(papers)} if size <= 5000 else
                              {d: papers[d] for d in random.Random(3).sample(list(papers), 2000)})
    out["questions"] = len(questions)
    matrix, owners = exact_index(index)
    # The persisted sentence vectors start empty, so "first" is each paper's first use ever.
    try:
        index.client.delete_collection(f"{settings.collection}{SENTENCES_SUFFIX}")  # a store of before the file
    except Exception:  # noqa: BLE001 - none yet
        pass
    shutil.rmtree(SENTENCES.root(index), ignore_errors=True)
    legacy = legacy_sentences(index)
    first_use = SentenceIndex(embedder, store=index)
    stored = SentenceIndex(embedder, store=index)
    engines = {"before": Engine(settings, index=index, retriever=retriever, sentences=legacy),
               "answer": engine,
               "first": Engine(settings, index=index, retriever=retriever, sentences=first_use),
               "stored": Engine(settings, index=index, retriever=retriever, sentences=stored)}
    for variant in engines.values():
        variant.ask("warm-up: what is attention?")
    first_use._cache.clear()
    stored._cache.clear()
    snap = retriever._snapshot
    k = max(settings.chunk_candidates, settings.top_k)
    times: dict[str, list[float]] = {"retrieve": [], "exact": [], "bm25": []}
    for name in engines:
        times[name], times[f"{name}_cpu"] = [], []
    agreement: list[float] = []
    differing = 0
    profiler = cProfile.Profile() if profile else None
    for q in questions:
        topic = topic_query(q)
        embedder._query_cache.clear()
        start = time.perf_counter()
        retriever.retrieve_papers(q)
        times["retrieve"].append((time.perf_counter() - start) * 1000)
        embedder._query_cache.clear()
        start = time.perf_counter()
        query = np.asarray(embedder.get_query_embedding(topic), dtype=np.float32)
        exact = exact_search(matrix, owners, query, k)
        times["exact"].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        snap.bm25_scores(retriever._stems(topic), k)
        times["bm25"].append((time.perf_counter() - start) * 1000)
        hnsw = retriever._dense(snap, topic, k)
        top_exact = sorted(exact, key=exact.__getitem__, reverse=True)[:10]
        top_hnsw = set(sorted(hnsw, key=hnsw.__getitem__, reverse=True)[:10])
        agreement.append(len(top_hnsw.intersection(top_exact)) / max(1, len(top_exact)))
        answers = []
        for name, variant in engines.items():
            embedder._query_cache.clear()
            legacy.embedder._query_cache.clear()
            if name in ("first", "stored"):  # nothing in memory: from the store (or embedded and written)
                variant.sentences._cache.clear()
            if profiler and name == "stored":
                profiler.enable()
            start, cpu = time.perf_counter(), time.process_time()
            answer = variant.ask(q)
            times[name].append((time.perf_counter() - start) * 1000)
            times[f"{name}_cpu"].append((time.process_time() - cpu) * 1000)
            if profiler and name == "stored":
                profiler.disable()
            answers.append((answer.grounded, answer.answer, [(c.doc_id, c.quote, c.support) for c in answer.citations]))
        differing += any(a != answers[0] for a in answers[1:])
    for name, values in times.items():
        out[f"{name}_p50"], out[f"{name}_p95"] = pct(values, 50), pct(values, 95)
    out["answers_differing"] = differing
    out["sentence_records"] = stored.store.count() if stored.store else 0
    out["dense_recall_at_10"] = float(np.mean(agreement))
    out["rss_mib"], out["peak_rss_mib"] = rss_mib()
    if profiler and profile:
        profiler.dump_stats(str(profile))
    return out


# --- parent: ingest, cold start, report ---------------------------------------------------------------------
def sample_jsonl(n: int, folder: Path, every: int = 5) -> Path:
    """`n` real abstracts (spread over the file) as one JSONL file."""
    out = folder / f"sample-{n}.jsonl"
    with gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:
        kept = 0
        for i, line in enumerate(src):
            if i % every == min(1, every - 1) and line.strip():
                dst.write(line if line.endswith("\n") else line + "\n")
                kept += 1
                if kept >= n:
                    break
    return out


def measure_ingest(n: int, tmp: Path) -> dict[str, Any]:
    """`rag-bot ingest` of n real abstracts into a fresh store, between two runs of the embedder reference on
    the same abstracts (its mean is the baseline: the load of the machine is shared)."""
    from bench.perf import embed_reference

    data = sample_jsonl(n, tmp)
    texts = []
    for line in data.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        texts.append(f"{rec.get('title', '')}. {rec.get('abstract', '')}")
    refs = []
    ref = embed_reference.reference_on(texts)
    refs.append(ref["seconds"])
    store = tmp / f"ingest-{n}"
    seconds, peak, _ = timed_run([str(BIN / "rag-bot"), "ingest", "--quiet", str(data)], env_for(store))
    refs.append(embed_reference.reference_on(texts)["seconds"])
    reference = statistics.mean(refs)
    shutil.rmtree(store, ignore_errors=True)
    return {"n": n, "ingest_s": seconds, "ingest_peak_mib": peak, "reference_s": reference,
            "reference_rate": n / reference, "ingest_rate": n / seconds, "ratio": seconds / reference,
            "reference_tokens_per_s": ref["tokens_per_s"], "reference_runs": refs}


def measure_ingest_memory(sizes: list[int], tmp: Path) -> list[dict[str, Any]]:
    """Peak resident memory of `rag-bot ingest` of n real abstracts into a fresh store, for each n: the ingest
    streams its input and writes bounded batches, so the peak should not grow with n."""
    out = []
    for n in sizes:
        data = sample_jsonl(n, tmp, every=1)
        store = tmp / f"ingest-rss-{n}"
        seconds, peak, _ = timed_run([str(BIN / "rag-bot"), "ingest", "--quiet", str(data)], env_for(store))
        shutil.rmtree(store, ignore_errors=True)
        data.unlink()
        out.append({"n": n, "peak_mib": peak, "seconds": seconds})
        print(json.dumps(out[-1]), flush=True)
    return out


def cold_ask(store: Path, runs: int = 3) -> dict[str, Any]:
    """`rag-bot ask` from process start to answer (best of `runs`), and `rag-bot stats` (start-up alone)."""
    env = env_for(store)
    asks, stats = [], []
    # The first start after an ingest builds the lexical cache: timed apart (then it is always loaded).
    first = timed_run([str(BIN / "rag-bot"), "ask", "--json", "what is sparse attention?"], env)[0]
    peak = 0.0
    for _ in range(runs):
        seconds, rss, _ = timed_run([str(BIN / "rag-bot"), "ask", "--json", "what is sparse attention?"], env)
        asks.append(seconds)
        peak = max(peak, rss)
        stats.append(timed_run([str(BIN / "rag-bot"), "stats"], env)[0])
    # The first chat start after an ingest computes the collection map and saves it (rag_bot/surfaces/collection_map.py);
    # later starts read it back.
    serve_first = serve_ready(store)
    return {"ask_cold_s": min(asks), "ask_cold_median_s": statistics.median(asks), "ask_peak_mib": peak,
            "stats_cold_s": min(stats), "ask_first_s": first, "serve_first_s": serve_first,
            "serve_ready_s": serve_ready(store)}


def serve_ready(store: Path) -> float:
    """`rag-bot serve`: process start until the chat answers its first HTTP request (bench/perf/load.py's server)."""
    from bench.perf import load

    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        try:
            proc, _ = load.start_server(store, Path(work))
        except SystemExit as exc:  # not ready within bench/perf/load.py's 180 s (it stops the server)
            print(f"rag-bot serve: {exc}", file=sys.stderr)
            return float("inf")
        seconds = time.perf_counter() - start
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    return seconds


def build_info(store: Path) -> dict[str, Any]:
    path = store / "bench-build.json"
    return json.loads(path.read_text()) if path.exists() else {}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["papers"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (("retrieve_p50", "retrieve p50"), ("retrieve_p95", "retrieve p95"),
                       ("before_p50", "answer p50 before"), ("stored_p50", "answer p50 (persisted)"),
                       ("stored_p95", "answer p95 (persisted)"),
                       ("exact_p50", "exact numpy p50"), ("bm25_p50", "BM25 alone p50")):
        left.plot(sizes, [r.get(key, float("nan")) for r in rows], marker="o", label=label)
    left.set_xscale("log")
    left.set_xlabel("papers")
    left.set_ylabel("ms")
    left.set_title("Latency (warm, one process)")
    left.axhline(30, color="grey", linestyle=":", linewidth=1)
    left.axhline(150, color="grey", linestyle="--", linewidth=1)
    left.legend(fontsize=7)
    right.plot(sizes, [r["rss_mib"] for r in rows], marker="o", label="RSS after the questions")
    right.plot(sizes, [r.get("ask_peak_mib", float("nan")) for r in rows], marker="s", label="rag-bot ask (peak)")
    right.plot(sizes, [r.get("ask_cold_s", float("nan")) * 100 for r in rows], marker="^",
               label="cold ask (s x 100)")
    right.set_xscale("log")
    right.set_xlabel("papers")
    right.set_ylabel("MiB")
    right.set_title("Memory and cold start")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def profile_table(path: Path, top: int = 15) -> list[str]:
    stats = pstats.Stats(str(path))
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)  # type: ignore[attr-defined]
    lines = ["| function | cumulative s | share | own s |", "|---|---|---|---|"]
    for (file, line, name), (_, _, own, cumulative, _) in rows[: top * 3]:
        if "site-packages" in file and not any(k in file for k in ("chromadb/api", "onnxruntime", "bm25s")):
            continue
        short = file.replace(str(ROOT) + "/", "").split("site-packages/")[-1]
        lines.append(f"| `{short}:{line} {name}` | {cumulative:.2f} | {cumulative / total:.0%} | {own:.2f} |")
        if len(lines) >= top + 2:
            break
    return lines


def vectors_section() -> list[str]:
    """The vector-layout comparison of bench/eval/vectors.py (its last run), which decided one embedding pass."""
    path = ROOT / "bench" / "results" / "vectors.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    names = {"chunks+paper": "chunks + whole-abstract vector (2 passes, before)",
             "paper": "whole-abstract vector only (1 pass)",
             "chunks+mean": "chunks, paper vector = their mean (1 pass, adopted)"}
    L = ["## Vectors per paper", "",
         f"bench/eval/vectors.py ({data['date']}): the layouts on the same stores, no re-embedding (dev set on a fresh "
         "seeds store; CSFCube, 4,174 abstracts, nDCG@20). Ingest cost is the embedding pass: chunks are 1.17x "
         "the reference's tokens (1,000 real abstracts: 241,118 word pieces in 1,762 chunks against 206,746 for "
         "one 256-token vector each); the whole-abstract vector added 0.86x more.", "",
         "| layout | dev R@1 | dev MRR@10 | summary/compare recall | refusal accuracy | false refusals | "
         "CSFCube dense nDCG@20 | CSFCube hybrid nDCG@20 |", "|---|---|---|---|---|---|---|---|"]
    dev = {r["layout"]: r for r in data["rows"] if r["set"] == "dev"}
    cube = {r["run"]: r for r in data["rows"] if r["set"] == "csfcube"}
    for layout, label in names.items():
        d = dev.get(layout, {})
        L.append(f"| {label} | {d.get('R@1', '')} | {d.get('MRR@10', '')} | {d.get('summary/compare recall', '')} "
                 f"| {d.get('refusal accuracy', '')} | {d.get('false refusals', '')} | "
                 f"{cube.get(f'dense/{layout}', {}).get('ndcg', float('nan')):.3f} | "
                 f"{cube.get(f'hybrid/{layout}', {}).get('ndcg', float('nan')):.3f} |")
    return L + [""]


def sentences_section() -> list[str]:
    """What was done about the answer's sentence embedding (issue 11 item 3), with the measurements of
    bench/eval/vectors.py --pass-cost and --derived when they were run."""
    L = ["## Sentence vectors: embedded once per paper", "",
         "An offline answer scores the sentences of its papers against the question (grounding's evidence: the best "
         "sentence of the top 3 papers; an area's relevance: the best sentence of up to 40 candidates; the writer "
         "picks sentences). Embedding them was 94% of the answer at 3,000 papers (cProfile, before). Now "
         "(rag_bot/store/sentences.py):", "",
         "- **persisted**: given the paper index, a paper's sentence vectors are written to a third collection, "
         "`<name>_sentences` (a folder or a Chroma server alike), at their first use, and read from it afterwards "
         "(one record per paper, keyed by the model and the exact sentences; the float32 vectors, so answers are "
         "identical whether computed or read). A store needs no migration: the collection fills as questions come, "
         "or ahead of them with `SentenceIndex.fill(papers)`. Ingest is unchanged (no extra pass).",
         "- **batched**: a question's missing papers are embedded in one model call, sorted by length across "
         "papers (grounding asks for its top 3 together, then, when grounded, an area's candidates together).",
         "- **no spinning**: onnxruntime no longer busy-waits between operators; on this shared machine that was "
         "a fifth to a third of the CPU time of embedding sentences (table below).", "",
         "The p50 target is met once a question's papers have been used before (the `after first use` rows below); "
         "a paper's first use still embeds it (about 0.1 s of CPU each, a few papers per question). A whole "
         "collection is made ready ahead of questions with `SentenceIndex.fill` (at 22,186 papers about 40 minutes "
         "of CPU, once; not run here, and not part of ingest, which stays one pass). The persisted store is used "
         "where the engine builds its `SentenceIndex` with the paper index (`SentenceIndex(embedder, store=index)`; "
         "the bench does); without it answers are the `in memory only` rows.", "",
         "Disk: a persisted paper takes about 38 KB in `chroma.sqlite3` (14 KB of base64 float32 vectors, stored "
         "twice by Chroma: the metadata row and its string index; 3,072 papers of CSFCube added 117 MB), so a fully "
         "filled 22,186-paper store would grow by about 0.85 GB. Halving it (float16) would no longer give "
         "bit-identical answers; one record per sentence with the vector as the record's embedding avoids the "
         "string index: not done here.", ""]
    quality = ROOT / "bench" / "results" / "sentences_quality.json"
    if quality.exists():
        q = json.loads(quality.read_text())
        keys = ("R@1", "R@5", "MRR@10", "summary/compare recall", "topic precision", "refusal accuracy",
                "false refusals", "citation integrity", "partial stated", "controls wrongly stated", "cpu_s")
        L += ["Quality is unchanged: the vectors are the same numbers, and no answer of the latency runs below differs "
              "between the four variants. The dev set and the partial questions over the 3,202-paper collection "
              "(bench/eval/scale.py's measures; the sentence index before against now, one process; `cpu_s`: CPU "
              "seconds of the whole set, the persisted store partly filled by the latency run):", "",
              "| sentence index | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
        for name, row in q.items():
            L.append(f"| {name} | " + " | ".join(str(row.get(k, "")) for k in keys) + " |")
        L.append("")
    cost = ROOT / "bench" / "results" / "pass_cost.json"
    if cost.exists():
        c = json.loads(cost.read_text())
        ms, wp = c["cpu_ms_per_abstract"], c["word_pieces"]
        n = c["abstracts"]
        L += [f"Embedding cost per abstract (bench/eval/vectors.py --pass-cost, {n} real abstracts of the 3,000 "
              f"collection, CPU time, best of 3 interleaved rounds, {c['date']}):", "",
              "| pass | texts | word pieces per abstract | CPU ms per abstract |", "|---|---|---|---|"]
        for name, label in (("chunks", "chunks (title + chunk text: the ingest pass)"),
                            ("whole", "whole abstract (title + abstract: the default paper vector)"),
                            ("sentences", "sentences (what answers score)"),
                            ("sentences, spinning", "sentences, onnxruntime spinning (before)")):
            key = name.split(",")[0]
            L.append(f"| {label} | {c['texts'][key]} | {wp[key] / n:.0f} | {ms[name]:.0f} |")
        L.append("")
    derived = ROOT / "bench" / "results" / "derived.json"
    if derived.exists():
        d = json.loads(derived.read_text())
        L += [f"Option (a), chunk and paper vectors derived from the sentence vectors so that ingest makes one "
              f"sentence pass only (bench/eval/vectors.py --derived, {d['date']}; a chunk's vector is the normalised mean "
              "of its title's and its sentences' vectors, `weighted` by their word pieces; the working tree of that moment, so compare the rows with each other). It "
              "loses summary/compare recall and adds false refusals on the dev set already, so it was not adopted "
              "(and an eager sentence pass at ingest beside the chunks would cost 0.9x the chunk pass, see above):", "",
              "| set | layout | R@1 | MRR@10 | summary/compare recall | refusal accuracy | false refusals | "
              "topic precision | partial stated | CSFCube nDCG@20 |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in d["rows"]:
            if r["set"] == "csfcube":
                L.append(f"| CSFCube {r['mode']} | {r['layout']} | | | | | | | | {r['ndcg']:.3f} |")
            else:
                L.append(f"| {r['set']} | {r['layout']} | {r.get('R@1')} | {r.get('MRR@10')} | "
                         f"{r.get('summary/compare recall')} | {r.get('refusal accuracy')} | "
                         f"{r.get('false refusals')} | {r.get('topic precision')} | {r.get('partial stated', '')} | |")
        sets = {r["set"] for r in d["rows"]}
        missing = [name for key, name in (("csfcube", "CSFCube"), ("3000", "the 3,000 collection")) if key not in sets]
        if missing:
            L += ["", f"Not measured in that run: {' and '.join(missing)}."]
        L.append("")
    return L


def full_ingest_section() -> list[str]:
    """The whole 22,148-abstract file ingested into a fresh folder store and a fresh `chroma run` server
    (bench/perf/full_ingest.py, its last runs), against the reference scaled to the file."""
    runs = [json.loads(p.read_text()) for p in (ROOT / "bench" / "results" / "full_ingest.json",
                                                 ROOT / "bench" / "results" / "full_ingest-server.json")
            if p.exists()]
    if not runs:
        return []
    L = ["## The whole file: 22,148 abstracts in one ingest", "",
         "bench/perf/full_ingest.py: `rag-bot ingest --quiet ../shared/data/ml_abstracts.jsonl.gz` into a fresh store, "
         "process start to exit; resident memory sampled every second (the ingest process, and the server's). "
         "Baseline: the embedder reference on every 10th abstract, run before and after the ingest, scaled to the "
         "whole file by word pieces.", "",
         "| store | date | abstracts | seconds | abstracts/s | reference s | ratio | peak RSS MiB | server peak "
         "RSS MiB | load before / after |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        server = f"{r['server_peak_rss_mib']:.0f}" if r.get("server_peak_rss_mib") else ""
        L.append(f"| {r['mode']} | {r['date']} | {r['abstracts']:,} | {r['ingest_s']:.0f} | "
                 f"{r['abstracts_per_s']:.1f} | {r['reference_s']:.0f} | **{r['ratio']:.2f}x** | "
                 f"{r['peak_rss_mib']:.0f} | {server} | {r['load_before']:.1f} / {r['load_after']:.1f} |")
    for r in runs:
        points = [p for p in r.get("rss") or [] if p.get("ingest", 0) > 100]
        if len(points) >= 5:
            picks = [points[round(i * (len(points) - 1) / 4)] for i in range(5)]
            L += ["", f"Resident memory of the ingest over time ({r['mode']}): " + ", ".join(
                f"{p['ingest']:.0f} MiB at {p['t']:.0f} s" for p in picks) + "."]
    L += ["", "Reference sample runs: " + "; ".join(
        f"{r['mode']}: {', '.join(f'{s:.0f} s' for s in r['reference_sample_s'])} for {r['reference_sample']:,} "
        "abstracts" for r in runs) + ". Reports: " + "; ".join(f"{r['mode']}: {r['report'].rstrip('.')}" for r in runs) + ".", ""]
    return L


def server_section() -> list[str]:
    """The 22,186-paper collection through a `chroma run` server against the folder store (bench/perf/server_scale.py)."""
    path = ROOT / "bench" / "results" / "server_scale.json"
    if not path.exists():
        return []
    r = json.loads(path.read_text())
    L = ["## Through a `chroma run` server", "",
         f"bench/perf/server_scale.py ({r['date']}, load average {r['load_before']:.1f} before, {r['load_after']:.1f} "
         "after): the seeds and all 22,148 abstracts ingested into a fresh `chroma run` server by `rag-bot ingest` "
         "(bench/perf/full_ingest.py --server --seeds), against the folder store of the same papers, measured "
         f"interleaved in one run: {r['questions']} questions (the dev set, then titles and phrases of random papers), "
         "each answered twice (its papers' first use, then again with their sentence vectors read from the store).",
         "", "| store | papers | first `ask` s | `ask` cold s (best of 3) | retrieve p50 / p95 ms | answer, first use "
         "p50 / p95 ms | answer again p50 / p95 ms |", "|---|---|---|---|---|---|---|"]
    for name, label in (("folder", "folder (baseline)"), ("server", "`chroma run` server")):
        L.append(f"| {label} | {r['papers'][name]:,} | {r[f'{name}_ask_first_s']:.2f} | "
                 f"{r[f'{name}_ask_cold_s']:.2f} | {r[f'{name}_retrieve_p50']:.0f} / {r[f'{name}_retrieve_p95']:.0f} | "
                 f"{r[f'{name}_answer_first_p50']:.0f} / {r[f'{name}_answer_first_p95']:.0f} | "
                 f"{r[f'{name}_answer_again_p50']:.0f} / {r[f'{name}_answer_again_p95']:.0f} |")
    L += ["", "The folder store keeps the sentence vectors earlier runs stored in it, so some of its \"first use\" "
          "answers read them; the fresh server starts with none. `first ask`: the first start in this run; the first "
          "start of a collection state builds its lexical cache (the server's here, from its records over HTTP; "
          "the folder store's was built by earlier runs)."]
    keys = list(r["folder_quality"])
    L += ["", "Quality on the dev set (`rag-bot eval`'s measures):", "", "| store | " + " | ".join(keys) + " |",
          "|---" * (len(keys) + 1) + "|"]
    for name in ("folder", "server"):
        L.append(f"| {name} | " + " | ".join(str(r[f"{name}_quality"][k]) for k in keys) + " |")
    L += ["", f"Server resident memory after the run: {r['server_rss_mib']:.0f} MiB."]
    if r.get("reingest_report"):
        L += ["", f"The same files ingested again into the server before the run ({r['reingest_s']:.0f} s): "
                  f"{r['reingest_report']}"]
    L.append("")
    return L


def report(info: dict[str, Any], ingest: dict[str, Any] | None, rows: list[dict[str, Any]],
           missing: list[int], profile: list[str] | None, full: bool) -> str:
    L = ["# Benchmarks at size", "",
         f"Produced by `make bench{' BENCH_ARGS=--full' if full else ''}` (bench/perf/scale.py) at commit "
         f"`{info['commit']}`, {info['date']}.", "",
         f"Machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB RAM; Python {info['python']}, "
         f"onnxruntime {info['onnxruntime']}, chromadb {info['chromadb']}. Load average "
         f"{info['load_start']:.1f} at the start, {info['load_end']:.1f} at the end: the machine is shared, so "
         "every figure is read against its baseline measured in the same run (interleaved), not against "
         "another run.", "",
         "Collections: the 38 seed abstracts, and the seeds plus real abstracts of "
         "`../shared/data/ml_abstracts.jsonl.gz` (bench/collections.py: every 7th for 3,000, all 22,148 for "
         "22,000)." + (f" Not built here: {', '.join(map(str, missing))}." if missing else ""), ""]
    if ingest and "n" in ingest:
        L += ["## Ingest against the embedder's limit", "",
              f"`rag-bot ingest` of {ingest['n']} real abstracts into a fresh store (process start to exit), "
              "between two runs of the reference (bench/perf/embed_reference.py: the model alone, one 256-token "
              "vector per abstract, length-sorted batches) on the same abstracts; the baseline is their mean.", "",
              "| | seconds | abstracts/s | peak RSS MiB |", "|---|---|---|---|",
              f"| embedder reference | {ingest['reference_s']:.1f} | {ingest['reference_rate']:.1f} | |",
              f"| `rag-bot ingest` | {ingest['ingest_s']:.1f} | {ingest['ingest_rate']:.1f} | "
              f"{ingest['ingest_peak_mib']:.0f} |",
              f"| **ratio** | **{ingest['ratio']:.2f}x** | | |", "",
              f"Reference runs: {', '.join(f'{s:.1f} s' for s in ingest['reference_runs'])} "
              f"({ingest['reference_tokens_per_s']} tokens/s).", ""]
    if ingest and ingest.get("memory"):
        L += ["Peak resident memory of `rag-bot ingest` by input size (`--ingest-rss`: the first n real abstracts "
              "into a fresh store, process start to exit; the input is read as a stream and embedded and written "
              "256 papers at a time):", "", "| abstracts | peak RSS MiB | seconds |", "|---|---|---|"]
        L += [f"| {m['n']} | {m['peak_mib']:.0f} | {m['seconds']:.0f} |" for m in ingest["memory"]]
        L.append("")
    L += full_ingest_section() + server_section()
    builds = [(r["size"], r["build"]) for r in rows if r.get("build") and not
              str(r["build"].get("report", "")).startswith("0 added, 0 updated")]
    if builds:
        L += ["Full builds (bench/collections.py, `rag-bot`'s own ingest, timed when they were built; not "
              "interleaved with a reference):", "", "| collection | papers | seconds | papers/s | report |",
              "|---|---|---|---|---|"]
        for size, b in builds:
            rate = b["papers"] / b["seconds"] if b.get("seconds") else float("nan")
            L.append(f"| {size} | {b.get('papers')} | {b.get('seconds')} | {rate:.1f} | {b.get('report', '')} |")
        L.append("")
    big = next((r for r in rows if r["size"] == 22000), None)
    if big:
        def mark(ok: bool) -> str:
            return "met" if ok else "**not met**"
        server_path = ROOT / "bench" / "results" / "server_scale.json"
        srv = json.loads(server_path.read_text()) if server_path.exists() else None
        run_retrieve = big["retrieve_p50"]
        if srv:  # the server bench's folder row: the same collection, measured with nothing else running
            big = big | {"retrieve_p50": srv["folder_retrieve_p50"], "ask_cold_s": srv["folder_ask_cold_s"]}
        where = f" (bench/perf/server_scale.py, {srv['date']}; this run: {run_retrieve:.0f} ms)" if srv else ""
        L += ["## Targets at 22,000 papers (issue 11)", "", "| target | measured | |", "|---|---|---|",
              f"| retrieve p50 <= 30 ms | {big['retrieve_p50']:.0f} ms{where} | {mark(big['retrieve_p50'] <= 30)} |",
              f"| offline answer p50 <= 150 ms | {big.get('stored_p50', big['answer_p50']):.0f} ms once a paper's "
              f"sentences are embedded ({big.get('first_p50', float('nan')):.0f} ms at first use, "
              f"{big.get('before_p50', float('nan')):.0f} ms before, same run) | "
              f"{mark(big.get('stored_p50', big['answer_p50']) <= 150)} |",
              f"| `rag-bot ask` cold <= 4 s | {big['ask_cold_s']:.2f} s{' (bench/perf/server_scale.py)' if srv else ''} | "
              f"{mark(big['ask_cold_s'] <= 4)} |",
              f"| chat ready as fast | {big.get('serve_ready_s', float('nan')):.1f} s | "
              f"{mark(big.get('serve_ready_s', 99) <= 4)} |"]
        whole = ROOT / "bench" / "results" / "full_ingest.json"
        full_run = json.loads(whole.read_text()) if whole.exists() else None
        if ingest and "ratio" in ingest:
            extra = f"; the whole file: {full_run['ratio']:.2f}x ({full_run['date']})" if full_run else ""
            L.append(f"| ingest <= 1.25x the embedder reference | {ingest['ratio']:.2f}x ({ingest['n']} abstracts)"
                     f"{extra} | {mark(max(ingest['ratio'], full_run['ratio'] if full_run else 0) <= 1.25)} |")
        build_peak = big.get("build", {}).get("peak_rss_mib")
        if full_run:
            L.append(f"| ingest peak RSS <= 1 GB | {full_run['peak_rss_mib']:.0f} MiB (the whole file, "
                     f"{full_run['abstracts']:,} abstracts, {full_run['date']}) | "
                     f"{mark(full_run['peak_rss_mib'] <= 1024)} |")
        elif build_peak:
            L.append(f"| ingest peak RSS <= 1 GB | {build_peak:.0f} MiB (22,186 papers) | {mark(build_peak <= 1024)} |")
        elif ingest and ingest.get("memory"):
            top = max(ingest["memory"], key=lambda m: m["n"])
            L.append(f"| ingest peak RSS <= 1 GB | {top['peak_mib']:.0f} MiB ({top['n']:,} papers) | "
                     f"{mark(top['peak_mib'] <= 1024)} |")
        L.append("")
    L += vectors_section()
    L += ["## Start-up", "",
          "`rag-bot ask` cold: process start to printed answer (best of 3, offline writer), `rag-bot stats` "
          "(start-up without the model) in the same loop; the lexical side loaded from its cache "
          "(rag_bot/retrieval/lexical/) against rebuilt from the store as every start did before (in-process, best "
          "of 3, interleaved).", "",
          "| papers | chunks | `ask` cold s (median) | `stats` cold s | `ask` peak RSS MiB | first `ask` after the "
          "ingest s | first chat start after the ingest s | chat ready s | lexicon from cache s | lexicon rebuilt s |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['papers']} | {r['chunks']} | {r.get('ask_cold_s', float('nan')):.2f} "
                 f"({r.get('ask_cold_median_s', float('nan')):.2f}) | "
                 f"{r.get('stats_cold_s', float('nan')):.2f} | {r.get('ask_peak_mib', float('nan')):.0f} | "
                 f"{r.get('ask_first_s', float('nan')):.2f} | {r.get('serve_first_s', float('nan')):.1f} | "
                 f"{r.get('serve_ready_s', float('nan')):.1f} | "
                 f"{r['lexicon_cache_s']:.3f} | {r['lexicon_rebuild_s']:.2f} |")
    L += [""] + sentences_section()
    L += ["## Latency (warm, one process per collection)", "",
          "Per question, interleaved: rag-bot retrieval (hybrid, the question embedded each time), the exact "
          "baseline (numpy over the same chunk and paper vectors, question embedded), BM25 alone, and the whole "
          "offline answer (retrieval, grounding, composing) in four variants below. Questions: the 101 dev "
          "questions plus titles and 8-word phrases of random papers of the collection. `dense R@10 vs exact`: "
          "share of the exact top-10 papers that Chroma's HNSW also returns. RSS: the process holding the four "
          "answer variants (two model sessions).", "",
          "| papers | questions | retrieve p50 / p95 ms | exact numpy p50 / p95 ms | BM25 alone p50 / p95 ms | "
          "dense R@10 vs exact | RSS MiB |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['papers']} | {r['questions']} | {r['retrieve_p50']:.0f} / {r['retrieve_p95']:.0f} | "
                 f"{r['exact_p50']:.0f} / {r['exact_p95']:.0f} | {r['bm25_p50']:.1f} / {r['bm25_p95']:.1f} | "
                 f"{r['dense_recall_at_10']:.3f} | {r['rss_mib']:.0f} |")
    L += ["", "The offline answer, the same questions, each answered by the four variants in turn (wall and CPU "
          "time of the process, p50 / p95 ms; the machine is shared, so CPU time is the steadier figure). A "
          "paper's sentence vectors are its sentences embedded by MiniLM: about 0.1 s of CPU per abstract, most of "
          "an answer that needs them. The persisted variants start from an empty `<name>_sentences` collection "
          "and hold nothing in memory between questions; `answers that differ`: questions whose four answers "
          "(text, citations, quotes, support) are not all identical.", ""]
    L += ["| papers | variant | answer wall p50 / p95 ms | answer CPU p50 / p95 ms |", "|---|---|---|---|"]
    for r in rows:
        for name, label in ANSWERS.items():
            if f"{name}_p50" not in r:
                continue
            cpu = (f"{r[f'{name}_cpu_p50']:.0f} / {r[f'{name}_cpu_p95']:.0f}" if f"{name}_cpu_p50" in r else "")
            L.append(f"| {r['papers']} | {label} | {r[f'{name}_p50']:.0f} / {r[f'{name}_p95']:.0f} | {cpu} |")
    differ = [f"{r['answers_differing']} at {r['papers']}" for r in rows if "answers_differing" in r]
    if differ:
        L += ["", f"Answers that differ between the variants: {', '.join(differ)} papers. Persisted records after "
              "the run: " + ", ".join(f"{r['sentence_records']} at {r['papers']}" for r in rows
                                     if "sentence_records" in r) + " papers."]
    L += ["", f"![latency and memory against collection size]({PLOT.name})", ""]
    if profile:
        L += ["## Where the offline answer spends its time (3,000 papers, cProfile)", "",
              "The answer once its papers' sentence vectors are persisted (the `now, persisted, after first use` "
              "variant above), over the same questions.", ""] + profile + [""]
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--full", action="store_true", help="every size and a larger ingest sample")
    ap.add_argument("--profile", action="store_true", help="cProfile the answers at 3,000 papers")
    ap.add_argument("--sizes", default="", help="comma-separated sizes (default: quick 38,3000; --full all)")
    ap.add_argument("--ingest", type=int, default=None, help="abstracts in the ingest comparison (0: skip)")
    ap.add_argument("--ingest-rss", default="",
                    help="comma-separated input sizes whose ingest peak memory is measured, e.g. 2000,5000,10000")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--merge", action="store_true",
                    help="keep the other sizes (and the ingest figures, unless measured) of the last run's "
                         "bench/results/scale.json; each size's baselines are always from its own run")
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from bench/results/scale.json")
    args = ap.parse_args()
    results = ROOT / "bench" / "results" / "scale.json"
    if args.report_only:
        last = json.loads(results.read_text())
        args.out.write_text(report(last["machine"], last["ingest"], last["sizes"], [], last.get("profile"),
                                   last.get("full", False)))
        plot(last["sizes"], PLOT)
        return 0
    if args.one is not None:
        print(json.dumps(measure_size(args.one, args.store, args.profile_out)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s] or (list(SIZES) if args.full else [38, 3000])
    info = machine()
    rows: list[dict[str, Any]] = []
    missing: list[int] = []
    profile_lines = None
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        n_ingest = args.ingest if args.ingest is not None else (1000 if args.full else 300)
        ingest = measure_ingest(n_ingest, tmp) if n_ingest and ML_ABSTRACTS.exists() else None
        if ingest:
            print(json.dumps(ingest), flush=True)
        rss_sizes = [int(n) for n in args.ingest_rss.split(",") if n]
        if rss_sizes and ML_ABSTRACTS.exists():
            ingest = (ingest or {}) | {"memory": measure_ingest_memory(rss_sizes, tmp)}
        for size in sizes:
            store = store_of(size, tmp)
            if store is None:
                missing.append(size)
                continue
            if size == 38:
                timed_run([str(BIN / "rag-bot"), "ingest", "--quiet", str(ROOT / "seeds")], env_for(store))
            row = {"size": size, "build": build_info(store)} | cold_ask(store)
            prof = tmp / "profile.out" if args.profile and size == 3000 else None
            cmd = [sys.executable, "-m", __spec__.name, "--one", str(size), "--store", str(store)]
            if prof:
                cmd += ["--profile-out", str(prof)]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env_for(store))
            if proc.returncode:
                raise RuntimeError(proc.stderr[-2000:])
            row |= json.loads(proc.stdout.strip().splitlines()[-1])
            print(json.dumps(row), flush=True)
            rows.append(row)
            if prof and prof.exists():
                profile_lines = profile_table(prof)
        if args.full and ML_ABSTRACTS.exists():
            # The whole file into a fresh folder store and a fresh `chroma run` server (kept for the server's
            # latency and quality against the folder store): bench/perf/full_ingest.py, bench/perf/server_scale.py.
            subprocess.run([sys.executable, "-m", "bench.perf.full_ingest"], cwd=ROOT, check=True)
            server_data = tmp / "server-data"
            subprocess.run([sys.executable, "-m", "bench.perf.full_ingest", "--server", "--seeds", "--keep",
                            str(server_data)], cwd=ROOT, check=True)
            if (ROOT / "storage" / "bench-22000" / "chroma.sqlite3").exists():
                subprocess.run([sys.executable, "-m", "bench.perf.server_scale", "--server-data", str(server_data)],
                               cwd=ROOT, check=True)
    info["load_end"] = os.getloadavg()[0]
    if args.merge and results.exists():
        last = json.loads(results.read_text())
        done = {r["size"] for r in rows}
        rows = sorted(rows + [r for r in last["sizes"] if r["size"] not in done], key=lambda r: r["papers"])
        missing = [m for m in missing if m not in {r["size"] for r in rows}]
        ingest = ingest or last.get("ingest")
        profile_lines = profile_lines or last.get("profile")
    if rows:
        plot(rows, PLOT)
    text = report(info, ingest, rows, missing, profile_lines, args.full)
    args.out.write_text(text)
    results.parent.mkdir(exist_ok=True)
    results.write_text(json.dumps({"machine": info, "ingest": ingest, "sizes": rows, "profile": profile_lines,
                                   "full": args.full}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
