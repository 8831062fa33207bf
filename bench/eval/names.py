"""Papers asked for by their names: every self-named title of ../shared/data/ml_abstracts.jsonl.gz in a store.

    python -m bench.eval.names [--sizes 3000 22000] [--limit N] [--pairs N]

A title names its paper when it starts "NAME: ..." (rag_bot/retrieval/names.py `title_name`, read from this
checkout's file, so a run against another checkout's engine, `--code /work/base`, measures the same titles).
For every such paper in storage/bench-<size> (bench/collections.py builds them; opened as bench/eval/scale.py
opens them), "What is NAME?" is asked: found first (retrieval's top paper goes by that name, every name), answered
(grounded, and a paper of that name cited; the first --limit names of a fixed shuffle). Pairs of names (consecutive in a fixed shuffle) are asked as "Compare A and B."
and "How does A differ from B?" in turn: the answer cites both. The locked part (rag_bot.evaluation.split
`locked` of the doc_id; a pair by its first paper) is reported beside the rest. The judged questions
(bench/data/relevance_questions.jsonl) are asked too: a false name match is a paper the question is taken to name
that is not among its judged targets. A name an abstract introduces ("we propose NAME", `Paper.aliases`) is asked
too, for found first. Writes bench/results/names.json (the sizes given replace theirs).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import sys
import time
from pathlib import Path

from bench.checkout import use_rag_bot_from
from bench.fit.relevance import QUESTIONS, read_jsonl
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]

DATA = ROOT.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
RESULTS = ROOT / "bench" / "results" / "names.json"


def _names_module():
    """rag_bot/retrieval/names.py of this checkout (whatever engine `--code` selects)."""
    spec = importlib.util.spec_from_file_location("bench_names_of_titles", ROOT / "rag_bot" / "retrieval" / "names.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  # its dataclass looks its module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def self_named(in_store) -> list[tuple[str, str]]:
    """(doc_id, name) of every self-named title of the data file whose paper is in the store."""
    title_name = _names_module().title_name
    found = []
    with gzip.open(DATA, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            name = title_name(record["title"])
            if name and record["id"] in in_store:
                found.append((record["id"], name))
    return found


def _shuffled(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(items, key=lambda item: hashlib.sha1(item[0].encode()).hexdigest())


def _share(rows: list[dict], key: str, part: bool | None = None) -> float | None:
    chosen = [r[key] for r in rows if key in r and (part is None or r["locked"] == part)]
    return round(sum(chosen) / len(chosen), 3) if chosen else None


def shares(rows: list[dict], key: str, label: str | None = None) -> dict[str, float | None]:
    """A figure over all rows, the locked part and the rest, under `label` (the key when not given)."""
    label = label or key
    return {label: _share(rows, key), f"{label} (locked)": _share(rows, key, True),
            f"{label} (rest)": _share(rows, key, False)}


def abstract_named(engine, title_keys: set[str], limit: int | None) -> list[dict]:
    """"What is NAME?" for the first name each paper's abstract introduces (`Paper.aliases`, read at ingest), when
    no title is named so and no other paper introduces it: found first (retrieval only)."""
    from rag_bot.text import normalize_name

    first: dict[str, list[tuple[str, str]]] = {}
    for doc_id in engine.papers:
        aliases = engine.papers[doc_id].aliases
        if aliases:
            first.setdefault(normalize_name(aliases[0]), []).append((doc_id, aliases[0]))
    rows = []
    for key, holders in sorted(first.items(), key=lambda item: hashlib.sha1(item[1][0][0].encode()).hexdigest()):
        if len(holders) > 1 or key in title_keys:
            continue
        doc_id, name = holders[0]
        top = engine.retriever.retrieve_papers(f"What is {name}?")
        rows.append({"name": name, "locked": locked(doc_id), "found first": bool(top) and top[0].paper.doc_id == doc_id})
        if limit is not None and len(rows) >= limit:
            break
    return rows


def measure(engine, limit: int | None, pairs: int | None) -> dict:
    """The name questions and the judged questions' false name matches on one engine."""
    from rag_bot.text import normalize_name

    named = _shuffled(self_named(engine.papers))
    holders: dict[str, set[str]] = {}
    for doc_id, name in named:  # every paper of a name: "found" is any of them (two titles start "Weightless:")
        holders.setdefault(normalize_name(name), set()).add(doc_id)
    started = time.perf_counter()
    singles = []
    for n, (doc_id, name) in enumerate(named):
        question = f"What is {name}?"
        top = engine.retriever.retrieve_papers(question)
        own = holders[normalize_name(name)]
        row = {"doc_id": doc_id, "name": name, "locked": locked(doc_id),
               "found first": bool(top) and top[0].paper.doc_id in own}
        if limit is None or n < limit:  # answering embeds the candidates' sentences at first use: the slow part
            answer = engine.ask(question)
            row["answered"] = answer.grounded and any(c.doc_id in own for c in answer.citations)
        singles.append(row)
    compared = []
    distinct = [item for item in named if len(holders[normalize_name(item[1])]) == 1]
    for n, ((a_id, a), (b_id, b)) in enumerate(zip(distinct[0::2], distinct[1::2])):
        if pairs is not None and n >= pairs:
            break
        question = f"Compare {a} and {b}." if n % 2 == 0 else f"How does {a} differ from {b}?"
        cited = {c.doc_id for c in engine.ask(question).citations}
        compared.append({"question": question, "locked": locked(a_id), "cites both": {a_id, b_id} <= cited})
    by_abstract = abstract_named(engine, {normalize_name(name) for _, name in named}, limit)
    judged, false = read_jsonl(QUESTIONS), []
    for q in judged:
        wrong = [p.paper.title for p in engine.retriever.retrieve_papers(q["question"])
                 if p.named and p.paper.doc_id not in set(q["target"])]
        if wrong:
            false.append({"id": q["id"], "question": q["question"], "named": wrong})
    return {
        "engine": str(Path(sys.modules["rag_bot"].__file__).parent.parent), "papers": engine.index.count(), "self-named": len(named),
        "answers asked": sum("answered" in r for r in singles),
        **shares(singles, "found first"), **shares(singles, "answered"),
        "comparisons": len(compared), **shares(compared, "cites both"),
        "abstract names asked": len(by_abstract), **shares(by_abstract, "found first", "abstract names found first"),
        "judged questions": len(judged), "false name matches": len(false), "false matches": false,
        "seconds": round(time.perf_counter() - started, 1),
        "misses": [r["name"] for r in singles if not (r["found first"] and r.get("answered", True))][:40],
        "pairs missed": [r["question"] for r in compared if not r["cites both"]][:20],
    }


def main() -> int:
    """Measure each size given; merge into bench/results/names.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", type=int, default=[3000])
    parser.add_argument("--limit", type=int, default=None, help="answer at most this many names (a fixed shuffle; every name is still retrieved)")
    parser.add_argument("--pairs", type=int, default=None, help="ask at most this many comparisons")
    parser.add_argument("--label", default="", help="a label for the engine measured (e.g. base)")
    parser.add_argument("--store", type=Path, action="append", default=[], help="another store to measure")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--code", type=Path, help="the checkout whose rag_bot answers (a baseline; default: this one)")
    args = parser.parse_args()
    if args.code:
        use_rag_bot_from(args.code)
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    stores = [(str(size), ROOT / "storage" / f"bench-{size}") for size in args.sizes]  # bench/collections.py
    for size, store in stores + [(str(path), path) for path in args.store]:
        if not (store / "chroma.sqlite3").exists():
            print(f"skipped {size}: {store} not built (python -m bench.collections {size})", file=sys.stderr)
            continue
        got = measure(Engine(Settings(storage=store)), args.limit, args.pairs)
        results[f"{args.label or 'current'} {size}"] = got
        print(json.dumps({k: v for k, v in got.items() if not isinstance(v, list)}))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
