"""Fit the relevance decision (rag_bot/grounding/relevance.py) on labelled pairs, and report it on a locked part.

    python -m bench.fit.relevance [--sizes 38 3000 22000] [--generated 300] [--write] [--reference]
    RAG_BOT_EMBED_PATH=DIR python -m bench.fit.relevance --stores=-v4 --model-out F   # on another model's signals

Data, per collection size (storage/bench-<size>, built by bench/collections.py; 38 is the seeds alone):
- the dev set on the seeds (tests/data/dev_questions.jsonl), every candidate labelled by the expected papers;
- judged pairs: bench/data/relevance_questions.jsonl (questions in three modes, written by readers of the
  collection) and bench/data/relevance_pairs.jsonl (each pooled paper judged relevant or not, bench/fit/label_pool.py);
- generated known items, labelled by the collection itself: a real paper's title asked as a question must find
  that paper (a positive pair, an answerable question); the same question with the paper and its near duplicates
  (same normalised title, or abstract vectors at cosine >= 0.95) taken out of the ranking is a near miss: its top
  papers are negative pairs and the question must be declined.

The model also records the embedding model its signals were measured with and that model's statistics on the
seeds' generated known items (`reference`: rag_bot/grounding/calibrate.py measures the same for another model and
fits its cosines onto them); `--reference` measures only those (with `--write` it saves them, keeping the weights and cuts).

Every question and generated paper falls in the locked part by its id (rag_bot.evaluation.split `locked`): no weight, cut or rule is
chosen on it. The model and its cuts are fitted on the rest; both parts are reported (docs/eval.md). Only with
`--write` is the model saved to rag_bot/grounding/relevance_model.json (writes a SHIPPED model); without, it is
printed and the shipped one is left as it is.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import subprocess
import sys
from collections.abc import Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np

from bench.fitting import fit_logistic, tell_shipped
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]

QUESTIONS = ROOT / "bench" / "data" / "relevance_questions.jsonl"
PAIRS = ROOT / "bench" / "data" / "relevance_pairs.jsonl"
ML_ABSTRACTS = ROOT.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
RESULTS = ROOT / "bench" / "results" / "relevance.json"
SHIPPED = ROOT / "rag_bot" / "grounding" / "relevance_model.json"  # written only with --write
DEV = ROOT / "tests" / "data" / "dev_questions.jsonl"
NEAR_DUPLICATE = 0.95  # abstract cosine at which two records are taken for the same paper
L2 = 1.0  # ridge penalty of the logistic fit (on standardised signals); the cross-validated log loss is reported
FALSE_REFUSALS = 0.02  # the answer cut declines the most near misses at this share of answerable questions
PAPERS = {38: 38, 3000: 3202, 22000: 22186}  # papers in each benchmark collection (bench/collections.py)
AREA_KINDS = ("area", "compare", "dev summary", "dev compare")  # questions whose answer is an area


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def generated_items(engine, size: int, count: int) -> list[dict]:
    """Known items of a collection: real papers (not seeds, whose titles are derived from their text) chosen by
    the hash of their id, their title as the question."""
    papers = engine.retriever.papers
    ids = sorted((d for d in papers if "#" not in d), key=lambda d: hashlib.sha1(f"{size}:{d}".encode()).hexdigest())
    items = []
    for doc_id in ids:
        title = papers[doc_id].title.strip()
        if 4 <= len(title.split()) <= 20:
            items.append({"id": f"gen-{doc_id}", "question": title, "mode": "ask", "target": [doc_id]})
        if len(items) >= count:
            break
    return items


READER_STYLES = ("paraphrase", "fast-when", "problem")  # reader questions asking for one paper


def reader_items(engine) -> list[dict]:
    """The readers' one-paper questions (bench/data/reader_questions_*.jsonl: paraphrases, fast-when and
    problem-first questions, every target an unlocked paper) whose paper the collection holds."""
    papers = engine.retriever.papers
    return [q for path in sorted((ROOT / "bench" / "data").glob("reader_questions_*.jsonl")) for q in read_jsonl(path)
            if q["style"] in READER_STYLES and q["target"][0] in papers]


def near_duplicates(engine, target: str, ranked: list[str]) -> set[str]:
    """The ranked papers that are the target under another record (same title, or near-identical abstract)."""
    from rag_bot.text import normalize_name

    papers = engine.retriever.papers
    key = normalize_name(papers[target].title)
    vectors = engine.index.paper_vectors(list(dict.fromkeys([target, *ranked])))
    out = {target}
    if target in vectors:
        t = np.asarray(vectors[target])
        for d in ranked:
            if d in vectors and float(np.dot(t, np.asarray(vectors[d]))) >= NEAR_DUPLICATE:
                out.add(d)
    out |= {d for d in ranked if normalize_name(papers[d].title) == key}
    return out


class _Without(Mapping):
    """A collection's papers with some taken out (retrieval ranks only papers of its snapshot)."""

    def __init__(self, papers: Mapping, drop: set[str]) -> None:
        self.papers, self.drop = papers, drop

    def __getitem__(self, key):
        if key in self.drop:
            raise KeyError(key)
        return self.papers[key]

    def __contains__(self, key) -> bool:
        return key not in self.drop and key in self.papers

    def __iter__(self):
        return (k for k in self.papers if k not in self.drop)

    def __len__(self) -> int:
        return len(self.papers) - len(self.drop)


@contextmanager
def without(engine, drop: set[str] | None):
    """The engine's retrieval as if the papers in `drop` were not in the store (for a near miss)."""
    retriever = engine.retriever
    snap = retriever._snapshot
    if drop:
        retriever._snapshot = dataclasses.replace(snap, papers=_Without(snap.papers, drop))
    try:
        yield
    finally:
        retriever._snapshot = snap


def question_rows(engine, question: str, mode: str, drop: set[str] | None = None):
    """A question's candidates (doc_ids, in ranking order) and their signal rows, with the papers in `drop` taken
    out of the collection first."""
    from rag_bot.nodes import scored_paper

    query = engine.query(question, mode)
    with without(engine, drop):
        papers = [scored_paper(n) for n in engine.retriever.retrieve(query)]
    chosen, rows = engine.grounding.signals(query, papers)
    return [p.paper.doc_id for p in chosen], [p.named for p in chosen], rows


def dev_rows(engine) -> list[dict]:
    """The dev set on the seeds (tests/data/dev_questions.jsonl), every candidate labelled: with 38 papers each
    question's expected papers are all its relevant ones."""
    out = []
    for q in read_jsonl(DEV):
        mode = q.get("mode", "ask") if q["kind"] in ("summary", "compare") else "ask"
        ids, named, rows = question_rows(engine, q["question"], mode)
        expected = set(q.get("expected") or []) if q["kind"] != "unanswerable" else set()
        if q["kind"] in ("single", "fact"):
            expected = set(list(expected)[:1]) if len(expected) == 1 else expected
        out.append({"size": 38, "source": "dev", "qid": q["id"], "question": q["question"],
                    "kind": f"dev {q['kind']}", "mode": mode,
                    "answerable": bool(expected), "ids": ids, "named": named, "rows": rows.tolist(),
                    "labels": [d in expected for d in ids], "relevant": sorted(expected)})
    return out


STORES = {"suffix": ""}  # --stores: the benchmark stores re-embedded with another model (storage/bench-<size><suffix>)


def store_of(size: int) -> Path:
    """The store of a collection size (38: the seeds alone, indexed here when missing)."""
    if size == 38:
        from rag_bot.engine import Engine
        from rag_bot.settings import Settings

        store = ROOT / "storage" / f"bench-seeds{STORES['suffix']}"
        if not (store / "chroma.sqlite3").exists():
            Engine(Settings(storage=store)).ingest([ROOT / "seeds"])
        return store
    return ROOT / "storage" / f"bench-{size}{STORES['suffix']}"


def engine_of(size: int):
    """An engine over the benchmark store of a collection size, or None (said on stderr) when it is not built."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    store = store_of(size)
    if not (store / "chroma.sqlite3").exists():
        print(f"skipped {size}: {store} not built (python -m bench.collections {size})", file=sys.stderr)
        return None
    return Engine(Settings(storage=store))


def with_cross(records: list[dict], folder: Path | None) -> list[str]:
    """Two more signals on every row, the trained cross-encoder's logit and its gap to the question's best
    (train/scorer.py), cached per size and model in storage/; the names of the columns appended."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from train import scorer

    folder = folder or scorer.FOLDER
    version = f"{hashlib.sha1((folder / 'model.onnx').read_bytes()).hexdigest()[:12]}-{scorer.MAX_TOKENS}"
    for size in sorted({r["size"] for r in records}):
        cache = ROOT / "storage" / f"relevance-cross-{size}-{version}.json.gz"
        known = json.loads(gzip.open(cache, "rt").read()) if cache.exists() else {}
        mine = [r for r in records if r["size"] == size]
        missing = [r for r in mine if f"{r['source']}|{r['qid']}" not in known and r["rows"]]
        if missing:
            papers = Engine(Settings(storage=store_of(size))).retriever.papers
            for r in missing:
                known[f"{r['source']}|{r['qid']}"] = scorer.scores(r["question"], [papers[d] for d in r["ids"]],
                                                                   folder).tolist()
            with gzip.open(cache, "wt") as f:
                f.write(json.dumps(known))
        for r in mine:
            scores = np.asarray(known.get(f"{r['source']}|{r['qid']}", []))
            r["rows"] = [[*row, float(x), float(scores.max() - x)] for row, x in zip(r["rows"], scores)]
    return ["cross", "cross gap"]


def collect(size: int, generated: int, part: str) -> list[dict]:
    """Every labelled candidate row of one collection size, of the judged questions or the generated ones (the
    dev set on the seeds)."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    store = store_of(size)
    if not (store / "chroma.sqlite3").exists():
        print(f"skipped {size}: {store} not built (python -m bench.collections {size})", file=sys.stderr)
        return []
    engine = Engine(Settings(storage=store))
    if size == 38 and part != "judged":
        return []
    if part == "dev":  # among real distractors: the dev set's answerable questions, their expected papers relevant
        return [dict(r, size=size, labels=[True if x else None for x in r["labels"]]) for r in dev_rows(engine)
                if r["answerable"]]
    out = dev_rows(engine) if size == 38 else []
    # The judged questions on the seeds too: their judged pools held the seeds, so a seed judged relevant is one, and a
    # question no paper of the 3,000 answers has no answer among the 38.
    for q in read_jsonl(QUESTIONS) if part == "judged" else []:
        ids, named, rows = question_rows(engine, q["question"], q["mode"])
        # Labels, relevant papers and answerability come from the judgements when the records are read (relabel).
        out.append({"size": size, "source": "judged", "qid": q["id"], "question": q["question"],
                    "kind": q.get("kind", ""), "mode": q["mode"],
                    "answerable": False, "ids": ids, "named": named, "rows": rows.tolist(),
                    "labels": [None] * len(ids), "relevant": []})
    for q in reader_items(engine) if part == "readers" else []:
        # A reader's question for one paper, worded unlike its abstract (bench/data/reader_questions_*.jsonl), and
        # the same question with the paper and its near duplicates taken out: a near miss worded as people ask.
        target = q["target"][0]
        for source, drop in (("reader", None), ("reader miss", "target")):
            ids, named, rows = question_rows(engine, q["question"], "ask", drop and near_duplicates(engine, target, ids))
            hit = source == "reader"
            out.append({"size": size, "source": source, "qid": q["id"], "question": q["question"],
                        "kind": f"reader {q['style']}" if hit else "reader miss", "mode": "ask",
                        "answerable": hit, "ids": ids, "named": named, "rows": rows.tolist(),
                        "labels": ([True if d == target else None for d in ids] if hit else
                                   [False] * min(3, len(ids)) + [None] * max(0, len(ids) - 3)),
                        "relevant": [target] if hit else []})
    for item in generated_items(engine, size, generated) if part == "known" else []:
        target = item["target"][0]
        ids, named, rows = question_rows(engine, item["question"], "ask")
        out.append({"size": size, "source": "known", "qid": item["id"], "question": item["question"],
                    "kind": "known", "mode": "ask",
                    "answerable": True, "ids": ids, "named": named, "rows": rows.tolist(),
                    "labels": [True if d == target else None for d in ids], "relevant": [target]})
        drop = near_duplicates(engine, target, ids)
        ids, named, rows = question_rows(engine, item["question"], "ask", drop)
        out.append({"size": size, "source": "near miss", "qid": item["id"], "question": item["question"],
                    "kind": "near miss", "mode": "ask",
                    "answerable": False, "ids": ids, "named": named, "rows": rows.tolist(),
                    "labels": [False] * min(3, len(ids)) + [None] * max(0, len(ids) - 3), "relevant": []})
    return out


@lru_cache(maxsize=1)
def three_k() -> frozenset[str]:
    """The real papers of the 3,000-paper collection (every 7th record of the file, as bench/collections.py)."""
    with gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8") as f:
        return frozenset(json.loads(line)["id"] for i, line in enumerate(f) if i % 7 == 0)


def relabel(records: list[dict]) -> None:
    """The judged records' labels from the current judgements (rows are cached; judgements grow)."""
    labels = {(p["qid"], p["doc_id"]): bool(p["relevant"]) for p in read_jsonl(PAIRS)}
    relevant: dict[str, set[str]] = {}
    for (qid, doc_id), value in labels.items():
        if value:
            relevant.setdefault(qid, set()).add(doc_id)
    for r in records:
        if r["source"] != "judged":
            continue
        r["labels"] = [labels.get((r["qid"], d)) for d in r["ids"]]
        # Relevant papers of this collection: the judged ones it holds (a 3,000-paper judgement holds at 22,000).
        held = {d for d in relevant.get(r["qid"], set())
                if "#" in d or (r["size"] == 3000 and d in three_k()) or r["size"] > 3000}
        r["relevant"] = sorted(held)
        r["answerable"] = bool(held) or any(r["named"])


def pair_data(records: list[dict], part: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    xs, ys, modes = [], [], []
    for r in records:
        if (part == "locked") != locked(r["qid"]):
            continue
        for row, label, named in zip(r["rows"], r["labels"], r["named"]):
            if label is not None and not named:
                xs.append(row)
                ys.append(1.0 if label else 0.0)
                modes.append(r["mode"])
    return np.asarray(xs), np.asarray(ys), modes


def balanced(groups: list[str]) -> np.ndarray:
    """Weights giving each group (a data source: generated, judged, dev) the same total weight, so a thousand
    generated title questions do not outvote the questions people wrote."""
    counts: dict[str, int] = {}
    for g in groups:
        counts[g] = counts.get(g, 0) + 1
    return np.array([1.0 / counts[g] for g in groups])


def pair_sources(records: list[dict], part: str) -> list[str]:
    """The data source of each pair `pair_data` returns, in its order (a generated known item and its near miss
    are one source)."""
    group = {"known": "generated", "near miss": "generated", "reader": "readers", "reader miss": "readers"}
    return [group.get(r["source"], r["source"]) for r in records
            if (part == "locked") == locked(r["qid"])
            for label, named in zip(r["labels"], r["named"]) if label is not None and not named]


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    pos, neg = scores[y == 1], scores[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]))
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def best_f1_cut(p: np.ndarray, y: np.ndarray) -> float:
    """The cut with the best F1 over pairs."""
    best, best_f1 = 0.5, -1.0
    for cut in np.unique(np.round(p, 3)):
        kept = p >= cut
        tp = float((kept & (y == 1)).sum())
        prec = tp / max(kept.sum(), 1)
        rec = tp / max((y == 1).sum(), 1)
        f1 = 2 * prec * rec / max(prec + rec, 1e-9)
        if f1 > best_f1:
            best, best_f1 = float(cut), f1
    return best


def reference() -> tuple[str, dict]:
    """The shipped embedder's name and its statistics on the seeds' generated known items (calibrate.measure)."""
    from rag_bot.engine import Engine
    from rag_bot.grounding.calibrate import known_items, measure
    from rag_bot.settings import Settings
    from rag_bot.store.embedders import embedder_name

    settings = Settings(storage=store_of(38))
    engine = Engine(settings)
    measured = measure(known_items(engine.retriever.papers), retrieve_for(engine), engine.grounding)
    return embedder_name(settings), {**measured, "measured_on": "the seeds (bench/fit/relevance.py --reference)"}


def retrieve_for(engine):
    """A question's ranked papers (ask mode), as calibration retrieves them."""
    from rag_bot.nodes import scored_paper

    return lambda question: [scored_paper(n) for n in engine.retriever.retrieve(engine.query(question, "ask"))]


def load_records(sizes: list[int], parts: tuple[str, ...], generated: int = 300, fresh: bool = False) -> list[dict]:
    """Every labelled question record of these sizes and parts (rows cached per size and part in storage/, which is
    not committed; `fresh` recomputes them), labelled by the current judgements. The readers' part has no 38."""
    from rag_bot.grounding.relevance import MEASURED, with_shares

    records: list[dict] = []
    for size in sizes:
        for part in parts:
            if part in ("readers", "dev") and size == 38:
                continue
            cache = ROOT / "storage" / f"relevance-rows-{size}{STORES['suffix']}-{part}.jsonl.gz"
            if cache.exists() and not fresh:
                with gzip.open(cache, "rt") as f:
                    got = [json.loads(line) for line in f]
                for r in got:  # the measured signals are cached; the shares are derived from them
                    r["rows"] = with_shares(np.asarray([row[:len(MEASURED)] for row in r["rows"]])).tolist()
            else:
                got = collect(size, generated, part)
                if got:
                    with gzip.open(cache, "wt") as f:
                        f.writelines(json.dumps(r) + "\n" for r in got)
            records += got
            print(f"{size} {part}: {len(got)} question records", file=sys.stderr)
    relabel(records)
    return records


def main() -> int:
    from rag_bot.fitted import record
    from rag_bot.grounding.relevance import FEATURES, MEASURED, RelevanceModel, Weights, load, with_shares
    from rag_bot.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", type=int, default=[38, 3000, 22000])
    parser.add_argument("--generated", type=int, default=300)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--fresh", action="store_true", help="recompute the cached rows")
    parser.add_argument("--reference", action="store_true", help="only measure the reference statistics (saved into the shipped model with --write)")
    parser.add_argument("--without", nargs="*", default=[], choices=MEASURED,
                        help="fit as if these signals were not measured (0 for every pair): today's model beside a new "
                             "signal's, on the same rows in one run")
    parser.add_argument("--readers", action="store_true",
                        help="fit on the readers' one-paper questions too (bench/data/reader_questions_*.jsonl), each "
                             "with its near miss, as a fourth source of equal weight")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--stores", default="", metavar="SUFFIX",
                        help="fit on the signals of the stores storage/bench-<size>SUFFIX (copies re-embedded with "
                             "the model RAG_BOT_EMBED_PATH or _URL names: `rag-bot ingest --reembed`), not the shipped "
                             "model's (issue 36, part 4)")
    parser.add_argument("--model-out", type=Path, help="write the fitted model to this file (never the shipped one)")
    parser.add_argument("--cross", nargs="?", const="", default=None, metavar="FOLDER",
                        help="add the trained cross-encoder's signals (train/scorer.py; its folder, default "
                             "train/out/cross-encoder/onnx): measured beside today's model, never written")
    args = parser.parse_args()
    STORES["suffix"] = args.stores
    if args.stores and args.write:
        parser.error("--stores fits on another model's signals: write it with --model-out, not over the shipped model")
    if args.cross is not None and args.write:
        parser.error("--cross measures the cross-encoder beside today's model; the runtime does not compute it")
    embedder, statistics = reference()
    if args.reference:
        model = dataclasses.replace(load(), embedder=embedder, reference=statistics)
        if args.write:
            SHIPPED.write_text(model.to_json())
        print(json.dumps(statistics, indent=1))
        tell_shipped(SHIPPED, args.write)
        return 0
    records = load_records(args.sizes, ("known", "judged") + (("readers",) if args.readers else ()),
                           args.generated, args.fresh)
    for r in records:
        for name in args.without:
            for row in r["rows"]:
                row[MEASURED.index(name)] = 0.0
        if args.without and r["rows"]:
            r["rows"] = with_shares(np.asarray([row[:len(MEASURED)] for row in r["rows"]])).tolist()
    names = list(FEATURES) + (with_cross(records, Path(args.cross) if args.cross else None)
                              if args.cross is not None else [])
    x, y, modes = pair_data(records, "fit")
    sources = pair_sources(records, "fit")
    families, cuts = {}, {}
    for family in ("ask", "area"):
        chosen = np.array([(m == "ask") == (family == "ask") for m in modes])
        xf, yf = x[chosen], y[chosen]
        sample = balanced([g for g, c in zip(sources, chosen) if c])
        mean, scale = xf.mean(axis=0), np.maximum(xf.std(axis=0), 1e-6)  # a signal left out (--without) is constant
        weights, bias = fit_logistic((xf - mean) / scale, yf, L2, sample=sample)
        w = Weights(mean=tuple(round(float(v), 6) for v in mean), scale=tuple(round(float(v), 6) for v in scale),
                    weights=tuple(round(float(v), 6) for v in weights), bias=round(bias, 6))
        families[family] = w
        print(f"{family}: {len(yf)} pairs, {int(yf.sum())} relevant; cross-validated AUC "
              f"{cross_validated_auc(xf, yf, [r for r, c in zip(pair_qids(records, 'fit'), chosen) if c]):.3f}",
              file=sys.stderr)
        p = w.probabilities(xf)
        # The answer cut: over the fit part's questions of this family naming no paper, the best candidate's
        # probability; every answerable question counts once: the highest cut at which at most FALSE_REFUSALS of
        # them are declined.
        best = [(float(w.probabilities(np.asarray(r["rows"])).max()) if r["rows"] else 0.0, r["answerable"],
                 r["source"]) for r in records if not locked(r["qid"]) and not any(r["named"])
                and (r["mode"] == "ask") == (family == "ask")]
        answerable = np.sort([b for b, a, _ in best if a])
        answer = float(answerable[int(FALSE_REFUSALS * len(answerable))]) if len(answerable) else 0.5
        if family == "ask":  # a direct answer's sources: the best F1 over pairs
            cuts[family] = {"answer": round(answer, 4), "source": round(best_f1_cut(p, yf), 4)}
            continue
        # An area's sources: the best F0.5 of its questions' mean topic precision and recall (area_cut), at each
        # collection size (the seeds' areas hold at a lower cut than larger collections'). An area exists when a
        # paper reaches both cuts.
        source = [[PAPERS[size], area_cut(w, [r for r in records if r["size"] == size])]
                  for size in sorted({r["size"] for r in records})]
        cuts[family] = {"answer": [[size, round(max(answer, cut), 4)] for size, cut in source], "source": source}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    settings = Settings()  # the candidate counts the rows were measured among (RAG_BOT_ASK/AREA_CANDIDATES)
    model = RelevanceModel(ask=families["ask"], area=families["area"], cuts=cuts, embedder=embedder,
                           candidates={"ask": settings.ask_candidates, "area": settings.area_candidates},
                           reference=statistics, provenance=record("bench/fit/relevance.py", [DEV, QUESTIONS, PAIRS],
                           f"bench/fit/relevance.py at {commit}: {len(y)} pairs ({int(y.sum())} relevant), "
                           f"sizes {args.sizes}, fit part only"))
    report = {"model": json.loads(model.to_json()), "features": names, "parts": {}}
    for part in ("fit", "locked"):
        report["parts"][part] = evaluate(model, records, part, names)
    report["without"] = args.without
    if args.cross is None and not args.without:
        # The shipped model on the same rows: what a refit changes, read side by side.
        report["shipped"] = {part: evaluate(load(), records, part, names) for part in ("fit", "locked")}
    args.results.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["parts"], indent=1))
    print(model.to_json())
    if args.write:
        SHIPPED.write_text(model.to_json())
    if args.model_out:
        args.model_out.write_text(model.to_json())
    tell_shipped(SHIPPED, args.write)
    return 0


def area_precision_recall(w, records: list[dict], part: str, cut: float) -> tuple[float, float]:
    """Mean topic precision (judged cited papers) and mean recall of the area questions of a part at a cut."""
    precision, recall = [], []
    for r in records:
        if r["kind"] not in AREA_KINDS or (part == "locked") != locked(r["qid"]) or not r["rows"]:
            continue
        probs = w.probabilities(np.asarray(r["rows"]))
        chosen = {d for d, q, n in zip(r["ids"], probs, r["named"]) if n or q >= cut} or {r["ids"][int(probs.argmax())]}
        judged = [lab for d, lab in zip(r["ids"], r["labels"]) if d in chosen and lab is not None]
        if judged:
            precision.append(float(np.mean(judged)))
        if r["relevant"]:
            recall.append(len(chosen & set(r["relevant"])) / len(r["relevant"]))
    return (float(np.mean(precision)) if precision else 0.0), (float(np.mean(recall)) if recall else 0.0)


def area_cut(w, records: list[dict]) -> float:
    """The cut with the best F0.5 (precision weighted twice as much as recall: a paper off the topic costs more
    than one missed) of the fit part's mean topic precision and recall. Issue 20's topic precision of 0.9 is out of reach at
    22,000 papers at any cut (docs/eval.md), so it cannot be the rule."""
    best, best_f = 0.5, -1.0
    for cut in np.round(np.arange(0.05, 0.96, 0.01), 2):
        p, r = area_precision_recall(w, records, "fit", float(cut))
        f = 1.25 * p * r / max(0.25 * p + r, 1e-9)
        if f > best_f:
            best, best_f = float(cut), f
    return best


def pair_qids(records: list[dict], part: str) -> list[str]:
    """The question of each pair `pair_data` returns, in its order."""
    return [r["qid"] for r in records if (part == "locked") == locked(r["qid"])
            for label, named in zip(r["labels"], r["named"]) if label is not None and not named]


def cross_validated_auc(x: np.ndarray, y: np.ndarray, qids: list[str], folds: int = 5) -> float:
    """AUC of held-out predictions, folds by question (a question's pairs never straddle train and test)."""
    fold = np.array([int(hashlib.sha1(q.encode()).hexdigest(), 16) % folds for q in qids])
    held = np.zeros(len(y))
    for k in range(folds):
        train, test = fold != k, fold == k
        if not test.any() or len(set(y[train])) < 2:
            continue
        mean, scale = x[train].mean(axis=0), x[train].std(axis=0) + 1e-9
        w, b = fit_logistic((x[train] - mean) / scale, y[train], L2)
        held[test] = ((x[test] - mean) / scale) @ w + b
    return auc(held, y)


def evaluate(model, records: list[dict], part: str, names: list[str]) -> dict:
    """Pair and question metrics of one part, per size and source (`names`: the rows' columns)."""
    out: dict = {}
    x, y, modes = pair_data(records, part)
    for family in ("ask", "area"):
        chosen = np.array([(m == "ask") == (family == "ask") for m in modes])
        if chosen.any():
            p = model.probabilities(x[chosen], family)
            out[f"pairs {family}"] = {"n": int(chosen.sum()), "relevant": int(y[chosen].sum()),
                                      "auc": round(auc(p, y[chosen]), 3),
                                      # Each signal alone: how well it separates the pairs by itself.
                                      **{f"auc {name}": round(auc(x[chosen][:, names.index(name)], y[chosen]), 3)
                                         for name in ("similarity", "sentence", "cross") if name in names}}
    groups: dict[str, list[dict]] = {}
    for r in records:
        if (part == "locked") == locked(r["qid"]):
            generated = "generated " if r["source"] in ("known", "near miss") else ""
            groups.setdefault(f"{r['size']} {generated}{r['kind']}", []).append(r)
    for name, rs in sorted(groups.items()):
        answered, precision, recall, rr = [], [], [], []
        for r in rs:
            rows = np.asarray(r["rows"])
            probs = model.probabilities(rows, r["mode"]) if len(rows) else np.zeros(0)
            best = float(probs.max()) if len(probs) else 0.0
            answered.append(any(r["named"]) or best >= model.cut(r["mode"], "answer", PAPERS[r["size"]]))
            cut = model.cut(r["mode"], "source", PAPERS[r["size"]])
            chosen = [d for d, q, n in zip(r["ids"], probs, r["named"]) if n or q >= cut]
            if r["relevant"]:
                rel = set(r["relevant"])
                recall.append(len(rel & set(chosen)) / len(rel))
                rank = next((i + 1 for i, d in enumerate(r["ids"][:10]) if d in rel), None)
                rr.append(1 / rank if rank else 0.0)
                judged = [(d, lab) for d, lab in zip(r["ids"], r["labels"]) if d in chosen and lab is not None]
                if judged:
                    precision.append(sum(1 for _, lab in judged if lab) / len(judged))
        out[name] = {"n": len(rs), "answered": round(float(np.mean(answered)), 3),
                     "source recall": round(float(np.mean(recall)), 3) if recall else None,
                     "source precision (judged)": round(float(np.mean(precision)), 3) if precision else None,
                     "MRR@10": round(float(np.mean(rr)), 3) if rr else None}
    return out


if __name__ == "__main__":
    sys.exit(main())
