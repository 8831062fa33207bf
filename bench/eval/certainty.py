"""Selective answering, end to end (`engine.ask`): how sure each answer says it is, and how often that is right, at
38, 3,000 and 22,000 papers, fit and locked parts side by side.

    python -m bench.eval.certainty [--sizes 38 3000 22000] [--code DIR --tag base] [--readers 200]

The sets (each question's part by `rag_bot.evaluation.split.locked`):
- dev: tests/data/dev_questions.jsonl (every size; its unanswerable questions only on the seeds, where their labels
  hold);
- judged: bench/data/relevance_questions.jsonl with the judgements of bench/data/relevance_pairs.jsonl (3,000 and
  22,000 papers);
- generated: known items (a real paper's title) and their near misses (the paper and its near duplicates taken out);
- readers: the readers' one-paper questions (bench/data/reader_questions_*.jsonl, the first `--readers` by hash) and
  their near misses;
- typos: every dev question with one realistic typo (`typo`, a fixed seed), all locked, answered beside its
  spelled-right twin.

For each certainty: the share of questions and how often it is right (confident or tentative: the collection answers
the question and the first source shown is a relevant paper; none: the collection does not answer it); the two ways
of being told wrong; the first source shown is the paper asked for; summaries' recall over close + possibly related
papers and the close part's precision (judged papers only). `--code DIR` answers with another checkout's rag_bot (a
baseline: its `grounded` read as confident, a refusal or an answer opening with what is missing as none, every
citation as close). Writes bench/results/certainty-<tag>.json and prints the table of docs/eval.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from pathlib import Path

import numpy as np

from bench.fit.relevance import (
    DEV,
    PAIRS,
    QUESTIONS,
    engine_of,
    generated_items,
    near_duplicates,
    read_jsonl,
    reader_items,
    without,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
SEED = 51  # the typo set's random seed (fixed: the set is the same in every run)
KEYBOARD = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]


def neighbours(letter: str) -> str:
    """The letters beside one on a QWERTY keyboard (a slip of the finger)."""
    for row in KEYBOARD:
        i = row.find(letter)
        if i >= 0:
            return row[max(0, i - 1):i] + row[i + 1:i + 2]
    return ""


def typo(question: str, rng: random.Random) -> str | None:
    """The question with one realistic typo in one of its longer words: two letters swapped, one dropped, one
    doubled, or one struck beside it; None when it has no word of five letters or more."""
    words = [m for m in re.finditer(r"[A-Za-z]{5,}", question)]
    if not words:
        return None
    m = rng.choice(words)
    w, i = m.group(), rng.randrange(1, len(m.group()) - 1)
    kind = rng.choice(["swap", "drop", "double", "slip"])
    if kind == "swap":
        new = w[:i] + w[i + 1] + w[i] + w[i + 2:]
    elif kind == "drop":
        new = w[:i] + w[i + 1:]
    elif kind == "double":
        new = w[:i] + w[i] + w[i:]
    else:
        near = neighbours(w[i].lower())
        new = w[:i] + (rng.choice(near) if near else w[i]) + w[i + 1:]
    if new == w:
        new = w[:i] + w[i + 1:]
    return question[:m.start()] + new + question[m.end():]


# How an answer of a checkout from before the answer's certainty (and rag_bot/answer_words.py) opened when it said
# what the collection lacks: that checkout's own words, the only way to read its answers (`--code`).
EARLIER_MISSING_OPENINGS = ("No paper in the collection", "The collection does not seem to cover")


def certainty_of(answer) -> str:
    """An answer's certainty; a checkout from before it: grounded as confident, a refusal or an answer that opens with
    what the collection lacks as none."""
    value = getattr(answer, "certainty", None)
    if value is not None:
        return value
    first = [line for line in answer.answer.split("\n") if line.strip() and not line.startswith("_")]
    lacks = bool(first) and first[0].startswith(EARLIER_MISSING_OPENINGS)
    return "none" if not answer.grounded or lacks else "confident"


def row(engine, question: str, mode: str | None, relevant: set[str], judged: dict[str, bool] | None = None,
        drop: set[str] | None = None) -> dict:
    """One answer as the figures need it."""
    with without(engine, drop):
        answer = engine.ask(question, mode=mode)
    certainty = certainty_of(answer)
    cited = [c.doc_id for c in answer.citations]
    close = [c.doc_id for c in answer.citations if not getattr(c, "related", False)]
    labels = judged if judged is not None else {d: d in relevant for d in cited}
    close_judged = [labels[d] for d in close if d in labels]
    return {"question": question, "certainty": certainty, "answerable": bool(relevant), "first": cited[0] if cited else None,
            "first right": bool(cited) and cited[0] in relevant, "mode": answer.mode,
            "recall": len(relevant & set(cited)) / len(relevant) if relevant and answer.mode == "summary" else None,
            "close precision": (sum(close_judged) / len(close_judged)) if close_judged and answer.mode == "summary"
            and certainty == "confident" else None,
            "close": len(close), "related": len(cited) - len(close),
            "ms": answer.timings_ms.get("total")}


def figures(rows: list[dict]) -> dict:
    """Selective answering over one set's rows."""
    out: dict = {"n": len(rows)}
    for level in ("confident", "tentative", "none"):
        mine = [r for r in rows if r["certainty"] == level]
        right = [(r["answerable"] and r["first right"]) if level != "none" else not r["answerable"] for r in mine]
        out[level] = [round(len(mine) / max(len(rows), 1), 3), round(float(np.mean(right)), 3) if right else None]
    held = [r for r in rows if r["answerable"]]
    lacking = [r for r in rows if not r["answerable"]]
    out["answerable told none"] = round(np.mean([r["certainty"] == "none" for r in held]), 3) if held else None
    out["unanswerable told confident"] = (round(np.mean([r["certainty"] == "confident" for r in lacking]), 3)
                                          if lacking else None)
    out["confident coverage"] = round(np.mean([r["certainty"] == "confident" for r in held]), 3) if held else None
    out["first source right"] = round(np.mean([r["first right"] for r in held]), 3) if held else None
    for key in ("recall", "close precision"):
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = round(float(np.mean(values)), 3) if values else None
    summaries = [r for r in rows if r["mode"] == "summary" and r["certainty"] == "confident"]
    if summaries:
        out["close / related listed"] = [round(float(np.mean([r["close"] for r in summaries])), 1),
                                         round(float(np.mean([r["related"] for r in summaries])), 1)]
    return out


def told_wrong(r: dict) -> float:
    """1 when the answer tells the user what is not so: a question the collection answers told none, or one it does
    not answer told confident."""
    return float(r["certainty"] == "none" if r["answerable"] else r["certainty"] == "confident")


OUTCOMES = {  # what users meet, per question: (value, applies)
    "told wrong": (told_wrong, lambda r: True),
    "first source right": (lambda r: float(r["first right"]), lambda r: r["answerable"]),
    "summary recall": (lambda r: r["recall"], lambda r: r["recall"] is not None),
}


def paired(base: dict, new: dict, sizes: list[str], part: str = "locked", draws: int = 2000) -> dict:
    """Per size and set, and over all of them, each outcome's mean before and after with the paired bootstrap's 95 %
    interval of the difference (questions matched by set, id and order)."""
    rng = np.random.default_rng(SEED)
    out: dict = {}
    pooled: dict[str, list[tuple[float, float]]] = {k: [] for k in OUTCOMES}
    for size in sizes:
        for name in sorted(set(base["rows"].get(size, {})) & set(new["rows"].get(size, {}))):
            if not name.startswith(part):
                continue
            pairs = list(zip(base["rows"][size][name], new["rows"][size][name]))
            for key, (value, applies) in OUTCOMES.items():
                got = [(value(a), value(b)) for a, b in pairs if applies(a) and applies(b)]
                if not got:
                    continue
                pooled[key] += got
                out[f"{size} {name} {key}"] = interval(got, rng, draws)
    for key, got in pooled.items():
        if got:
            out[f"all {part} {key}"] = interval(got, rng, draws)
    return out


def interval(got: list[tuple[float, float]], rng: np.random.Generator, draws: int) -> dict:
    """Before, after, and the 95 % bootstrap interval of the paired difference (after − before)."""
    a = np.asarray(got, dtype=float)
    diff = a[:, 1] - a[:, 0]
    samples = rng.integers(0, len(diff), size=(draws, len(diff)))
    means = diff[samples].mean(axis=1)
    return {"n": len(diff), "before": round(float(a[:, 0].mean()), 3), "after": round(float(a[:, 1].mean()), 3),
            "difference 95%": [round(float(np.percentile(means, 2.5)), 3), round(float(np.percentile(means, 97.5)), 3)]}


def table(figures: dict) -> str:
    """docs/eval.md's table of one run's figures: a row per size, set and part."""
    def pair(v: list | None) -> str:
        return "—" if not v or v[0] == 0 else f"{v[0]:.2f} / {'—' if v[1] is None else f'{v[1]:.2f}'}"

    def one(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}"

    lines = ["| papers | set | part | n | confident: share / right | tentative | none | answerable told none | "
             "unanswerable told confident | confident coverage | first source right | summary recall (close + "
             "related) | close precision | typos as twin |", "|" + "---|" * 15]
    for size, groups in figures.items():
        for name, f in groups.items():
            if not isinstance(f, dict):
                continue
            part, label = name.split(" ", 1)
            lines.append(f"| {size} | {label} | {part} | {f['n']} | {pair(f['confident'])} | {pair(f['tentative'])} | "
                         f"{pair(f['none'])} | {one(f['answerable told none'])} | "
                         f"{one(f['unanswerable told confident'])} | {one(f['confident coverage'])} | "
                         f"{one(f['first source right'])} | {one(f['recall'])} | {one(f['close precision'])} | "
                         f"{one(f.get('answered as twin'))} |")
    return "\n".join(lines)


def by_hash(items: list[dict], count: int) -> list[dict]:
    """The first `count` items in the order of their id's hash (the same in every run)."""
    return sorted(items, key=lambda q: hashlib.sha1(q["id"].encode()).hexdigest())[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[38, 3000, 22000])
    parser.add_argument("--generated", type=int, default=150)
    parser.add_argument("--readers", type=int, default=200)
    parser.add_argument("--code", type=Path, help="another checkout whose rag_bot answers (a baseline)")
    parser.add_argument("--tag", default="current")
    parser.add_argument("--table", metavar="TAG", help="print docs/eval.md's table of a tag's results, then stop")
    parser.add_argument("--compare", nargs=2, metavar=("BASE", "NEW"),
                        help="compare two tags' results (paired bootstrap on the locked part), then stop")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads((RESULTS / f"certainty-{args.table}.json").read_text())["figures"]))
        return 0
    if args.compare:
        base, new = (json.loads((RESULTS / f"certainty-{tag}.json").read_text()) for tag in args.compare)
        report = {part: paired(base, new, [str(s) for s in args.sizes], part) for part in ("locked", "fit")}
        (RESULTS / f"certainty-{args.compare[0]}-{args.compare[1]}.json").write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps(report, indent=1))
        return 0
    if args.code:
        from bench.checkout import use_rag_bot_from

        use_rag_bot_from(args.code)
    from rag_bot.evaluation.split import locked

    pairs = read_jsonl(PAIRS)
    report: dict = {}
    rows_out: dict = {}
    for size in args.sizes:
        engine = engine_of(size)
        if engine is None:
            continue
        groups: dict[str, list[dict]] = {}

        def add(name: str, qid: str, r: dict, part: str | None = None, groups: dict = groups) -> None:
            r["id"] = qid
            groups.setdefault(f"{part or ('locked' if locked(qid) else 'fit')} {name}", []).append(r)

        dev = read_jsonl(DEV)
        rng = random.Random(SEED)
        for q in dev:
            expected = set(q.get("expected") or []) if q["kind"] != "unanswerable" else set()
            if size != 38 and not expected:
                continue  # among real distractors an unanswerable label may no longer hold
            mode = q.get("mode") if q["kind"] in ("summary", "compare") else None
            twin = row(engine, q["question"], mode, expected)
            add("dev", q["id"], twin)
            typed = typo(q["question"], rng)
            if typed:
                r = row(engine, typed, mode, expected)
                r["as twin"] = r["certainty"] == twin["certainty"] and r["first"] == twin["first"]
                add("typos", q["id"], r, part="locked")
        if size != 38:
            for q in read_jsonl(QUESTIONS):
                labels = {p["doc_id"]: bool(p["relevant"]) for p in pairs if p["qid"] == q["id"]}
                relevant = {d for d, v in labels.items() if v and d in engine.retriever.papers}
                add("judged", q["id"], row(engine, q["question"], q["mode"] if q["mode"] != "ask" else None, relevant,
                                           labels))
            for item in generated_items(engine, size, args.generated):
                target = item["target"][0]
                add("generated", item["id"], row(engine, item["question"], None, {target}))
                ids = [p.paper.doc_id for p in engine.retriever.retrieve_papers(item["question"], top_k=15)]
                add("generated", item["id"], row(engine, item["question"], None, set(), {},
                                                 near_duplicates(engine, target, ids)))
            for q in by_hash(reader_items(engine), args.readers):
                target = q["target"][0]
                add("readers", q["id"], row(engine, q["question"], None, {target}))
                ids = [p.paper.doc_id for p in engine.retriever.retrieve_papers(q["question"], top_k=15)]
                add("readers", q["id"], row(engine, q["question"], None, set(), {},
                                            near_duplicates(engine, target, ids)))
        report[str(size)] = {name: figures(rows) for name, rows in sorted(groups.items())}
        for name, rows in groups.items():
            if name.endswith("typos"):
                report[str(size)][name]["answered as twin"] = round(float(np.mean([r["as twin"] for r in rows])), 3)
        ms = sorted(r["ms"] for rows in groups.values() for r in rows if r["ms"] is not None)
        report[str(size)]["latency ms p50 / p95"] = [ms[len(ms) // 2], ms[int(len(ms) * 0.95)]] if ms else None
        rows_out[str(size)] = groups
        print(json.dumps({size: report[str(size)]}, indent=1), file=sys.stderr)
    out = RESULTS / f"certainty-{args.tag}.json"
    out.write_text(json.dumps({"figures": report, "rows": rows_out}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
